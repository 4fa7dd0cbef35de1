/**
 * Issue 26 point 3: with the state on PostgreSQL every process on the API key spends from ONE rate
 * budget. Two "replicas" here are two real platform clients (RateBudget + the shared ledger of
 * src/app/platform.ts), each with its own pool and its own clock (off by minutes, sleeping at a
 * different rate), against a real server that enforces the documented limits with its own fixed
 * windows: together they never get a 429 and never exceed the limit in any window, a 429 on one
 * pauses the other, 2 strikes stop both, and a clear from a third process resumes both.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { rateAdminFor, sharedRateLedger } from '../../../src/app/platform.js';
import { SharedLedgerRateSpend } from '../../../src/platform/rate-budget/shared-ledger.js';
import { systemClock, type Clock } from '../../../src/lib/clock.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import type { PlatformClient } from '../../../src/platform/client.js';
import { openPgPool } from '../../../src/store/pg/pool.js';
import { startRateLimitedServer, type RateLimitedServer } from '../../support/rate-limited-server.js';
import {
  createTestDatabase,
  pgClientConfig,
  pgServerAddress,
  pgSkipReason,
  type TestDatabase,
  viaPort,
} from '../../support/pg.js';
import { startTcpSwitch } from '../../support/tcp-switch.js';
import { clientFor, maxInSliding } from './helpers.js';
import { pgStore } from '../../../src/store/pg/store.js';

/** A replica's clock that is off by offsetMs and whose sleeps last `rate` times what they should. */
function driftingClock(offsetMs: number, rate: number): Clock {
  return {
    now: () => Date.now() + offsetMs,
    sleep: (ms, signal) => systemClock.sleep(ms * rate, signal),
    timeout: (ms, fn) => systemClock.timeout(ms * rate, fn),
  };
}

