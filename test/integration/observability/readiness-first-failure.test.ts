import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { platformRecentSuccessCheck } from '../../../src/observability/readiness.js';
import { FakeClock } from '../../support/fake-clock.js';
import { startRateLimitedServer, type RateLimitedServer } from '../../support/rate-limited-server.js';
import { clientFor } from '../platform/helpers.js';

/** A port nothing listens on: bind port 0, note it, close it. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('/readyz platform check from the first failure', () => {
  let srv: RateLimitedServer | undefined;
  afterEach(async () => {
    await srv?.close();
    srv = undefined;
  });

  it('regression: said ready ("no platform call yet (starting)") for two minutes while calls were failing', async () => {
    srv = await startRateLimitedServer();
    const port = await closedPort();
    const clock = new FakeClock();
    const client = clientFor(srv, { baseUrl: `http://127.0.0.1:${port}/api`, maxRetries: 0, clock });
    const check = platformRecentSuccessCheck(() => client.health(), { clock });
    expect(await check()).toEqual({ ok: true, detail: 'no platform call yet (starting)' });
    const err = await client.getLoan('L1').catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('network');
    // Still inside the start-up grace: the failed call is reported at once.
    const r = await check();
    expect(r.ok).toBe(false);
    expect(r.detail).toContain('GET /public/v1/loans/{id}: network');
    expect(r.detail).toContain('no successful platform call since start');
    await client.close();
  });

  it('a failure after a success fails the check; the next success clears it; a loan 404 does not count', async () => {
    srv = await startRateLimitedServer();
    const clock = new FakeClock();
    const client = clientFor(srv, { maxRetries: 0, clock });
    const check = platformRecentSuccessCheck(() => client.health(), { clock });
    await client.getLoan('L1');
    expect((await check()).ok).toBe(true);
    srv.route('GET', '/public/v1/loans/{id}', (req) =>
      req.params['id'] === 'missing'
        ? { status: 404, body: { code: 'loan.not_found', message: 'no such loan' } }
        : { status: 503, body: { code: 'server', message: 'down' } },
    );
    await clock.advance(1000);
    await client.getLoan('missing').catch(() => undefined);
    expect((await check()).ok).toBe(true);
    await clock.advance(1000);
    await client.getLoan('L2').catch(() => undefined);
    const failing = await check();
    expect(failing.ok).toBe(false);
    expect(failing.detail).toContain('server (HTTP 503)');
    srv.route('GET', '/public/v1/loans/{id}', (req) => ({
      body: { data: { id: req.params['id'], loanNumber: 'N', status: 'funded', centsAmount: 100 } },
    }));
    await clock.advance(1000);
    await client.getLoan('L3');
    expect((await check()).ok).toBe(true);
    await client.close();
  });

  it('regression: a standby (another replica leads) fell to "no successful platform call since start" two minutes after it started', async () => {
    srv = await startRateLimitedServer();
    const port = await closedPort();
    const clock = new FakeClock();
    const client = clientFor(srv, { baseUrl: `http://127.0.0.1:${port}/api`, maxRetries: 0, clock });
    let role: 'leader' | 'standby' = 'standby';
    const check = platformRecentSuccessCheck(() => client.health(), {
      clock,
      standby: () => role === 'standby',
    });
    await clock.advance(3 * 60_000);
    expect(await check()).toEqual({ ok: true, detail: 'standby: the leader makes the platform calls' });
    // Leading, the same replica is judged by its own calls again: none yet after the grace fails.
    role = 'leader';
    expect(await check()).toEqual({ ok: false, detail: 'no successful platform call since start' });
    // Its own last call (as leader) failed: on stepping down it stays ready, saying so.
    await client.getLoan('L1').catch(() => undefined);
    expect((await check()).ok).toBe(false);
    role = 'standby';
    const r = await check();
    expect(r.ok).toBe(true);
    expect(r.detail).toContain(
      "standby: the leader makes the platform calls; this replica's own last call failed: GET /public/v1/loans/{id}: network",
    );
    await client.close();
  });
});
