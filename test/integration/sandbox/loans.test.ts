import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness, type J } from './harness.js';

describe('loan operations', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ loans: 30 });
  });
  afterAll(() => h.close());

  it('lists loans newest first by default and supports sort, order, status and productId', async () => {
    const r = await h.api('/public/v1/loans?limit=100');
    expect(r.status).toBe(200);
    expect(r.body.meta).toEqual({ mode: 'offset', limit: 100, offset: 0, hasMore: false });
    expect(r.body.data).toHaveLength(30);
    const created = r.body.data.map((l: J) => Date.parse(l.createdAt));
    expect([...created].sort((a, b) => b - a)).toEqual(created);
    const statuses = new Set(r.body.data.map((l: J) => l.status));
    expect([...statuses].sort()).toEqual(['active', 'application', 'denied', 'draft', 'funded', 'withdrawn']);
    const freqs = new Set(r.body.data.map((l: J) => l.paymentFrequency));
    for (const f of [
      'weekly',
      'biweekly',
      'monthly',
      'quarterly',
      'semi-annual',
      'annual',
      'lump sum',
      'irregular payments',
    ])
      expect(freqs).toContain(f);
    expect(r.body.data.some((l: J) => l.product === null)).toBe(true);

    const byAmount = await h.api('/public/v1/loans?sort=centsAmount&order=asc&limit=100');
    const amounts = byAmount.body.data.map((l: J) => l.centsAmount);
    expect([...amounts].sort((a, b) => a - b)).toEqual(amounts);
    const funded = await h.api('/public/v1/loans?status=funded&limit=100');
    expect(funded.body.data.length).toBeGreaterThan(0);
    expect(funded.body.data.every((l: J) => l.status === 'funded')).toBe(true);
    const productId = r.body.data.find((l: J) => l.product)?.product.id;
    const byProduct = await h.api(`/public/v1/loans?productId=${productId}&limit=100`);
    expect(byProduct.body.data.every((l: J) => l.product?.id === productId)).toBe(true);
    for (const q of ['status=open', 'sort=name', 'order=up'])
      expect((await h.api(`/public/v1/loans?${q}`)).body.code, q).toBe('input.invalid');
  });

  it('cursor mode walks every loan exactly once by creation time', async () => {
    const seen: string[] = [];
    let cursor = '';
    for (let guard = 0; guard < 50; guard += 1) {
      const r = await h.api(`/public/v1/loans?limit=7&cursor=${encodeURIComponent(cursor)}&order=asc`);
      expect(r.body.meta.mode).toBe('cursor');
      seen.push(...r.body.data.map((l: J) => l.id));
      if (!r.body.meta.hasMore) break;
      cursor = r.body.meta.nextCursor;
    }
    expect(seen).toHaveLength(30);
    expect(new Set(seen).size).toBe(30);
    // A cursor of one list is refused by another.
    const q = await h.api('/public/v1/loans/boarding-queue?cursor=&limit=1');
    const wrong = await h.api(`/public/v1/loans?cursor=${q.body.meta.nextCursor}`);
    expect(wrong.status).toBe(400);
  });

  it('gets a loan, its summary, and answers 404 loan.not_found', async () => {
    const [loan] = (await h.api('/public/v1/loans?limit=1')).body.data;
    const one = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}`);
    expect(one.body.data).toEqual(loan);
    const s = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}/summary`);
    expect(s.body.data.loan).toEqual(loan);
    expect(Object.keys(s.body.data.metrics).sort()).toEqual([
      'centsMonthlyPayment',
      'centsTotalAmount',
      'hasMessages',
      'hasOpenTasks',
      'monthsTerm',
    ]);
    for (const path of [
      '/public/v1/loans/nope',
      '/public/v1/loans/nope/summary',
      '/public/v1/loans/nope/entities',
      '/public/v1/loans/nope/documents',
    ]) {
      const r = await h.api(path);
      expect(r.status, path).toBe(404);
      expect(r.body.code, path).toBe('loan.not_found');
    }
  });

  it('PATCH updates allowlisted fields and refuses the rest in the validation body shape', async () => {
    const [loan] = (await h.api('/public/v1/loans?limit=1')).body.data;
    const ok = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}`, {
      method: 'PATCH',
      body: {
        centsAmount: 9007199254740991,
        rateType: 'fixed',
        bpsFixedRate: 725,
        paymentFrequency: 'lump sum',
        closeDate: '2025-02-28T10:00:00-05:00',
        productId: 'prod_cre',
      },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({
      centsAmount: 9007199254740991,
      bpsRate: 725,
      paymentFrequency: 'lump sum',
      closeDate: '2025-02-28T10:00:00-05:00',
      product: { id: 'prod_cre' },
    });
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ status: 'funded' }, 'status'],
      [{ stage: { id: 'x' } }, 'stage'],
      [{ centsAmount: 0 }, 'centsAmount'],
      [{ centsAmount: 1.5 }, 'centsAmount'],
      [{ centsAmount: 9007199254740992 }, 'centsAmount'],
      [{ monthsInterestOnly: -1 }, 'monthsInterestOnly'],
      [{ rateType: 'floating' }, 'rateType'],
      [{ closeDate: '2025-02-30T10:00:00Z' }, 'closeDate'],
      [{ closeDate: '2025-02-28' }, 'closeDate'],
      [{ closeDate: '2025-02-28T10:00:00' }, 'closeDate'],
      [{ applicationDate: '2025-13-01T00:00:00Z' }, 'applicationDate'],
      [{ firstPaymentDate: '2025-01-01T24:00:00Z' }, 'firstPaymentDate'],
      [{ productId: 'prod_none' }, 'productId'],
      [{ color: 'blue' }, ''],
    ];
    for (const [body, field] of bad) {
      const r = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}`, { method: 'PATCH', body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.success, JSON.stringify(body)).toBe(false);
      expect(Array.isArray(r.body.error)).toBe(true);
      expect('data' in r.body).toBe(true);
      if (field)
        expect(
          r.body.error.map((e: J) => e.path.join('.')),
          JSON.stringify(body),
        ).toContain(field);
    }
    const leap = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}`, {
      method: 'PATCH',
      body: { applicationDate: '2024-02-29T23:59:59.123+14:00' },
    });
    expect(leap.status).toBe(200);
    const notJson = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}`, {
      method: 'PATCH',
      body: '{oops',
    });
    expect(notJson.body.code).toBe('input.invalid');
  });

  it('DELETE archives a loan: gone from lists, search and the queue, 404 afterwards', async () => {
    const [item] = (await h.api('/public/v1/loans/boarding-queue?limit=1')).body.data;
    const del = await h.api(`/public/v1/loans/${encodeURIComponent(item.id)}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(typeof del.body.message).toBe('string');
    expect((await h.api(`/public/v1/loans/${encodeURIComponent(item.id)}`)).status).toBe(404);
    expect(
      (await h.api(`/public/v1/loans/${encodeURIComponent(item.id)}`, { method: 'DELETE' })).status,
    ).toBe(404);
    const all = (await h.api('/public/v1/loans?limit=100')).body.data.map((l: J) => l.id);
    expect(all).not.toContain(item.id);
    const queue = (await h.api('/public/v1/loans/boarding-queue?limit=100')).body.data.map((l: J) => l.id);
    expect(queue).not.toContain(item.id);
    const search = (
      await h.api('/public/v1/loans/search', { method: 'POST', body: { pagination: { limit: 100 } } })
    ).body.data.map((l: J) => l.id);
    expect(search).not.toContain(item.id);
  });

  it('search filters, paginates in both modes and sorts; it spends the write budget', async () => {
    const r = await h.api('/public/v1/loans/search', {
      method: 'POST',
      body: {
        filters: {
          status: ['funded', 'active'],
          centsAmountMin: 100_000,
          dateRange: { from: '2025-01-01T00:00:00Z', to: '2030-01-01T00:00:00+01:00' },
        },
        pagination: { limit: 3 },
        sort: { field: 'centsAmount', order: 'asc' },
      },
    });
    expect(r.status).toBe(200);
    expect(r.body.meta).toMatchObject({ mode: 'offset', limit: 3, offset: 0 });
    for (const l of r.body.data) {
      expect(['funded', 'active']).toContain(l.status);
      expect(l.centsAmount).toBeGreaterThanOrEqual(100_000);
    }
    const c = await h.api('/public/v1/loans/search', {
      method: 'POST',
      body: { pagination: { cursor: '', limit: 2 } },
    });
    expect(c.body.meta.mode).toBe('cursor');
    expect(typeof c.body.meta.nextCursor).toBe('string');
    const c2 = await h.api('/public/v1/loans/search', {
      method: 'POST',
      body: { pagination: { cursor: c.body.meta.nextCursor, limit: 2 } },
    });
    expect(c2.body.data[0].id).not.toBe(c.body.data[0].id);
    const bad = await h.api('/public/v1/loans/search', {
      method: 'POST',
      body: { filters: { status: ['open'] }, pagination: { limit: 500 } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.success).toBe(false);
    expect(r.headers.get('x-ratelimit-limit')).toBe('10000');
    const counters = await h.admin('/counters');
    expect(counters.requests['POST /public/v1/loans/search']).toBeGreaterThanOrEqual(3);
  });

  it('creates a business: role resolution, naics ≤ 6, full EIN in, last 4 out', async () => {
    const [loan] = (await h.api('/public/v1/loans?type=business&limit=1')).body.data;
    const r = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}/businesses`, {
      method: 'POST',
      body: {
        name: 'Hillside Farms LLC',
        role: 'Guarantor',
        ein: '12-3456789',
        entityType: 'Limited Liability Company',
        naics: '111998',
        state: 'VT',
        dba: 'Hillside',
      },
    });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({
      name: 'Hillside Farms LLC',
      role: 'guarantor',
      einLast4: '6789',
      naics: '111998',
      state: 'VT',
      dba: 'Hillside',
    });
    expect(JSON.stringify(r.body)).not.toContain('3456789');
    const entities = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}/entities`);
    expect(entities.body.data.businesses.map((b: J) => b.id)).toContain(r.body.data.id);
    const unknownRole = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}/businesses`, {
      method: 'POST',
      body: { name: 'X', role: 'landlord' },
    });
    expect(unknownRole.status).toBe(400);
    expect(unknownRole.body.code).toBe('entity.role_unknown');
    const longNaics = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}/businesses`, {
      method: 'POST',
      body: { name: 'X', role: 'borrower', naics: '1234567' },
    });
    expect(longNaics.status).toBe(400);
    expect(longNaics.body.error[0].path).toEqual(['naics']);
    const noName = await h.api(`/public/v1/loans/${encodeURIComponent(loan.id)}/businesses`, {
      method: 'POST',
      body: { name: '', role: 'borrower' },
    });
    expect(noName.body.success).toBe(false);
  });

  it('lists and reads products; unknown routes and products answer 404', async () => {
    const list = await h.api('/public/v1/products');
    expect(list.status).toBe(200);
    expect(list.body.data.length).toBeGreaterThan(3);
    const one = await h.api(`/public/v1/products/${encodeURIComponent(list.body.data[0].id)}`);
    expect(one.body.data).toEqual(list.body.data[0]);
    expect((await h.api('/public/v1/products/nope')).body.code).toBe('product.not_found');
    expect((await h.api('/public/v1/nothing')).status).toBe(404);
  });
});
