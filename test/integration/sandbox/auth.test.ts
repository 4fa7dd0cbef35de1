import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PERMISSIONS } from '../../../src/sandbox/index.js';
import { startHarness, type Harness, type J } from './harness.js';

describe('authentication codes', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ loans: 5 });
  });
  afterAll(() => h.close());

  const key = async (body: Record<string, unknown>): Promise<string> =>
    (await h.admin('/keys', 'POST', body)).apiKey;

  it.each([
    ['no Authorization header', null],
    ['an unknown key', 'pk_test_doesnotexist'],
  ])('answers 401 auth.invalid_key for %s', async (_name, k) => {
    const r = await h.api('/public/v1/loans', { key: k });
    expect(r.status).toBe(401);
    expect(r.body).toMatchObject({ code: 'auth.invalid_key' });
    expect(typeof r.body.message).toBe('string');
  });

  it('answers 401 auth.invalid_key for an expired key', async () => {
    const r = await h.api('/public/v1/loans', { key: await key({ expired: true }) });
    expect(r.status).toBe(401);
    expect(r.body.code).toBe('auth.invalid_key');
  });

  it('answers 403 for every other refusal', async () => {
    const cases: Array<[string, Record<string, unknown>, string, Record<string, string>?]> = [
      ['/public/v1/loans', { permissions: ['read:products'] }, 'auth.insufficient_permissions'],
      ['/public/v1/loans', { environment: 'production' }, 'api_key.production_not_allowed'],
      ['/public/v1/loans', { environment: 'production', productionApproved: true }, 'auth.env_mismatch'],
      ['/public/v1/loans', { environment: 'development' }, 'auth.env_mismatch'],
      ['/public/v1/loans', { orgEnvironments: ['development'] }, 'auth.env_not_available'],
      [
        '/public/v1/loans',
        { allowedCountries: ['US'] },
        'auth.country_restricted',
        { 'X-Sandbox-Country': 'FR' },
      ],
    ];
    for (const [path, opts, code, headers] of cases) {
      const r = await h.api(path, { key: await key(opts), headers: headers ?? {} });
      expect(r.status, code).toBe(403);
      expect(r.body.code, code).toBe(code);
    }
    const pk = await key({ environment: 'production', productionApproved: true });
    expect(pk.startsWith('pk_live_')).toBe(true);
  });

  it('answers 403 auth.org_mismatch when the address names another organisation', async () => {
    const other = await key({ org: 'org_other' });
    const r = await h.api('/orgs/org_sandbox/public/v1/loans', { key: other });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('auth.org_mismatch');
    const mine = await h.api('/orgs/org_sandbox/public/v1/loans');
    expect(mine.status).toBe(200);
    // A key of another organisation sees none of this organisation's loans.
    const empty = await h.api('/public/v1/loans', { key: other });
    expect(empty.body.data).toEqual([]);
  });

  it('a country-restricted key works from an allowed country', async () => {
    const r = await h.api('/public/v1/products', {
      key: await key({ allowedCountries: ['us', 'CA'] }),
      headers: { 'X-Sandbox-Country': 'ca' },
    });
    expect(r.status).toBe(200);
  });

  it('the default key reads masked tax ids; a key with read:businesses:ein / read:people:ssn reads full ones', async () => {
    const loans = (await h.admin('/loans')).data as Array<{ id: string }>;
    let found = false;
    const full = await key({
      permissions: ['read:loans', 'read:businesses', 'read:businesses:ein', 'read:people:ssn'],
    });
    for (const { id } of loans) {
      const masked = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/entities`);
      const unmasked = await h.api(`/public/v1/loans/${encodeURIComponent(id)}/entities`, { key: full });
      expect(masked.status).toBe(200);
      for (const b of masked.body.data.businesses) {
        expect(b.ein).toBeUndefined();
        expect(b.naics).toBeUndefined();
        expect(b.einLast4).toMatch(/^\d{4}$/);
      }
      for (const p of masked.body.data.people) {
        expect(p.ssn).toBeUndefined();
        expect(p.ssnLast4).toMatch(/^\d{4}$/);
      }
      for (const b of unmasked.body.data.businesses) {
        expect(b.ein).toMatch(/^\d{2}-\d{7}$/);
        expect(b.ein.endsWith(b.einLast4)).toBe(true);
        found = true;
      }
      for (const p of unmasked.body.data.people) expect(p.ssn).toMatch(/^\d{3}-\d{2}-\d{4}$/);
    }
    expect(found).toBe(true);
  });

  it('apiKeyPermissions gives the printed key full tax ids', async () => {
    const full = await startHarness({ loans: 6, apiKeyPermissions: [...PERMISSIONS] });
    try {
      const bizLoan = (await full.admin('/loans')).data[0].id;
      const r = await full.api(`/public/v1/loans/${encodeURIComponent(bizLoan)}/entities`);
      const all = [
        ...r.body.data.businesses.map((b: J) => b.ein),
        ...r.body.data.people.map((p: J) => p.ssn),
      ];
      expect(all.length).toBeGreaterThan(0);
      for (const tin of all) expect(tin).toMatch(/^\d{2,3}-\d{2,7}/);
    } finally {
      await full.close();
    }
  });
});
