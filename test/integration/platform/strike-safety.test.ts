import { afterEach, describe, expect, it } from 'vitest';
import { isPlatformError } from '../../../src/platform/errors.js';
import type { PlatformClient } from '../../../src/platform/client.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { createMemoryRateState } from '../../../src/platform/rate-budget/ledger.js';
import { createSqliteRateState } from '../../../src/store/rate-budget/sqlite.js';
import { startRateLimitedServer, type RateLimitedServer } from '../../support/rate-limited-server.js';
import { clientFor, tempDir } from './helpers.js';

/**
 * The platform revokes a live key at 3 rate-limit strikes (429s) in 24 h. Whatever the server
 * does, this client must never deliver the third one itself: no re-send after a 429, nothing sent
 * at all after 2 strikes, and never more requests in flight than strikes left before the stop.
 */
describe('rate-limit strike safety against a server that refuses', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });
  async function server(): Promise<RateLimitedServer> {
    const s = await startRateLimitedServer({ windowMs: 1000 });
    cleanups.push(() => s.close());
    return s;
  }
  function client(srv: RateLimitedServer, overrides: Parameters<typeof clientFor>[1] = {}): PlatformClient {
    const c = clientFor(srv, { rateState: createMemoryRateState(), ...overrides });
    cleanups.push(() => c.close());
    return c;
  }
  function db(path: string): Db {
    const d = openDatabase(path);
    cleanups.push(() => {
      d.close();
    });
    return d;
  }
  const limited = (srv: RateLimitedServer): number => srv.requests.filter((r) => r.status === 429).length;
  const settle = async (calls: Array<Promise<unknown>>): Promise<unknown[]> =>
    Promise.all(
      calls.map((p) =>
        p.then(
          () => null,
          (e: unknown) => e,
        ),
      ),
    );

  it('one call against a server that refuses everything sends exactly one request (one strike) and fails retryable', async () => {
    const srv = await server();
    const c = client(srv);
    srv.refuseAll({ retryAfterSeconds: 0 });
    const err = await c.getLoan('L1').catch((e: unknown) => e);
    expect(isPlatformError(err) && err.code).toBe('rate_limit.exceeded');
    expect(isPlatformError(err) && err.retryable).toBe(true);
    expect(srv.requests).toHaveLength(1);
    expect(c.health().strikes24h).toBe(1);
    expect(c.stats().rateLimited).toBe(1);
    // A write too: one request, no re-send with the same Idempotency-Key.
    const w = await c.acknowledgeBoarding('L1', {}, { idempotencyKey: 'ack:L1' }).catch((e: unknown) => e);
    expect(isPlatformError(w) && w.code).toBe('rate_limit.exceeded');
    expect(srv.requests.filter((r) => r.bucket === 'write')).toHaveLength(1);
    expect(c.health().strikes24h).toBe(2);
  });

  it('after 2 strikes every call, reads included, fails fast without a request; health says stopped', async () => {
    const srv = await server();
    const c = client(srv);
    srv.refuseAll({ retryAfterSeconds: 0 });
    await expect(c.getLoan('L1')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    await expect(c.acknowledgeBoarding('L1', {}, { idempotencyKey: 'ack:L1' })).rejects.toMatchObject({
      code: 'rate_limit.exceeded',
    });
    expect(c.health()).toMatchObject({ strikes24h: 2, trafficStopped: true, stopped: true });
    srv.stopRefusing();
    const sent = srv.requests.length;
    for (const call of [
      c.getLoan('L2'),
      c.getEntities('L2'),
      c.listDocuments('L2'),
      c.listProducts(),
      c.acknowledgeBoarding('L2', {}, { idempotencyKey: 'ack:L2' }),
    ]) {
      await expect(call).rejects.toMatchObject({
        code: 'rate_limit.traffic_stopped',
        retryable: false,
        fatal: false,
      });
    }
    const walk = (async () => {
      for await (const page of c.boardingQueue()) void page;
    })();
    await expect(walk).rejects.toMatchObject({ code: 'rate_limit.traffic_stopped' });
    expect(srv.requests.length).toBe(sent);
  });

  it('8 concurrent callers against a fresh client and a refusing server: 2 × 429 at most (the stop), never 3', async () => {
    const srv = await server();
    const c = client(srv);
    srv.refuseAll({ bucket: 'read', retryAfterSeconds: 1, holdMs: 50 });
    const results = await settle(Array.from({ length: 8 }, (_, i) => c.getLoan(`L${i}`)));
    // The first request is a probe (nothing answered yet); its 429 pauses the bucket and cuts the
    // in-flight bound to 1; after the pause one more goes, its 429 is the second strike and the stop.
    expect(limited(srv)).toBe(2);
    expect(srv.maxConcurrent('read')).toBe(1);
    expect(c.health().strikes24h).toBe(2);
    const codes = results.map((e) => (isPlatformError(e) ? e.code : 'ok'));
    expect(codes.filter((x) => x === 'rate_limit.exceeded')).toHaveLength(2);
    expect(codes.filter((x) => x === 'rate_limit.traffic_stopped')).toHaveLength(6);
  });

  it('a warm client whose server suddenly refuses everything: in flight ≤ strikes left, so 2 × 429 at most', async () => {
    const srv = await server();
    const c = client(srv);
    // Warm up: the server said plenty remain (99 of 100), 8 connections are allowed.
    await Promise.all(Array.from({ length: 4 }, (_, i) => c.getLoan(`W${i}`)));
    srv.refuseAll({ bucket: 'read', retryAfterSeconds: 1, holdMs: 100 });
    const before = srv.requests.length;
    const results = await settle(Array.from({ length: 8 }, (_, i) => c.getLoan(`L${i}`)));
    expect(srv.requests.length - before).toBe(2);
    expect(limited(srv)).toBe(2);
    expect(srv.maxConcurrent('read')).toBeLessThanOrEqual(2);
    expect(c.health().stopped).toBe(true);
    expect(results.filter((e) => isPlatformError(e) && e.code === 'rate_limit.traffic_stopped')).toHaveLength(
      6,
    );
  });

  it('a warm client whose server refuses reads and writes at once: 2 × 429 in all, never 3 (regression: the in-flight bound was per bucket, 2 reads + 2 writes could bring 4 strikes)', async () => {
    const srv = await server();
    const c = client(srv);
    // Warm both buckets: each has answered, and the server said plenty remain.
    await Promise.all(Array.from({ length: 3 }, (_, i) => c.getLoan(`W${i}`)));
    await settle(
      Array.from({ length: 3 }, (_, i) =>
        c.acknowledgeBoarding(`W${i}`, {}, { idempotencyKey: `ack:W${i}` }),
      ),
    );
    expect(c.health().strikes24h).toBe(0);
    srv.refuseAll({ retryAfterSeconds: 1, holdMs: 150 });
    const reads = Array.from({ length: 4 }, (_, i) => c.getLoan(`L${i}`));
    const writes = Array.from({ length: 4 }, (_, i) =>
      c.acknowledgeBoarding(`L${i}`, {}, { idempotencyKey: `ack:L${i}` }),
    );
    await settle([...reads, ...writes]);
    // The platform may count every 429 as a strike (platform-api.md: "exceed rate limits 3 or more
    // times"; a burst is not said to count once): the client never has more requests in flight,
    // reads and writes together, than strikes left before the stop.
    expect(limited(srv)).toBe(2);
    expect(c.health().strikes24h).toBe(2);
    expect(c.health().stopped).toBe(true);
  });

  it('after one strike, reads and writes at once against a refusing server: one more 429 at most (the stop), never a third strike', async () => {
    const srv = await server();
    const c = client(srv);
    await c.getLoan('W');
    await settle([c.acknowledgeBoarding('W', {}, { idempotencyKey: 'ack:W' })]);
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 0 });
    await expect(c.getLoan('X')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    expect(c.health().strikes24h).toBe(1);
    srv.refuseAll({ retryAfterSeconds: 1, holdMs: 150 });
    await settle([
      ...Array.from({ length: 3 }, (_, i) => c.getLoan(`L${i}`)),
      ...Array.from({ length: 3 }, (_, i) =>
        c.acknowledgeBoarding(`L${i}`, {}, { idempotencyKey: `ack:L${i}` }),
      ),
    ]);
    expect(limited(srv)).toBe(2);
    expect(c.health().strikes24h).toBe(2);
  });

  it('after one strike at most one request per bucket is in flight until it ages out or is cleared', async () => {
    const srv = await server();
    srv.route('GET', '/public/v1/products', async () => {
      // The server holds each request a little, so concurrent calls would overlap if allowed to.
      await new Promise((r) => setTimeout(r, 20));
      return { body: { data: [] } };
    });
    const c = client(srv);
    await c.getLoan('W');
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 0 });
    await expect(c.getLoan('X')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    expect(c.health().strikes24h).toBe(1);
    await Promise.all(Array.from({ length: 8 }, () => c.listProducts()));
    expect(srv.maxConcurrent('read')).toBe(1);
    expect(c.health().strikes24h).toBe(1);
    await c.clearStrikes('ops:test');
    await Promise.all(Array.from({ length: 8 }, () => c.listProducts()));
    expect(srv.maxConcurrent('read')).toBe(2);
  });

  it('a 429 whose body trickles stops the bucket at its status line: no write goes out under it (issue 37)', async () => {
    const srv = await server();
    const c = client(srv);
    await c.acknowledgeBoarding('W', {}, { idempotencyKey: 'ack:W' });
    srv.forceRateLimit({ bucket: 'write', retryAfterSeconds: 1, bodyDelayMs: 1500 });
    const first = c.acknowledgeBoarding('A', {}, { idempotencyKey: 'ack:A' }).catch((e: unknown) => e);
    // The 429's headers are in; its body is still coming. A second caller has a free slot (2 in flight).
    await new Promise((r) => setTimeout(r, 300));
    const second = c.acknowledgeBoarding('B', {}, { idempotencyKey: 'ack:B' });
    expect(await first).toMatchObject({ code: 'rate_limit.exceeded' });
    await second;
    const the429 = srv.requests.find((r) => r.status === 429)!;
    const b = srv.requests.find((r) => r.path === '/public/v1/loans/B/boarding')!;
    // Only the one 429 (one strike): B waited out the Retry-After instead of meeting the refusal.
    expect(limited(srv)).toBe(1);
    expect(c.health().strikes24h).toBe(1);
    expect(b.at - the429.at).toBeGreaterThanOrEqual(1000);
  });

  it('an operator clear from another process (shared state database) resumes traffic of a stopped client', async () => {
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const path = tmp.file('state.sqlite');
    const srv = await server();
    const daemon = client(srv, { rateState: createSqliteRateState(db(path)) });
    srv.refuseAll({ retryAfterSeconds: 0 });
    await expect(daemon.getLoan('L1')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    await expect(daemon.getLoan('L1')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    expect(daemon.health().stopped).toBe(true);
    await expect(daemon.getLoan('L1')).rejects.toMatchObject({ code: 'rate_limit.traffic_stopped' });
    srv.stopRefusing();

    // `boarding-connector platform strikes clear` runs in its own process on the same database.
    const cli = createSqliteRateState(db(path));
    expect(cli.clearStrikes('ops:alice', Date.now())).toBe(2);
    cli.close?.();

    expect(daemon.health()).toMatchObject({ stopped: false, trafficStopped: false, strikes24h: 0 });
    await expect(daemon.getLoan('L2')).resolves.toMatchObject({ id: 'L2' });
    await expect(daemon.acknowledgeBoarding('L2', {}, { idempotencyKey: 'ack:L2' })).resolves.toBeTruthy();
  });
});
