import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { isPlatformError } from '../../../src/platform/errors.js';
import { createPlatformClient, type PlatformClient } from '../../../src/platform/client.js';
import { startTestPlatform, type TestPlatform } from '../boarding/harness.js';

const ACK_ROUTE = 'POST /public/v1/loans/:id/boarding';

/**
 * A throttle that meets several writes in flight (all sent before its first 429 came back) is one
 * strike, for the client and for the sandbox, which judges strikes the same way and here revokes
 * the key at 2 (a platform that counted each refused request would have revoked it).
 */
describe('a throttle that meets several writes in flight', () => {
  let p: TestPlatform;
  let client: PlatformClient;
  let ids: string[];

  beforeAll(async () => {
    // A short window: a 429's pause lasts until the window's reset (X-RateLimit-Reset), never shorter.
    p = await startTestPlatform({
      loans: 4,
      releaseRatio: 1,
      seed: 3,
      revokeAfterStrikes: 2,
      windowMs: 1500,
    });
    client = createPlatformClient({
      clock: systemClock,
      baseUrl: p.sandbox.baseUrl,
      apiKey: p.apiKey,
      documentHosts: { allow: ['127.0.0.1'] },
      rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: 1500, headroom: 0.9 },
      timeouts: { connectMs: 2000, headersMs: 5000, bodyMs: 5000 },
      maxRetries: 2,
      pageSize: 10,
      logger: silentLogger(),
      retry: { minDelayMs: 10, maxDelayMs: 50 },
      pauseJitterMs: [0, 50],
    });
    ids = [];
    for await (const page of client.boardingQueue()) ids.push(...page.items.map((i) => i.id));
    expect(ids.length).toBeGreaterThanOrEqual(3);
  });
  afterAll(async () => {
    await client.close();
    await p.close();
  });

  it('is one strike, not two: traffic goes on after the pause (regression: two 429s in flight were two strikes and stopped all traffic)', async () => {
    const ack = (id: string) =>
      client.acknowledgeBoarding(id, { boardingReference: `core-${id}` }, { idempotencyKey: `ack:${id}:1` });
    // A write answered first: the client knows the server, so two writes may be in flight.
    await ack(ids[0]!);
    // The platform throttles on its own; each write is held a while, so both are in flight at once.
    await p.setFaults([{ route: ACK_ROUTE, status429Rate: 1, latencyMs: 200, retryAfterSeconds: 1 }]);
    const results = await Promise.all(
      [ids[1]!, ids[2]!].map((id) =>
        ack(id).then(
          () => null,
          (e: unknown) => e,
        ),
      ),
    );
    for (const r of results) expect(isPlatformError(r) && r.code).toBe('rate_limit.exceeded');
    const c = await p.counters();
    expect(c.faults.injected429).toBe(2);
    expect(client.health()).toMatchObject({ strikes24h: 1, trafficStopped: false });

    // The throttle is over: both writes go through after the pause, with the same keys; the key
    // was not revoked (the sandbox judged one strike too).
    await p.setFaults([]);
    await ack(ids[1]!);
    await ack(ids[2]!);
    const after = await p.counters();
    expect(after.acks[ids[1]!]).toBe(1);
    expect(after.acks[ids[2]!]).toBe(1);
    expect(after.faults.injected429).toBe(2);
    expect(client.health()).toMatchObject({ strikes24h: 1, trafficStopped: false });
  });

  it('a write sent after the 429 came back is a strike of its own, in the sandbox as in the client', async () => {
    await p.setFaults([{ route: ACK_ROUTE, status429Rate: 1, retryAfterSeconds: 1 }]);
    const id = ids[3] ?? ids[0]!;
    const err = await client
      .acknowledgeBoarding(id, { boardingReference: `core-${id}` }, { idempotencyKey: `ack:${id}:2` })
      .catch((e: unknown) => e);
    expect(isPlatformError(err) && err.code).toBe('rate_limit.exceeded');
    // The second strike: the client stops all traffic before the platform's revocation at 3 (here
    // the sandbox revokes at 2, so the key is gone: what a client that sent on would meet).
    expect(client.health()).toMatchObject({ strikes24h: 2, trafficStopped: true });
    await p.setFaults([]);
    const probe = await fetch(`${p.sandbox.baseUrl}/public/v1/products`, {
      headers: { authorization: `Bearer ${p.apiKey}` },
    });
    expect(probe.status).toBe(401);
  });
});
