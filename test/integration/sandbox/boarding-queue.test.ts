import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loanSchema } from '../../../src/contract/schemas.js';
import { startHarness, type Harness, type J } from './harness.js';
import { ackKey } from '../../../src/pipeline/release.js';

describe('boarding queue and acknowledgement', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ loans: 60, releaseRatio: 0.7 });
  });
  afterAll(() => h.close());

  it('serves released, unboarded loans oldest release first in offset mode by default', async () => {
    const r = await h.api('/public/v1/loans/boarding-queue?limit=100');
    expect(r.status).toBe(200);
    expect(r.body.meta).toEqual({ mode: 'offset', limit: 100, offset: 0, hasMore: false });
    const released = (await h.admin('/loans?released=true')).data as Array<{ id: string }>;
    expect(r.body.data).toHaveLength(released.length);
    const times = r.body.data.map((l: J) => Date.parse(l.boarding.releasedAt));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    for (const item of r.body.data) {
      expect(item.boarding).toMatchObject({ boarded: false, boardedAt: null });
      expect(typeof item.boarding.id).toBe('string');
      expect(typeof item.id).toBe('string');
    }
  });

  it('a fresh sandbox queues loans of every status', async () => {
    const fresh = await startHarness({ loans: 25 });
    try {
      const r = await fresh.api('/public/v1/loans/boarding-queue?limit=100');
      expect(new Set(r.body.data.map((l: J) => l.status)).size).toBe(6);
    } finally {
      await fresh.close();
    }
  });

  it('offset pagination reports hasMore and walks without overlap', async () => {
    const a = await h.api('/public/v1/loans/boarding-queue?limit=5&offset=0');
    const b = await h.api('/public/v1/loans/boarding-queue?limit=5&offset=5');
    expect(a.body.meta).toEqual({ mode: 'offset', limit: 5, offset: 0, hasMore: true });
    const ids = new Set([...a.body.data, ...b.body.data].map((l: J) => l.id));
    expect(ids.size).toBe(10);
  });

  it('rejects bad paging parameters with input.invalid', async () => {
    for (const q of [
      'limit=0',
      'limit=101',
      'limit=abc',
      'offset=-1',
      'cursor=&offset=3',
      'cursor=garbage',
      'boarded=maybe',
      'boardedSince=2025-01-01T00:00:00Z',
    ]) {
      const r = await h.api(`/public/v1/loans/boarding-queue?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.code, q).toBe('input.invalid');
    }
  });

  it('a cursor walk while loans are acknowledged concurrently neither skips nor repeats an item', async () => {
    const before = (await h.api('/public/v1/loans/boarding-queue?limit=100')).body.data.map(
      (l: J) => l.id,
    ) as string[];
    expect(before.length).toBeGreaterThan(20);
    // Another worker acknowledges every other loan, in an order unrelated to the queue's, while we walk.
    const victims = before.filter((_, i) => i % 2 === 1).sort((a, b) => (a.slice(-3) < b.slice(-3) ? -1 : 1));
    const acker = (async () => {
      for (const id of victims) {
        const r = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/boarding`, {
          method: 'POST',
          body: { boardingReference: `core-${id}` },
          headers: { 'Idempotency-Key': ackKey(id, 'concurrent') },
        });
        expect(r.status).toBe(200);
      }
    })();
    const seen: string[] = [];
    let cursor = '';
    for (let guard = 0; guard < 200; guard += 1) {
      const page = await h.api(
        `/public/v1/loans/boarding-queue?limit=3&cursor=${encodeURIComponent(cursor)}`,
      );
      expect(page.status).toBe(200);
      expect(page.body.meta.mode).toBe('cursor');
      expect(Object.keys(page.body.meta).sort()).toEqual(['hasMore', 'limit', 'mode', 'nextCursor']);
      seen.push(...page.body.data.map((l: J) => l.id));
      if (!page.body.meta.hasMore) {
        expect(page.body.meta.nextCursor).toBeNull();
        break;
      }
      cursor = page.body.meta.nextCursor;
    }
    await acker;
    expect(new Set(seen).size).toBe(seen.length); // no repeats
    // No skips: every loan nobody else acknowledged was served by the walk.
    for (const id of before.filter((_, i) => i % 2 === 0)) expect(seen, id).toContain(id);
    // The walk served items in queue order.
    const order = seen.map((id) => before.indexOf(id));
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it('an ack with the same Idempotency-Key replays the stored response and is applied once', async () => {
    const [first] = (await h.api('/public/v1/loans/boarding-queue?limit=1')).body.data;
    const id = first.id as string;
    const key = ackKey(id, first.boarding.id);
    const a = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/boarding`, {
      method: 'POST',
      body: { boardingReference: 'CORE-1' },
      headers: { 'Idempotency-Key': key },
    });
    const b = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/boarding`, {
      method: 'POST',
      body: { boardingReference: 'CORE-1' },
      headers: { 'Idempotency-Key': key },
    });
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(a.body.data.boarding).toMatchObject({ boarded: true, boardingReference: 'CORE-1' });
    const counters = await h.admin('/counters');
    expect(counters.acks[id]).toBe(1);
    expect(counters.ackKeys[id]).toEqual([key]);

    const other = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/boarding`, {
      method: 'POST',
      body: {},
      headers: { 'Idempotency-Key': `${key}-2` },
    });
    expect(other.status).toBe(409);
    expect(other.body.code).toBe('loan.already_boarded');
    const after = await h.admin('/counters');
    expect(after.acks[id]).toBe(1);
    expect(after.duplicateAcks[id]).toBe(1);

    const mismatch = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/boarding`, {
      method: 'POST',
      body: { boardingReference: 'OTHER' },
      headers: { 'Idempotency-Key': key },
    });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.code).toBe('idempotency.key_reused');

    const boarded = await h.api('/public/v1/loans/boarding-queue?boarded=true&limit=100');
    expect(boarded.body.data.map((l: J) => l.id)).toContain(id);
    const queue = await h.api('/public/v1/loans/boarding-queue?limit=100');
    expect(queue.body.data.map((l: J) => l.id)).not.toContain(id);
  });

  it('refuses an Idempotency-Key longer than 255 characters and an ack of an unreleased loan', async () => {
    const [first] = (await h.api('/public/v1/loans/boarding-queue?limit=1')).body.data;
    const long = await h.api(`/public/v1/loans/${encodeURIComponent(first.id)}/boarding`, {
      method: 'POST',
      body: {},
      headers: { 'Idempotency-Key': 'k'.repeat(256) },
    });
    expect(long.status).toBe(400);
    expect(long.body.code).toBe('input.invalid');
    const ok255 = await h.api(`/public/v1/loans/${encodeURIComponent(first.id)}/boarding`, {
      method: 'POST',
      body: {},
      headers: { 'Idempotency-Key': 'k'.repeat(255) },
    });
    expect(ok255.status).toBe(200);
    const unreleased = (await h.admin('/loans?released=false')).data[0].id;
    const r = await h.api(`/public/v1/loans/${encodeURIComponent(unreleased)}/boarding`, {
      method: 'POST',
      body: {},
    });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe('loan.not_released');
    const missing = await h.api('/public/v1/loans/ln_nope/boarding', { method: 'POST', body: {} });
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('loan.not_found');
  });

  it('boarded=true filters by boardedSince and a released loan joins the end of the queue', async () => {
    const future = await h.api(
      `/public/v1/loans/boarding-queue?boarded=true&boardedSince=${encodeURIComponent('2999-01-01T00:00:00+02:00')}`,
    );
    expect(future.status).toBe(200);
    expect(future.body.data).toEqual([]);
    const past = await h.api('/public/v1/loans/boarding-queue?boarded=true&boardedSince=2000-01-01');
    expect(past.body.data.length).toBeGreaterThan(0);
    const unreleased = (await h.admin('/loans?released=false')).data[0].id;
    await h.admin(`/loans/${encodeURIComponent(unreleased)}/release`, 'POST');
    const q = await h.api('/public/v1/loans/boarding-queue?limit=100');
    expect(q.body.data.at(-1).id).toBe(unreleased);
  });

  it('a connection dropped after commit still boards the loan exactly once (resetAfterCommit)', async () => {
    const [first] = (await h.api('/public/v1/loans/boarding-queue?limit=1')).body.data;
    await h.admin('/faults', 'PUT', {
      seed: 7,
      rules: [{ route: 'POST /public/v1/loans/:id/boarding', resetAfterCommitRate: 1, count: 1 }],
    });
    const key = ackKey(first.id, 'r');
    await expect(
      h.api(`/public/v1/loans/${encodeURIComponent(first.id)}/boarding`, {
        method: 'POST',
        body: {},
        headers: { 'Idempotency-Key': key },
      }),
    ).rejects.toThrow();
    const retry = await h.api(`/public/v1/loans/${encodeURIComponent(first.id)}/boarding`, {
      method: 'POST',
      body: {},
      headers: { 'Idempotency-Key': key },
    });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    const c = await h.admin('/counters');
    expect(c.acks[first.id]).toBe(1);
    expect(c.faults.resetsAfterCommit).toBe(1);
    await h.admin('/faults', 'DELETE');
  });

  it('an injected malformed item is served broken while the rest of the page stays valid', async () => {
    const [first, second] = (await h.api('/public/v1/loans/boarding-queue?limit=2')).body.data;
    await h.admin(`/loans/${encodeURIComponent(first.id)}/malform`, 'POST', { kind: 'amount' });
    const page = await h.api('/public/v1/loans/boarding-queue?limit=2');
    expect(typeof page.body.data[0].centsAmount).toBe('string');
    expect(page.body.data[1].id).toBe(second.id);
    await h.admin(`/loans/${encodeURIComponent(first.id)}/malform`, 'POST', { kind: 'unknown_values' });
    const surprising = (await h.api('/public/v1/loans/boarding-queue?limit=1')).body.data[0];
    expect(surprising).toMatchObject({
      id: first.id,
      status: 'on_hold',
      paymentFrequency: 'every 4 weeks',
      centsOriginationFee: 125_000,
    });
    expect(loanSchema.safeParse(surprising).success).toBe(true);
    await h.admin(`/loans/${encodeURIComponent(first.id)}/malform`, 'DELETE');
  });

  it('a boarded loan released again gets a new boarding id and can be acknowledged again', async () => {
    const [item] = (await h.api('/public/v1/loans/boarding-queue?limit=1')).body.data;
    const first = await h.api(`/public/v1/loans/${encodeURIComponent(item.id)}/boarding`, {
      method: 'POST',
      body: {},
      headers: { 'Idempotency-Key': ackKey(item.id, item.boarding.id) },
    });
    expect(first.status).toBe(200);
    const released = await h.admin(`/loans/${encodeURIComponent(item.id)}/release`, 'POST');
    expect(released.boarding.id).not.toBe(item.boarding.id);
    expect(released.boarding.boarded).toBe(false);
    const queue = (await h.api('/public/v1/loans/boarding-queue?limit=100')).body.data;
    expect(queue.at(-1)).toMatchObject({
      id: item.id,
      boarding: { id: released.boarding.id, boarded: false },
    });
    const second = await h.api(`/public/v1/loans/${encodeURIComponent(item.id)}/boarding`, {
      method: 'POST',
      body: {},
      headers: { 'Idempotency-Key': ackKey(item.id, released.boarding.id) },
    });
    expect(second.status).toBe(200);
    const c = await h.admin('/counters');
    expect(c.acks[item.id]).toBe(2);
    expect(c.ackKeys[item.id]).toEqual([
      ackKey(item.id, item.boarding.id),
      ackKey(item.id, released.boarding.id),
    ]);
    const internal = await h.admin(`/loans/${encodeURIComponent(item.id)}`);
    expect(internal.boarding).toMatchObject({ id: released.boarding.id, boarded: true });
    for (const b of internal.businesses) expect(b.ein).toMatch(/^\d{9}$/);
  });
});