describe.skipIf(pgSkipReason !== null)('one rate budget for every replica on PostgreSQL', () => {
  let db: TestDatabase;
  const cleanups: Array<() => Promise<void> | void> = [];
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function server(o: Parameters<typeof startRateLimitedServer>[0]): Promise<RateLimitedServer> {
    const s = await startRateLimitedServer(o);
    cleanups.push(() => s.close());
    return s;
  }

  function platformConfig(srv: RateLimitedServer): {
    apiKey: string;
    rateLimit: { readsPerWindow: number; writesPerWindow: number; windowMs: number; headroom: number };
  } {
    return {
      apiKey: srv.apiKey,
      rateLimit: {
        readsPerWindow: srv.limits.read,
        writesPerWindow: srv.limits.write,
        windowMs: srv.limits.windowMs,
        headroom: 0.9,
      },
    };
  }

  /** A replica: its own pool (as its own process would have), its own clock, the shared ledger. */
  function replica(srv: RateLimitedServer, name: string, clock: Clock = systemClock): PlatformClient {
    const pool = db.pool(name, 3);
    const client = clientFor(srv, {
      clock,
      rateSpend: new SharedLedgerRateSpend(sharedRateLedger(platformConfig(srv), pool, { clock })),
    });
    cleanups.push(() => client.close());
    return client;
  }

  it('two replicas with drifting clocks: 0 × 429 and at most the limit in every sliding window, where each alone would spend the whole budget', async () => {
    const srv = await server({
      readsPerWindow: 40,
      writesPerWindow: 20,
      windowMs: 1000,
      windowOffsetMs: 430,
    });
    const a = replica(srv, 'replica-a', driftingClock(-180_000, 0.6));
    const b = replica(srv, 'replica-b', driftingClock(+95_000, 1.5));
    const work = (c: PlatformClient, tag: string): Array<Promise<unknown>> => [
      ...Array.from({ length: 60 }, (_, i) => c.getLoan(`${tag}-${i}`)),
      ...Array.from({ length: 24 }, (_, i) =>
        c.acknowledgeBoarding(`${tag}-${i}`, { ok: true }, { idempotencyKey: `ack:${tag}-${i}` }),
      ),
    ];
    const started = Date.now();
    const results = await Promise.all([...work(a, 'A'), ...work(b, 'B')]);
    const tookMs = Date.now() - started;
    expect(results).toHaveLength(168);

    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(0);
    expect(a.stats().rateLimited + b.stats().rateLimited).toBe(0);
    // The documented limit holds in ANY interval of the window's length (arrival times at the server).
    expect(srv.maxInAnyWindow('read', 1000)).toBeLessThanOrEqual(40);
    expect(srv.maxInAnyWindow('write', 1000)).toBeLessThanOrEqual(20);
    for (const [, n] of srv.windowCounts('read')) expect(n).toBeLessThanOrEqual(40);
    for (const [, n] of srv.windowCounts('write')) expect(n).toBeLessThanOrEqual(20);
    // Both replicas spent from the one budget...
    expect(a.stats().calls.read['200']).toBe(60);
    expect(b.stats().calls.write['200']).toBe(24);
    // ...at the pace of ONE client: 48 writes through 18 a window (burst 2: 17 sustained) need
    // more than 2 windows; two budgets of their own would have sent them in 1.3.
    expect(tookMs).toBeGreaterThanOrEqual(2000);
    const writes = srv.requests.filter((r) => r.bucket === 'write').map((r) => r.at);
    expect(maxInSliding(writes, 1000)).toBeLessThanOrEqual(20);
  });

  it('a 429 on one replica pauses the other too (shared pause) and records ONE strike in the shared ledger', async () => {
    const srv = await server({ readsPerWindow: 40, writesPerWindow: 20, windowMs: 1000 });
    const a = replica(srv, 'pause-a');
    const b = replica(srv, 'pause-b', driftingClock(42_000, 1));
    await expect(b.getLoan('warm')).resolves.toBeTruthy();
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 2 });
    const refused = await a.getLoan('A').catch((e: unknown) => e);
    expect(isPlatformError(refused) && refused.code).toBe('rate_limit.exceeded');
    const t429 = srv.requests.find((r) => r.status === 429)!.at;

    // B never saw a 429: it waits for A's pause all the same, and its call then succeeds.
    await expect(b.getLoan('B')).resolves.toMatchObject({ id: 'B' });
    const bRead = srv.requests.filter((r) => r.path.endsWith('/B'));
    expect(bRead).toHaveLength(1);
    expect(bRead[0]!.at - t429).toBeGreaterThanOrEqual(2000);
    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(1);
    // Writes are a separate class: not paused by a read 429.
    await expect(b.acknowledgeBoarding('B', {}, { idempotencyKey: 'ack:B' })).resolves.toBeTruthy();

    const admin = rateAdminFor(
      { platform: platformConfig(srv), store: { engine: 'postgres' } },
      pgStore(db.pool('admin', 1), 'test'),
      {
        clock: systemClock,
      },
    );
    const { strikes } = await admin.status();
    expect(strikes).toHaveLength(1);
    expect(strikes[0]).toMatchObject({ bucket: 'read', path: '/public/v1/loans/{id}' });
    // B learnt the strike from the ledger's answer: half pace, one request in flight.
    expect(b.health().strikes24h).toBe(1);
    expect(b.health().budgets.find((x) => x.bucket === 'read')?.allowed).toBe(18);
    await admin.clearStrikes('test');
  });

  it('2 strikes stop all traffic on both replicas; a clear from a third process resumes both', async () => {
    const srv = await server({ readsPerWindow: 40, writesPerWindow: 20, windowMs: 1000 });
    // Clocks off by less than a second here: a clock behind the platform's reads its absolute
    // X-RateLimit-Reset as further away and pauses longer (the safe side), which only slows the test.
    const a = replica(srv, 'stop-a', driftingClock(-400, 0.8));
    const b = replica(srv, 'stop-b', driftingClock(+300, 1.2));
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 1 });
    await expect(a.getLoan('A1')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    srv.forceRateLimit({ bucket: 'write', retryAfterSeconds: 1 });
    await expect(b.acknowledgeBoarding('B1', {}, { idempotencyKey: 'ack:B1' })).rejects.toMatchObject({
      code: 'rate_limit.exceeded',
    });
    expect(b.health().strikes24h).toBe(2);

    const sent = srv.requests.length;
    // Both stopped, reads and writes, without a request leaving (A never saw the second 429).
    for (const call of [
      () => a.getLoan('A2'),
      () => a.acknowledgeBoarding('A2', {}, { idempotencyKey: 'ack:A2' }),
      () => b.getLoan('B2'),
      () => b.acknowledgeBoarding('B2', {}, { idempotencyKey: 'ack:B2' }),
    ]) {
      await expect(call()).rejects.toMatchObject({
        code: 'rate_limit.traffic_stopped',
        retryable: false,
        fatal: false,
      });
    }
    expect(srv.requests.length).toBe(sent);
    await vi.waitFor(() => expect(a.health().trafficStopped).toBe(true), { timeout: 5000, interval: 20 });

    // The operator clears on another host: a third process on the same database.
    const third = rateAdminFor(
      { platform: platformConfig(srv), store: { engine: 'postgres' } },
      pgStore(db.pool('operator', 1), 'test'),
      {
        clock: systemClock,
      },
    );
    expect(await third.clearStrikes('ops:anna: ticket 4711')).toBe(2);
    await expect(a.acknowledgeBoarding('A3', {}, { idempotencyKey: 'ack:A3' })).resolves.toBeTruthy();
    await expect(b.getLoan('B3')).resolves.toMatchObject({ id: 'B3' });
    await expect(a.getLoan('A3')).resolves.toMatchObject({ id: 'A3' });
    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(2);
    await vi.waitFor(() => expect(a.health().trafficStopped).toBe(false), { timeout: 5000, interval: 20 });
  });

  it('the state database unreachable while taking a token: the call is not sent and fails with the retryable network code; it goes out once the database is back', async () => {
    const srv = await server({ readsPerWindow: 40, writesPerWindow: 20, windowMs: 1000 });
    const link = await startTcpSwitch(pgServerAddress(), 'off');
    cleanups.push(() => link.close());
    const url = viaPort(db.url, link.port);
    const pool = openPgPool({ url, client: pgClientConfig(url), applicationName: 'unreachable', max: 2 });
    pool.on('error', () => {});
    cleanups.push(() => pool.end());
    const client = clientFor(srv, {
      maxRetries: 1,
      rateSpend: new SharedLedgerRateSpend(
        sharedRateLedger(platformConfig(srv), pool, { clock: systemClock }),
      ),
    });
    cleanups.push(() => client.close());

    const err = await client.getLoan('L1').catch((e: unknown) => e);
    expect(isPlatformError(err) && err.code).toBe('network');
    expect(isPlatformError(err) && err.retryable).toBe(true);
    expect((err as Error).message).toMatch(
      /shared rate budget \(state database\) is unreachable, so the call was not sent/,
    );
    await expect(client.acknowledgeBoarding('L1', {}, { idempotencyKey: 'ack:L1' })).rejects.toMatchObject({
      code: 'network',
    });
    expect(srv.requests).toHaveLength(0);
    expect(link.accepted()).toBeGreaterThan(0);

    link.on();
    await expect(client.getLoan('L1')).resolves.toMatchObject({ id: 'L1' });
    expect(srv.requests).toHaveLength(1);
  });
});
