/**
 * Rate-budget efficiency of the Loan Platform client at full load against the local
 * rate-limited server (its own fixed windows, deliberately offset from the client's).
 *
 *   efficiency = requests the server served per window ÷ budget per window
 *
 * printed against the documented limit and against the allowed budget (limit × headroom; target
 * ≥ 0.90), with the 429 count (target 0). Runs with the in-memory and the SQLite rate state (the
 * latter persists every token before its request leaves). Prints figures; never fails on timing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { systemClock } from '../src/lib/clock.js';
import { setMaxListeners } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../src/lib/logger.js';
import { createPlatformClient } from '../src/platform/client.js';
import { openDatabase } from '../src/store/sqlite/db.js';
import { createMemoryRateState, type RateStateStore } from '../src/platform/rate-budget/ledger.js';
import { createSqliteRateState } from '../src/store/rate-budget/sqlite.js';
import { startRateLimitedServer, type ServerBucket } from '../test/support/rate-limited-server.js';

const WINDOW_MS = 1000;
const WINDOWS = 5;
const LIMITS = { read: 100, write: 30 };
const HEADROOM = 0.9;
const WORKERS = 8;

async function run(label: string, state: RateStateStore): Promise<void> {
  const srv = await startRateLimitedServer({
    readsPerWindow: LIMITS.read,
    writesPerWindow: LIMITS.write,
    windowMs: WINDOW_MS,
    windowOffsetMs: 437,
  });
  const client = createPlatformClient({
    clock: systemClock,
    baseUrl: srv.baseUrl,
    apiKey: srv.apiKey,
    rateLimit: {
      readsPerWindow: LIMITS.read,
      writesPerWindow: LIMITS.write,
      windowMs: WINDOW_MS,
      headroom: HEADROOM,
    },
    timeouts: { connectMs: 2000, headersMs: 5000, bodyMs: 5000 },
    maxRetries: 3,
    pageSize: 100,
    logger: silentLogger(),
    rateState: state,
  });
  const stop = new AbortController();
  // One signal shared by every worker's calls (as a daemon shares its shutdown signal).
  setMaxListeners(0, stop.signal);
  const started = Date.now();
  const end = started + WINDOWS * WINDOW_MS;
  let n = 0;
  const worker = async (bucket: ServerBucket): Promise<void> => {
    while (Date.now() < end) {
      const i = n++;
      try {
        if (bucket === 'read') await client.getLoan(`L${i}`, { signal: stop.signal });
        else
          await client.acknowledgeBoarding(
            `L${i}`,
            {},
            { idempotencyKey: `bench:${label}:${i}`, signal: stop.signal },
          );
      } catch (err) {
        if ((err as { code?: string }).code !== 'aborted') throw err;
      }
    }
  };
  const timer = setTimeout(() => stop.abort(), WINDOWS * WINDOW_MS);
  await Promise.all([
    ...Array.from({ length: WORKERS }, () => worker('read')),
    ...Array.from({ length: WORKERS }, () => worker('write')),
  ]);
  clearTimeout(timer);
  await client.close();
  await srv.close();

  const inRun = (bucket: ServerBucket) =>
    srv.requests.filter((r) => r.bucket === bucket && r.status === 200 && r.at >= started && r.at < end)
      .length;
  const total429 = srv.requests.filter((r) => r.status === 429).length;
  for (const bucket of ['read', 'write'] as const) {
    const served = inRun(bucket);
    const perWindow = served / WINDOWS;
    const limit = LIMITS[bucket];
    const allowed = Math.floor(limit * HEADROOM);
    console.log(
      `${label.padEnd(7)} ${bucket.padEnd(5)} served ${String(served).padStart(4)} in ${WINDOWS} × ${WINDOW_MS} ms = ${perWindow.toFixed(1).padStart(5)}/window | ` +
        `vs limit ${limit}: ${(perWindow / limit).toFixed(3)} | vs allowed ${allowed} (limit × ${HEADROOM}): ${(perWindow / allowed).toFixed(3)}`,
    );
  }
  console.log(
    `${label.padEnd(7)} 429 responses: ${total429} (target 0); client stats rateLimited=${client.stats().rateLimited}`,
  );
}

const dir = mkdtempSync(join(tmpdir(), 'platform-bench-'));
try {
  await run('memory', createMemoryRateState());
  const db = openDatabase(join(dir, 'state.sqlite'));
  await run('sqlite', createSqliteRateState(db));
  db.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
