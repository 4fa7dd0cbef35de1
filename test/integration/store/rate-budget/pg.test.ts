/**
 * The shared rate budget on a REAL PostgreSQL: several "replicas" (separate pools, as separate
 * processes would have) spend from one sliding-window log per (key, class). The property checked is the
 * documented one: in ANY half-open window of the documented length, on the database clock, at most
 * `limit` grants, whatever the number of replicas.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../../../../src/lib/clock.js';
import {
  PgSharedRateBudget,
  TrafficStoppedError,
  windowLimits,
  type ClassLimit,
} from '../../../../src/store/rate-budget/pg.js';
import { createTestDatabase, pgSkipReason, type TestDatabase } from '../../../support/pg.js';

let db: TestDatabase;
beforeAll(async () => {
  if (pgSkipReason) return;
  db = await createTestDatabase();
});
afterAll(async () => {
  if (!pgSkipReason) await db.drop();
});

let keys = 0;
const nextKey = (): string => `key-${++keys}`;

function replicas(
  n: number,
  key: string,
  write: ClassLimit,
  read: ClassLimit = { limit: 100, windowMs: 60_000 },
  clocks: Clock[] = [],
  flightMs?: number,
): PgSharedRateBudget[] {
  return Array.from(
    { length: n },
    (_, i) =>
      new PgSharedRateBudget({
        pool: db.pool(`replica-${key}-${i}`, 4),
        key,
        limits: { read, write },
        clock: clocks[i] ?? systemClock,
        ...(flightMs === undefined ? {} : { flightMs }),
      }),
  );
}

/** The database clock now, µs since the epoch (where a call "arrives" in these tests). */
async function dbNowUs(): Promise<bigint> {
  const r = await db
    .pool('clock', 1)
    .query<{ us: string }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us');
  return BigInt(r.rows[0]!.us);
}

/** A replica's clock that is off by offsetMs and whose sleeps last `rate` times what they should. */
function driftingClock(offsetMs: number, rate: number): Clock {
  return {
    now: () => Date.now() + offsetMs,
    sleep: (ms, signal) => systemClock.sleep(ms * rate, signal),
    timeout: (ms, fn) => systemClock.timeout(ms * rate, fn),
  };
}

