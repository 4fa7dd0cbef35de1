import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { createMemoryRateState } from '../../../src/platform/rate-budget/ledger.js';
import { createSqliteRateState } from '../../../src/store/rate-budget/sqlite.js';
import { startRateLimitedServer, type RateLimitedServer } from '../../support/rate-limited-server.js';
import { clientFor, maxInSliding, tempDir } from './helpers.js';

describe('rate budget against a server that enforces the documented limits', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });
  async function server(o: Parameters<typeof startRateLimitedServer>[0] = {}): Promise<RateLimitedServer> {
    const s = await startRateLimitedServer(o);
    cleanups.push(() => s.close());
    return s;
  }
  function db(path: string): Db {
    const d = openDatabase(path);
    cleanups.push(() => {
      d.close();
    });
    return d;
  }

  it('pushes 300 reads and 80 writes through a 1 s window with zero 429s and never exceeds the limit in any window', async () => {
    const srv = await server({
      readsPerWindow: 100,
      writesPerWindow: 30,
      windowMs: 1000,
      windowOffsetMs: 370,
    });
    const state = createMemoryRateState();
    const client = clientFor(srv, { rateState: state });
    cleanups.push(() => client.close());
    const reads = Array.from({ length: 300 }, (_, i) => client.getLoan(`L${i}`));
    const writes = Array.from({ length: 80 }, (_, i) =>
      client.acknowledgeBoarding(`L${i}`, { ok: true }, { idempotencyKey: `ack:L${i}` }),
    );
    const results = await Promise.all([...reads, ...writes]);
    expect(results).toHaveLength(380);

    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(0);
    expect(srv.requests.filter((r) => r.bucket === 'read')).toHaveLength(300);
    expect(srv.requests.filter((r) => r.bucket === 'write')).toHaveLength(80);
    for (const [, n] of srv.windowCounts('read')) expect(n).toBeLessThanOrEqual(100);
    for (const [, n] of srv.windowCounts('write')) expect(n).toBeLessThanOrEqual(30);
    // Stronger than the server's fixed windows: the client sent at most limit × headroom in ANY
    // interval of 1 s, wherever it starts (from the spend it recorded before each send).
    expect(maxInSliding(state.loadSpend('read', 0), 1000)).toBeLessThanOrEqual(90);
    expect(maxInSliding(state.loadSpend('write', 0), 1000)).toBeLessThanOrEqual(27);
    expect(client.stats().rateLimited).toBe(0);
    expect(client.stats().calls.read['200']).toBe(300);
    expect(client.stats().calls.write['200']).toBe(80);
  });

  it('a host 2 min behind the platform waits out a spent server window in about a second, not 2 min (issue 37)', async () => {
    // The platform counts fewer than this client allows itself (another process on the key): its
    // X-RateLimit-Remaining binds, until its X-RateLimit-Reset, a Unix time on the PLATFORM's clock.
    const srv = await server({ writesPerWindow: 3, windowMs: 1000 });
    const behind = { ...systemClock, now: () => Date.now() - 120_000 };
    const c = clientFor(srv, {
      clock: behind,
      rateState: createMemoryRateState(),
      rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: 1000, headroom: 0.9 },
    });
    cleanups.push(() => c.close());
    const t0 = Date.now();
    for (let i = 0; i < 9; i++) await c.acknowledgeBoarding(`L${i}`, {}, { idempotencyKey: `ack:L${i}` });
    const took = Date.now() - t0;
    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(0);
    // 9 writes at 3 a server window: about 3 windows, plus a second of the header's rounding each.
    expect(took).toBeLessThan(10_000);
  }, 20_000);

  it('a forced 429 with Retry-After: 2 pauses the whole bucket at least 2 s', async () => {
    const srv = await server({ windowMs: 1000 });
    const client = clientFor(srv);
    cleanups.push(() => client.close());
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 2 });
    // The refused call fails (retryable) instead of re-sending: a re-send is a strike of its own.
    const first = client.getLoan('A').then(
      () => null,
      (e: unknown) => e,
    );
    await vi.waitFor(
      () =>
        expect(
          client.health().budgets.find((b) => b.bucket === 'read')?.pausedUntil,
          'read bucket paused',
        ).not.toBeNull(),
      { timeout: 5000, interval: 5 },
    );
    // Calls made while paused wait for the same pause: the bucket is paused, not one request.
    const later = [client.getLoan('B'), client.getLoan('C'), client.listProducts()];
    await Promise.all(later);
    const refused = await first;
    expect(isPlatformError(refused) && refused.code).toBe('rate_limit.exceeded');
    expect(isPlatformError(refused) && refused.retryable).toBe(true);

    const reads = srv.requests.filter((r) => r.bucket === 'read');
    const limited = reads.filter((r) => r.status === 429);
    expect(limited).toHaveLength(1);
    const t429 = limited[0]!.at;
    const after = reads.filter((r) => r.seq > limited[0]!.seq);
    expect(after).toHaveLength(3);
    for (const r of after) expect(r.at - t429).toBeGreaterThanOrEqual(2000);
    expect(client.health().strikes24h).toBe(1);
    // One strike in 24 h: half pace.
    expect(client.health().budgets.find((b) => b.bucket === 'read')?.allowed).toBe(45);
  });

  it('the pause honours max(Retry-After, body.retryAfter)', async () => {
    const srv = await server({ windowMs: 1000 });
    const client = clientFor(srv);
    cleanups.push(() => client.close());
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 1, bodyRetryAfter: 2 });
    await expect(client.getLoan('A')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    await client.getLoan('A');
    const [a, b] = srv.requests;
    expect(a!.status).toBe(429);
    expect(b!.at - a!.at).toBeGreaterThanOrEqual(2000);
  });

  it('strikes survive a restart; after 2 strikes reads and writes stop fast; a clear resumes them', async () => {
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const srv = await server({ windowMs: 1000 });
    const path = tmp.file('state.sqlite');

    const c1 = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    srv.forceRateLimit({ bucket: 'write', retryAfterSeconds: 1 });
    await expect(c1.acknowledgeBoarding('L1', {}, { idempotencyKey: 'ack:L1' })).rejects.toMatchObject({
      code: 'rate_limit.exceeded',
    });
    expect(c1.health().strikes24h).toBe(1);
    await c1.close();

    const c2 = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    cleanups.push(() => c2.close());
    expect(c2.health().strikes24h).toBe(1);
    expect(c2.health().trafficStopped).toBe(false);
    expect(c2.health().budgets.find((b) => b.bucket === 'write')?.allowed).toBe(13);
    srv.forceRateLimit({ bucket: 'read', retryAfterSeconds: 1 });
    await expect(c2.getLoan('L2')).rejects.toMatchObject({ code: 'rate_limit.exceeded' });
    expect(c2.health().strikes24h).toBe(2);
    expect(c2.health().trafficStopped).toBe(true);
    expect(c2.health().stopped).toBe(true);
    const writesBefore = srv.requests.filter((r) => r.bucket === 'write').length;
    const err = await c2.acknowledgeBoarding('L3', {}, { idempotencyKey: 'ack:L3' }).catch((e: unknown) => e);
    expect(isPlatformError(err) && err.code).toBe('rate_limit.traffic_stopped');
    expect(srv.requests.filter((r) => r.bucket === 'write').length).toBe(writesBefore);
    // Reads stop too: a 429 to a read is a strike like any other.
    const readsBefore = srv.requests.filter((r) => r.bucket === 'read').length;
    await expect(c2.getLoan('L4')).rejects.toMatchObject({
      code: 'rate_limit.traffic_stopped',
      retryable: false,
      fatal: false,
    });
    expect(srv.requests.filter((r) => r.bucket === 'read').length).toBe(readsBefore);
    await c2.close();

    const c3 = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    cleanups.push(() => c3.close());
    expect(c3.health().trafficStopped).toBe(true);
    expect(await c3.clearStrikes('ops:alice')).toBe(2);
    expect(c3.health().trafficStopped).toBe(false);
    await expect(c3.acknowledgeBoarding('L3', {}, { idempotencyKey: 'ack:L3' })).resolves.toBeTruthy();
    await expect(c3.getLoan('L4')).resolves.toMatchObject({ id: 'L4' });
  });

  it('a restart does not burst: spend of the current window is persisted', async () => {
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const srv = await server({ readsPerWindow: 100, windowMs: 3000 });
    const path = tmp.file('state.sqlite');
    const c1 = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    await Promise.all(Array.from({ length: 90 }, (_, i) => c1.getLoan(`A${i}`)));
    await c1.close();
    const d2 = db(path);
    const c2 = clientFor(srv, { rateState: createSqliteRateState(d2) });
    cleanups.push(() => c2.close());
    expect(c2.health().budgets.find((b) => b.bucket === 'read')?.remaining).toBeLessThanOrEqual(0);
    await Promise.all(Array.from({ length: 10 }, (_, i) => c2.getLoan(`B${i}`)));
    // Without the persisted window the 10 would have gone at once: 100 sent in one window, over the
    // 90 allowed. The second client waited for the first client's tokens to leave the window (the
    // stored total counts them at the first client's last token).
    const a = srv.requests.filter((r) => r.path.startsWith('/public/v1/loans/A'));
    const b = srv.requests.filter((r) => r.path.startsWith('/public/v1/loans/B'));
    expect(a).toHaveLength(90);
    expect(b).toHaveLength(10);
    const lastA = Math.max(...a.map((r) => r.at));
    // (Times are the server's arrivals: a few ms of transit either way.)
    for (const r of b) expect(r.at - lastA).toBeGreaterThanOrEqual(3000 - 50);
    expect(srv.maxInAnyWindow('read', 3000)).toBeLessThanOrEqual(100);
    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(0);
    // The window cost the state database rows per process and bucket, not per request.
    expect(
      (d2.prepare('SELECT COUNT(*) AS n FROM rate_spend_windows').get() as { n: number }).n,
    ).toBeLessThanOrEqual(4);
  });

  it('a kill -9 loses nothing: the next run counts the reservation the dead process held', async () => {
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const srv = await server({ readsPerWindow: 100, windowMs: 3000 });
    const path = tmp.file('state.sqlite');
    // The first process spends its whole window in a burst and dies without a shutdown (no close():
    // nothing is flushed; its row is what it wrote ahead of the tokens).
    const dead = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    await Promise.all(Array.from({ length: 90 }, (_, i) => dead.getLoan(`A${i}`)));
    const c2 = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    cleanups.push(
      () => c2.close(),
      () => dead.close(),
    );
    expect(c2.health().budgets.find((b) => b.bucket === 'read')?.remaining).toBeLessThanOrEqual(0);
    await Promise.all(Array.from({ length: 10 }, (_, i) => c2.getLoan(`B${i}`)));
    const firstA = Math.min(
      ...srv.requests.filter((r) => r.path.startsWith('/public/v1/loans/A')).map((r) => r.at),
    );
    const b = srv.requests.filter((r) => r.path.startsWith('/public/v1/loans/B'));
    expect(b).toHaveLength(10);
    // The reservation covered the dead process's second: counted at its end, it left the window
    // a window after that — the bound of what a kill -9 costs (at most one reservation, 1 s).
    for (const r of b) expect(r.at - firstA).toBeGreaterThanOrEqual(3000);
    expect(srv.maxInAnyWindow('read', 3000)).toBeLessThanOrEqual(90);
    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(0);
  });

  it('two clients on one state file (daemon + a CLI command) share the budget', async () => {
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const srv = await server({ readsPerWindow: 100, windowMs: 3000 });
    const path = tmp.file('state.sqlite');
    const a = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    const b = clientFor(srv, { rateState: createSqliteRateState(db(path)) });
    cleanups.push(
      () => a.close(),
      () => b.close(),
    );
    await Promise.all([
      ...Array.from({ length: 60 }, (_, i) => a.getLoan(`A${i}`)),
      ...Array.from({ length: 60 }, (_, i) => b.getLoan(`B${i}`)),
    ]);
    expect(srv.requests.filter((r) => r.bucket === 'read')).toHaveLength(120);
    // Each reserved against the other's row in one write transaction: together within the 90.
    expect(srv.maxInAnyWindow('read', 3000)).toBeLessThanOrEqual(90);
    expect(srv.requests.filter((r) => r.status === 429)).toHaveLength(0);
  });

  it('calls waiting on the budget stop when the shared signal aborts, and hold one listener each', async () => {
    const srv = await server({ readsPerWindow: 10, windowMs: 60_000 });
    const client = clientFor(srv);
    cleanups.push(() => client.close());
    const shutdown = new AbortController();
    const calls = Array.from({ length: 14 }, (_, i) =>
      client.getLoan(`L${i}`, { signal: shutdown.signal }).then(
        () => 'ok',
        (e: unknown) => (e as { code?: string }).code,
      ),
    );
    await vi.waitFor(
      () =>
        expect(
          srv.requests.filter((r) => r.status === 200),
          '9 reads served',
        ).toHaveLength(9),
      { timeout: 5000, interval: 5 },
    );
    await vi.waitFor(
      () =>
        expect(getEventListeners(shutdown.signal, 'abort'), 'listeners of the 5 waiting calls').toHaveLength(
          5,
        ),
      { timeout: 5000, interval: 5 },
    );
    shutdown.abort(new Error('SIGTERM'));
    const results = await Promise.all(calls);
    expect(results.filter((r) => r === 'ok')).toHaveLength(9);
    expect(results.filter((r) => r === 'aborted')).toHaveLength(5);
    expect(srv.requests).toHaveLength(9);
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
  });

  it('a 5xx read is retried through the budget; a 404 is not retried', async () => {
    const srv = await server();
    const client = clientFor(srv);
    cleanups.push(() => client.close());
    let n = 0;
    srv.route('GET', '/public/v1/loans/{id}', (req) => {
      n += 1;
      if (req.params['id'] === 'missing')
        return { status: 404, body: { code: 'loan.not_found', message: 'Loan not found' } };
      return n < 3
        ? { status: 503, body: { code: 'unavailable' } }
        : { body: { data: { id: req.params['id'] } } };
    });
    await expect(client.getLoan('X')).resolves.toMatchObject({ id: 'X' });
    expect(client.stats().retries).toBe(2);
    const err = await client.getLoan('missing').catch((e: unknown) => e);
    expect(isPlatformError(err) && err.code).toBe('loan.not_found');
    expect(srv.requests.filter((r) => r.path === '/public/v1/loans/missing')).toHaveLength(1);
  });

  it('a write whose connection dropped after the server committed is retried with the same Idempotency-Key', async () => {
    const srv = await server();
    const client = clientFor(srv);
    cleanups.push(() => client.close());
    const committed = new Map<string, number>();
    srv.route('POST', '/public/v1/loans/{id}/boarding', (req) => {
      const key = String(req.headers['idempotency-key']);
      committed.set(key, (committed.get(key) ?? 0) + 1);
      if (committed.get(key) === 1) return { dropConnection: true };
      return { body: { data: { boarded: true } } };
    });
    await expect(
      client.acknowledgeBoarding('L1', { marker: 'r1' }, { idempotencyKey: 'ack:L1:r1' }),
    ).resolves.toEqual({ boarded: true });
    const sent = srv.requests.filter((r) => r.path === '/public/v1/loans/L1/boarding');
    expect(sent).toHaveLength(2);
    expect(sent.map((r) => r.headers['idempotency-key'])).toEqual(['ack:L1:r1', 'ack:L1:r1']);
  });

  it('a 401 is fatal and never retried', async () => {
    const srv = await server();
    const client = clientFor(srv, { apiKey: 'pk_test_wrong' });
    cleanups.push(() => client.close());
    const err = await client.getLoan('L1').catch((e: unknown) => e);
    expect(isPlatformError(err) && { code: err.code, fatal: err.fatal, retryable: err.retryable }).toEqual({
      code: 'auth.invalid_key',
      fatal: true,
      retryable: false,
    });
    expect(srv.requests).toHaveLength(1);
  });
});
