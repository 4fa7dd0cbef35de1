import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startHarness, type Harness } from './harness.js';

describe('fault injection', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ loans: 3 });
  });
  afterAll(() => h.close());

  it('injects 5xx on the named route only, as many times as count says', async () => {
    await h.admin('/faults', 'PUT', {
      rules: [{ route: 'GET /public/v1/products', status5xxRate: 1, count: 2 }],
    });
    const statuses = [];
    for (let i = 0; i < 3; i += 1) statuses.push((await h.api('/public/v1/products')).status);
    expect(statuses).toEqual([503, 503, 200]);
    expect((await h.api('/public/v1/loans')).status).toBe(200);
    const described = await h.admin('/faults');
    expect(described.rules[0].fired).toBe(2);
    await h.admin('/faults', 'DELETE');
  });

  it('resets connections before handling (nothing committed) and delays with latencyMs', async () => {
    await h.admin('/faults', 'PUT', {
      rules: [
        { route: '*', resetRate: 1, count: 1 },
        { route: 'GET /public/v1/loans', latencyMs: 20, count: 1 },
      ],
    });
    const [item] = (await h.admin('/loans?released=true')).data;
    await expect(
      h.api(`/public/v1/loans/${encodeURIComponent(item.id)}/boarding`, {
        method: 'POST',
        body: {},
        headers: { 'Idempotency-Key': 'k1' },
      }),
    ).rejects.toThrow();
    expect((await h.admin('/counters')).acks[item.id]).toBeUndefined();
    expect((await h.api('/public/v1/loans')).status).toBe(200);
    const c = await h.admin('/counters');
    expect(c.faults).toMatchObject({ resets: 1, delayed: 1 });
    await h.admin('/faults', 'DELETE');
  });

  it('is reproducible from its seed', async () => {
    const run = async (): Promise<number[]> => {
      await h.admin('/faults', 'PUT', {
        seed: 42,
        rules: [{ route: 'GET /public/v1/products', status5xxRate: 0.5 }],
      });
      const out: number[] = [];
      for (let i = 0; i < 16; i += 1) out.push((await h.api('/public/v1/products')).status);
      return out;
    };
    const a = await run();
    const b = await run();
    expect(a).toEqual(b);
    expect(a).toContain(503);
    expect(a).toContain(200);
    await h.admin('/faults', 'DELETE');
  });

  it('admin refuses malformed requests with a message naming the field', async () => {
    const res = await fetch(`${h.sb.adminUrl}/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rules: [{ route: 'x', status5xxRate: 2 }] }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toContain('status5xxRate');
  });

  it('a retry that overlaps the first request with the same Idempotency-Key gets 409 idempotency.in_progress, and the ack happens once', async () => {
    const [item] = (await h.admin('/loans?released=true&boarded=false')).data;
    await h.admin('/faults', 'PUT', {
      rules: [{ route: 'POST /public/v1/loans/:id/boarding', latencyMs: 300, count: 1 }],
    });
    const send = () =>
      h.api(`/public/v1/loans/${encodeURIComponent(item.id)}/boarding`, {
        method: 'POST',
        body: {},
        headers: { 'Idempotency-Key': `ack:${item.id}:slow` },
      });
    const first = send();
    // Once the first request is being held, send the overlapping retry.
    await vi.waitFor(
      async () =>
        expect((await h.admin('/counters')).faults.delayed, 'the first request held').toBeGreaterThanOrEqual(
          1,
        ),
      { timeout: 5_000, interval: 5 },
    );
    const overlap = await send();
    expect(overlap.status).toBe(409);
    expect(overlap.body.code).toBe('idempotency.in_progress');
    expect((await first).status).toBe(200);
    const replay = await send();
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const c = await h.admin('/counters');
    expect(c.acks[item.id]).toBe(1);
    expect(c.duplicateAcks[item.id]).toBeUndefined();
    await h.admin('/faults', 'DELETE');
  });
});
