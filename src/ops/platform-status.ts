/** `platform status`: the 429 strikes of the last 24 h, the traffic stop and the pauses in force (sends no request). */
import type { Bucket, PlatformApi, PlatformWait } from '../platform/api.js';
import { TRAFFIC_STOP_AT_STRIKES } from '../platform/rate-budget/budget.js';

export { TRAFFIC_STOP_AT_STRIKES };

/** The client's waits as plain data (a bucket, until when, why), for the faces that show them. */
export type { Bucket, PlatformWait };
export type PlatformWaits = Pick<PlatformApi, 'onWait'>;

interface LedgerStatus {
  status(): Promise<{
    strikes: Array<{ at: number; bucket: string; path: string | null; retryAfterMs: number | null }>;
    pauses: Array<{ bucket: string; until: number }>;
  }>;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export async function platformStatus(admin: LedgerStatus, environment: string) {
  const { strikes, pauses } = await admin.status();
  return {
    environment,
    strikes24h: strikes.length,
    trafficStopped: strikes.length >= TRAFFIC_STOP_AT_STRIKES,
    strikes: strikes.map((s) => ({
      at: iso(s.at),
      bucket: s.bucket,
      path: s.path,
      retryAfterMs: s.retryAfterMs,
    })),
    pauses: pauses.map((p) => ({ bucket: p.bucket, until: iso(p.until) })),
  };
}
