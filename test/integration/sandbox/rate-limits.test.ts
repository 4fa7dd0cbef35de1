import { afterEach, describe, expect, it, vi } from 'vitest';
import { startHarness, type Harness } from './harness.js';

describe('rate limits', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('sends X-RateLimit-* on every response and 429 rate_limit.exceeded with Retry-After and retryAfter', async () => {
    h = await startHarness({ loans: 3, windowMs: 2_000, readsPerWindow: 3, writesPerWindow: 2 });
    const remaining: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const r = await h.api('/public/v1/products');
      expect(r.status).toBe(200);
      expect(r.headers.get('x-ratelimit-limit')).toBe('3');
      expect(Number(r.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000 - 1);
      remaining.push(r.headers.get('x-ratelimit-remaining') ?? '');
    }
    expect(remaining).toEqual(['2', '1', '0']);
    const limited = await h.api('/public/v1/products');
    expect(limited.status).toBe(429);
    expect(limited.body.code).toBe('rate_limit.exceeded');
    expect(Number.isInteger(limited.body.retryAfter)).toBe(true);
    expect(limited.body.retryAfter).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get('retry-after')).toBe(String(limited.body.retryAfter));
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');

    // Writes have their own budget: still available while reads are exhausted.
    const search = await h.api('/public/v1/loans/search', { method: 'POST', body: {} });
    expect(search.status).toBe(200);
    expect(search.headers.get('x-ratelimit-limit')).toBe('2');
    expect(search.headers.get('x-ratelimit-remaining')).toBe('1');

    const counters = await h.admin('/counters');
    expect(counters.rateLimited).toBe(1);
    expect(counters.byBucket).toMatchObject({ read: 4, write: 1 });
    expect(counters.requests['GET /public/v1/products']).toBe(4);
    expect(counters.requests['POST /public/v1/loans/search']).toBe(1);

    // After the window, the budget is back.
    const harness = h;
    await vi.waitFor(async () => expect((await harness.api('/public/v1/products')).status).toBe(200), {
      timeout: 10_000,
      interval: 100,
    });
  });

  it('GET /admin/requests lists each rate-limited request with its arrival, key digest, bucket, route and status', async () => {
    h = await startHarness({ loans: 3, windowMs: 60_000, readsPerWindow: 2, writesPerWindow: 5 });
    const t0 = Date.now();
    expect((await h.api('/public/v1/products')).status).toBe(200);
    expect((await h.api('/public/v1/loans/search', { method: 'POST', body: {} })).status).toBe(200);
    expect((await h.api('/public/v1/products')).status).toBe(200);
    expect((await h.api('/public/v1/products')).status).toBe(429);
    const log = await h.admin('/requests');
    expect(log).toMatchObject({ windowMs: 60_000, limits: { read: 2, write: 5 }, dropped: 0 });
    expect(
      log.data.map((e: { route: string; bucket: string; status: number }) => [e.route, e.bucket, e.status]),
    ).toEqual([
      ['GET /public/v1/products', 'read', 200],
      ['POST /public/v1/loans/search', 'write', 200],
      ['GET /public/v1/products', 'read', 200],
      ['GET /public/v1/products', 'read', 429],
    ]);
    const keys = new Set(log.data.map((e: { key: string }) => e.key));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f]{12}$/);
    expect(JSON.stringify(log)).not.toContain(h.sb.apiKey);
    const times = log.data.map((e: { at: number }) => e.at);
    expect(times[0]).toBeGreaterThanOrEqual(t0);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // since= filters by arrival; a reset of the counters empties the log.
    expect((await h.admin(`/requests?since=${times[3] + 1}`)).data).toEqual([]);
    await expect(h.admin('/requests?since=nope')).rejects.toThrow(/400.*since: expected epoch milliseconds/);
    await h.admin('/counters/reset', 'POST');
    expect((await h.admin('/requests')).data).toEqual([]);
  });

  it('the legacy prefix shares one bucket, marks responses deprecated and carries meta.total', async () => {
    h = await startHarness({ loans: 4, windowMs: 2_000, legacyPerWindow: 2 });
    const a = await h.api('/public/loans?limit=2');
    expect(a.status).toBe(200);
    expect(a.headers.get('deprecation')).toBe('true');
    expect(a.headers.get('sunset')).toMatch(/GMT$/);
    expect(a.body.meta).toEqual({ mode: 'offset', limit: 2, offset: 0, hasMore: true, total: 4 });
    const b = await h.api('/public/loans/search', { method: 'POST', body: {} });
    expect(b.status).toBe(200);
    expect(b.headers.get('x-ratelimit-limit')).toBe('2');
    const c = await h.api('/public/products');
    expect(c.status).toBe(429);
    expect(c.headers.get('deprecation')).toBe('true');
    const v1 = await h.api('/public/v1/loans?limit=2');
    expect(v1.status).toBe(200);
    expect(v1.body.meta).toEqual({ mode: 'offset', limit: 2, offset: 0, hasMore: true });
    expect(v1.headers.get('deprecation')).toBeNull();
    const counters = await h.admin('/counters');
    expect(counters.requests['GET /public/loans']).toBe(1);
    expect(counters.byBucket.legacy).toBe(3);
  });

  it('admin force429 makes the next request wait the given Retry-After; admin can change budgets', async () => {
    h = await startHarness({ loans: 3 });
    await h.admin('/rate-limit', 'POST', { force429: { bucket: 'write', retryAfterSeconds: 42 } });
    const r = await h.api('/public/v1/loans/search', { method: 'POST', body: {} });
    expect(r.status).toBe(429);
    expect(r.headers.get('retry-after')).toBe('42');
    expect(r.body.retryAfter).toBe(42);
    const read = await h.api('/public/v1/products');
    expect(read.status).toBe(200);
    const settings = await h.admin('/rate-limit', 'POST', { readsPerWindow: 1, windowMs: 5_000 });
    expect(settings).toMatchObject({ readsPerWindow: 1, windowMs: 5_000 });
    expect((await h.api('/public/v1/products')).status).toBe(200);
    expect((await h.api('/public/v1/products')).status).toBe(429);
  });

  it('with strike revocation on, a key is revoked (401) at the given number of 429s', async () => {
    h = await startHarness({ loans: 2, windowMs: 60_000, readsPerWindow: 1, revokeAfterStrikes: 2 });
    expect((await h.api('/public/v1/products')).status).toBe(200);
    expect((await h.api('/public/v1/products')).status).toBe(429);
    expect((await h.api('/public/v1/products')).status).toBe(429);
    const revoked = await h.api('/public/v1/products');
    expect(revoked.status).toBe(401);
    expect(revoked.body.code).toBe('auth.invalid_key');
    expect((await h.admin('/counters')).revokedKeys).toBe(1);
  });

  it('answers an oversized body in the API error shape', async () => {
    h = await startHarness({ loans: 1 });
    const r = await h.api('/public/v1/loans/search', {
      method: 'POST',
      body: JSON.stringify({ filters: {}, pad: 'x'.repeat(3 * 1024 * 1024) }),
    });
    expect(r.status).toBe(413);
    expect(r.body.code).toBe('input.invalid');
  });
});