/** The most grants in any half-open window [g, g + windowUs) starting at a grant (where the max is reached). */
function maxInAnyWindow(grantsUs: bigint[], windowUs: bigint): number {
  const g = [...grantsUs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  let max = 0;
  let j = 0;
  for (let i = 0; i < g.length; i++) {
    while (j < g.length && g[j]! < g[i]! + windowUs) j++;
    max = Math.max(max, j - i);
  }
  return max;
}

/** Every replica runs `loops` callers taking write tokens until durationMs has passed. */
async function hammer(budgets: PgSharedRateBudget[], loops: number, durationMs: number): Promise<bigint[]> {
  const grants: bigint[] = [];
  const signal = AbortSignal.timeout(durationMs);
  await Promise.all(
    budgets.flatMap((b) =>
      Array.from({ length: loops }, async () => {
        while (!signal.aborted) {
          try {
            grants.push((await b.acquire('write', signal)).atUs);
          } catch (err) {
            if (!signal.aborted) throw err;
          }
        }
      }),
    ),
  );
  return grants;
}

describe('windowLimits', () => {
  it('takes the limit, the window in µs and the pace after a strike (⌊L/2⌋ unless given)', () => {
    expect(windowLimits({ limit: 30, windowMs: 60_000 })).toEqual({
      limit: 30,
      slowLimit: 15,
      windowUs: 60_000_000,
    });
    expect(windowLimits({ limit: 1, windowMs: 1_000 })).toEqual({
      limit: 1,
      slowLimit: 1,
      windowUs: 1_000_000,
    });
    expect(windowLimits({ limit: 27, windowMs: 60_000, slowLimit: 13 })).toEqual({
      limit: 27,
      slowLimit: 13,
      windowUs: 60_000_000,
    });
  });
  it('rejects a limit, window or slow limit that cannot work, naming it', () => {
    expect(() => windowLimits({ limit: 0, windowMs: 1000 })).toThrow(
      /limit must be a whole number ≥ 1 \(got 0\)/,
    );
    expect(() => windowLimits({ limit: 5, windowMs: 0 })).toThrow(/windowMs must be > 0/);
    expect(() => windowLimits({ limit: 4, windowMs: 1_000, slowLimit: 5 })).toThrow(
      /slowLimit must be a whole number in 1\.\.4 \(got 5\)/,
    );
  });
});

describe.skipIf(pgSkipReason !== null)('PostgreSQL shared rate budget', () => {
  it('4 replicas hammering one budget: every sliding window holds ≤ limit', async () => {
    const limit = 10;
    const windowMs = 1_000;
    const grants = await hammer(replicas(4, nextKey(), { limit, windowMs }), 3, 2_500);
    expect(grants.length).toBeGreaterThan(limit); // it really ran several windows
    expect(maxInAnyWindow(grants, BigInt(windowMs * 1000))).toBeLessThanOrEqual(limit);
    expect(new Set(grants.map(String)).size).toBe(grants.length); // one row lock: no two grants at one instant
  });

  it('two replicas use the whole limit, not (L − 1) per window (regression: GCRA with burst 2 sustained at most L − 1 and lost every slot a caller woke late for)', async () => {
    const limit = 4;
    const windowMs = 500;
    const grants = await hammer(replicas(2, nextKey(), { limit, windowMs }), 2, 2_300);
    const sorted = grants.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    // Full windows after the first grant: each holds the limit (the log refills as grants age out).
    const w = BigInt(windowMs * 1000);
    const t0 = sorted[0]!;
    const full = [0n, 1n, 2n].map(
      (k) => sorted.filter((g) => g >= t0 + k * w && g < t0 + (k + 1n) * w).length,
    );
    expect(full).toEqual([limit, limit, limit]);
    expect(maxInAnyWindow(grants, w)).toBeLessThanOrEqual(limit);
  });

  it('4 replicas whose clocks are off by minutes and run at different rates: every sliding window still holds ≤ limit', async () => {
    const limit = 10;
    const windowMs = 1_000;
    const clocks = [
      driftingClock(-120_000, 0.3),
      driftingClock(0, 1),
      driftingClock(90_000, 0.7),
      driftingClock(3_600_000, 1.6),
    ];
    const grants = await hammer(replicas(4, nextKey(), { limit, windowMs }, undefined, clocks), 3, 2_500);
    expect(grants.length).toBeGreaterThan(limit);
    expect(maxInAnyWindow(grants, BigInt(windowMs * 1000))).toBeLessThanOrEqual(limit);
  });

  it('a call counts until a window after its ANSWER: calls that arrive late, some by more than half a window, never put more than the limit in any window of arrivals', async () => {
    const limit = 6;
    const windowMs = 600;
    const budgets = replicas(3, nextKey(), { limit, windowMs }, undefined, [], 30_000);
    const arrivals: bigint[] = [];
    const signal = AbortSignal.timeout(2_400);
    let k = 0;
    await Promise.all(
      budgets.flatMap((b) =>
        Array.from({ length: 3 }, async () => {
          while (!signal.aborted) {
            let grant: string;
            try {
              const t = await b.take('write');
              if (t.decision !== 'granted') {
                await systemClock.sleep(t.decision === 'stopped' ? 1000 : t.waitMs, signal);
                continue;
              }
              grant = t.grant;
            } catch (err) {
              if (!signal.aborted) throw err;
              return;
            }
            // On its way: most calls arrive at once, every third 0.1–0.6 of a window late.
            k += 1;
            const late = k % 3 === 0 ? windowMs * (0.1 + (0.5 * ((k * 7919) % 100)) / 100) : 0;
            await new Promise((r) => setTimeout(r, late));
            arrivals.push(await dbNowUs());
            await b.answered([grant]);
          }
        }),
      ),
    );
    expect(arrivals.length).toBeGreaterThan(2 * limit);
    expect(maxInAnyWindow(arrivals, BigInt(windowMs * 1000))).toBeLessThanOrEqual(limit);
  });

  it('a call in flight holds its token until its answer is booked, then for one window on the database clock; one statement books many answers', async () => {
    const [a, b] = replicas(2, nextKey(), { limit: 2, windowMs: 400 }, undefined, [], 60_000);
    const first = await a!.take('write');
    await systemClock.sleep(110); // the spacing of W / 2L
    const second = await b!.take('write');
    expect(first.decision).toBe('granted');
    expect(second.decision).toBe('granted');
    if (first.decision !== 'granted' || second.decision !== 'granted') return;
    await systemClock.sleep(500); // more than a window after both grants
    // Both still in flight: no token, and the wait is a short re-ask (the answer's time is unknown).
    const held = await a!.take('write');
    expect(held).toMatchObject({ decision: 'wait' });
    if (held.decision === 'wait') expect(held.waitMs).toBeLessThanOrEqual(40);
    const before = await dbNowUs();
    await b!.answered([first.grant, second.grant]);
    const booked = await db
      .pool('clock', 1)
      .query<{ us: string }>(
        'SELECT (extract(epoch FROM leaves) * 1000000)::bigint AS us FROM rate_shared_grants WHERE id = ANY($1::bigint[]) AND answered',
        [[first.grant, second.grant]],
      );
    expect(booked.rows).toHaveLength(2);
    const answeredAt = BigInt(booked.rows[0]!.us);
    expect(answeredAt).toBeGreaterThan(before);
    const after = await a!.take('write');
    expect(after).toMatchObject({ decision: 'wait' });
    if (after.decision === 'wait') {
      // A window from the answer (on the database clock), not from the grants long gone.
      expect(after.waitMs).toBeGreaterThan(300);
      expect(after.waitMs).toBeLessThanOrEqual(400);
    }
    await systemClock.sleep(after.decision === 'wait' ? after.waitMs : 0);
    const next = await b!.take('write');
    expect(next.decision).toBe('granted');
    if (next.decision === 'granted') expect(next.atUs - answeredAt).toBeGreaterThanOrEqual(400_000n);
    // Booking twice changes nothing.
    await a!.answered([first.grant]);
  });

  it('a denied call consumes nothing: repeated denials do not push the next grant later', async () => {
    const [a, b] = replicas(2, nextKey(), { limit: 1, windowMs: 60_000 });
    expect((await a!.take('write')).decision).toBe('granted');
    const first = await b!.take('write');
    const second = await a!.take('write');
    expect(first).toMatchObject({ decision: 'wait' });
    expect(second).toMatchObject({ decision: 'wait' });
    if (first.decision !== 'wait' || second.decision !== 'wait') return;
    expect(first.waitMs).toBeLessThanOrEqual(60_000);
    expect(second.waitMs).toBeLessThanOrEqual(first.waitMs);
  });

  it('the classes are separate budgets', async () => {
    const [a] = replicas(1, nextKey(), { limit: 1, windowMs: 60_000 }, { limit: 1, windowMs: 60_000 });
    expect((await a!.take('write')).decision).toBe('granted');
    expect((await a!.take('read')).decision).toBe('granted');
    expect((await a!.take('write')).decision).toBe('wait');
  });

  it('a 429 seen by one replica pauses that class for every replica', async () => {
    const key = nextKey();
    const rs = replicas(4, key, { limit: 100, windowMs: 1_000 }, { limit: 100, windowMs: 1_000 });
    expect(await rs[0]!.recordRateLimited('write', { path: '/v1/boards/x/ack', retryAfterMs: 30_000 })).toBe(
      1,
    );
    for (const r of rs) {
      const t = await r.take('write');
      expect(t.decision).toBe('paused');
      if (t.decision === 'paused') expect(t.waitMs).toBeGreaterThan(25_000);
      expect((await r.take('read')).decision).toBe('granted');
    }
    // A shorter pause computed later never cuts the longer one short (this second strike also
    // stops traffic, which is checked below; here only the pause row).
    await rs[1]!.recordRateLimited('write', { path: null, retryAfterMs: 10 });
    const left = await db
      .pool('check', 1)
      .query<{ ok: boolean }>(
        "SELECT until - clock_timestamp() > interval '25 seconds' AS ok FROM rate_shared_pause WHERE key = $1 AND class = 'write'",
        [key],
      );
    expect(left.rows[0]!.ok).toBe(true);
  });

  it('one strike halves the pace for every replica, the grants before it counted', async () => {
    const [a, b] = replicas(2, nextKey(), { limit: 10, windowMs: 1_000 });
    const first = (await a!.acquire('write')).atMs;
    for (let i = 0; i < 3; i++) await a!.acquire('write'); // grants at least W / 2L = 50 ms apart
    expect(await a!.recordRateLimited('write', { path: null, retryAfterMs: 0 })).toBe(1);
    const fifth = (await b!.acquire('write')).atMs; // the 5th of ⌊10/2⌋ in this window
    expect(fifth - first).toBeLessThan(1_000);
    const t = await a!.take('write');
    expect(t.decision).toBe('wait');
    // Until the first grant leaves the window (not the 100 ms spacing of the slow pace).
    if (t.decision === 'wait') expect(t.waitMs).toBeGreaterThan(1_000 - (Date.now() - first) - 50);
  });

  it('two strikes stop all traffic of the key for every replica until an operator clears them', async () => {
    const key = nextKey();
    const rs = replicas(3, key, { limit: 100, windowMs: 1_000 }, { limit: 100, windowMs: 1_000 });
    const other = replicas(1, nextKey(), { limit: 100, windowMs: 1_000 })[0]!;
    await rs[0]!.recordRateLimited('write', { path: null, retryAfterMs: 0 });
    await rs[1]!.recordRateLimited('read', { path: null, retryAfterMs: 0 });
    for (const r of rs) {
      expect((await r.take('read')).decision).toBe('stopped');
      expect((await r.take('write')).decision).toBe('stopped');
    }
    await expect(rs[2]!.acquire('write')).rejects.toBeInstanceOf(TrafficStoppedError);
    expect((await other.take('write')).decision).toBe('granted'); // another key is not affected
    expect(await rs[2]!.clearStrikes('ops')).toBe(2);
    expect((await rs[0]!.take('read')).decision).toBe('granted');
    expect(await rs[0]!.activeStrikes()).toBe(0);
  });

  it("after a strike at most slowLimit (the client's ⌊L/2⌋) in every sliding window (regression: doubling the interval allowed ⌈L/2⌉)", async () => {
    const key = nextKey();
    // 9 a window; the client allows ⌊9/2⌋ = 4 after a strike.
    const rs = replicas(4, key, { limit: 9, windowMs: 1_000 });
    expect(await rs[0]!.recordRateLimited('write', { path: null, retryAfterMs: 0 })).toBe(1);
    const grants = await hammer(rs, 2, 2_500);
    expect(grants.length).toBeGreaterThanOrEqual(8);
    expect(maxInAnyWindow(grants, 1_000_000n)).toBeLessThanOrEqual(4);
    expect(windowLimits({ limit: 9, windowMs: 1_000 }).slowLimit).toBe(4);
  });

  it('strikes and pauses of the per-process tables (e.g. copied by state migrate) join the ONE shared ledger once, rate_strikes left as it was', async () => {
    const key = nextKey();
    const pool = db.pool('legacy', 1);
    await pool.query('DELETE FROM rate_strikes');
    await pool.query('DELETE FROM rate_pause');
    const at = Date.now() - 60_000;
    await pool.query(
      `INSERT INTO rate_strikes (at, bucket, path, retry_after_ms, cleared_at, cleared_by) VALUES
         ($1, 'write', '/public/v1/boardings/{id}/ack', 30000, NULL, NULL),
         ($2, 'read', '/public/v1/loans/{id}', 2000, NULL, NULL),
         ($3, 'read', '/public/v1/loans', 1000, $4, 'ops: earlier')`,
      [at, at + 1_000, at - 3_600_000, at - 3_000_000],
    );
    await pool.query("INSERT INTO rate_pause (bucket, until) VALUES ('write', $1)", [Date.now() + 20_000]);
    const before = (await pool.query('SELECT * FROM rate_strikes ORDER BY seq')).rows;

    const [a, b] = replicas(2, key, { limit: 10, windowMs: 1_000 });
    expect(await a!.activeStrikes()).toBe(2);
    expect(await b!.activeStrikes()).toBe(2); // adopted once, whichever instance came first
    expect((await b!.take('write')).decision).toBe('stopped');
    const list = await a!.strikeList();
    expect(
      list.map((x) => ({ at: x.at, bucket: x.bucket, path: x.path, retryAfterMs: x.retryAfterMs })),
    ).toEqual([
      { at, bucket: 'write', path: '/public/v1/boardings/{id}/ack', retryAfterMs: 30000 },
      { at: at + 1_000, bucket: 'read', path: '/public/v1/loans/{id}', retryAfterMs: 2000 },
    ]);
    const pauses = await a!.pauseList();
    expect(pauses.map((x) => x.bucket)).toEqual(['write']);
    expect(pauses[0]!.remainingMs).toBeGreaterThan(15_000);
    // The source rows are untouched (state migrate --verify-only still compares them equal).
    expect((await pool.query('SELECT * FROM rate_strikes ORDER BY seq')).rows).toEqual(before);

    expect(await a!.clearStrikes('ops')).toBe(2);
    // A later process adopts nothing again: the clear stands.
    const [c] = replicas(1, key, { limit: 10, windowMs: 1_000 });
    expect(await c!.activeStrikes()).toBe(0);
    expect((await c!.take('read')).decision).toBe('granted');
  });
});
