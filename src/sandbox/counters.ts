/** What the sandbox observed, for tests and the demo to assert on (GET /admin/counters). */
export interface Counters {
  requests: Record<string, number>;
  byBucket: { read: number; write: number; legacy: number };
  rateLimited: number;
  rateLimitedByBucket: { read: number; write: number; legacy: number };
  /** Keys revoked for rate-limit strikes (strike revocation on). */
  revokedKeys: number;
  acks: Record<string, number>;
  ackKeys: Record<string, string[]>;
  duplicateAcks: Record<string, number>;
  idempotentReplays: number;
  downloads: number;
  downloadsWithAuthorization: number;
  downloadsRejected: number;
  faults: {
    injected5xx: number;
    resets: number;
    resetsAfterCommit: number;
    delayed: number;
    slowBodies: number;
    injected429: number;
  };
  webhookDeliveries: {
    attempts: number;
    succeeded: number;
    failed: number;
    byEndpoint: Record<string, { attempts: number; succeeded: number; failed: number }>;
    byType: Record<string, number>;
  };
}

export function emptyCounters(): Counters {
  return {
    requests: {},
    byBucket: { read: 0, write: 0, legacy: 0 },
    rateLimited: 0,
    rateLimitedByBucket: { read: 0, write: 0, legacy: 0 },
    revokedKeys: 0,
    acks: {},
    ackKeys: {},
    duplicateAcks: {},
    idempotentReplays: 0,
    downloads: 0,
    downloadsWithAuthorization: 0,
    downloadsRejected: 0,
    faults: { injected5xx: 0, resets: 0, resetsAfterCommit: 0, delayed: 0, slowBodies: 0, injected429: 0 },
    webhookDeliveries: { attempts: 0, succeeded: 0, failed: 0, byEndpoint: {}, byType: {} },
  };
}

export function bump(map: Record<string, number>, key: string, by = 1): void {
  map[key] = (map[key] ?? 0) + by;
}
