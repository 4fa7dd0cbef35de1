import { mkdtempSync, rmSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../../../src/lib/logger.js';
import {
  createPlatformClient,
  type PlatformClient,
  type PlatformClientOptions,
} from '../../../src/platform/client.js';
import type { RateLimitedServer } from '../../support/rate-limited-server.js';

/** A client pointed at the test server, with fast retry backoff and a short pause jitter. */
export function clientFor(
  srv: RateLimitedServer,
  overrides: Partial<PlatformClientOptions> = {},
  logger: Logger = silentLogger(),
): PlatformClient {
  return createPlatformClient({
    clock: systemClock,
    baseUrl: srv.baseUrl,
    apiKey: srv.apiKey,
    // The test's blob host is on 127.0.0.1: allow-listed, like an internal document store.
    documentHosts: { allow: ['127.0.0.1'] },
    rateLimit: {
      readsPerWindow: srv.limits.read,
      writesPerWindow: srv.limits.write,
      windowMs: srv.limits.windowMs,
      headroom: 0.9,
    },
    timeouts: { connectMs: 2_000, headersMs: 5_000, bodyMs: 5_000 },
    maxRetries: 3,
    pageSize: 10,
    logger,
    retry: { minDelayMs: 10, maxDelayMs: 50 },
    pauseJitterMs: [0, 50],
    ...overrides,
  });
}

export function tempDir(): { dir: string; file: (name: string) => string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'platform-it-'));
  return { dir, file: (n) => join(dir, n), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Largest number of timestamps inside any interval of windowMs (a sliding window audit). */
export function maxInSliding(times: readonly number[], windowMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let max = 0;
  let j = 0;
  for (let i = 0; i < t.length; i++) {
    while ((t[i] as number) - (t[j] as number) >= windowMs) j += 1;
    max = Math.max(max, i - j + 1);
  }
  return max;
}
