import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';

/**
 * Issue 42 (first hour, 6): a Fineract URL with a wrong path was reported as `Fineract has no
 * office 1 (core.http.officeId)`, the wrong key. A 404 that is not Fineract's "no such office" (its
 * error code, or an office list that answers) now names core.http.baseUrl.
 */
describe('config check --connect on Fineract: the wrong URL names core.http.baseUrl', () => {
  let fake: FakeFineract;
  beforeAll(async () => {
    fake = await startFakeFineract({ products: [1] });
  });
  afterAll(async () => {
    await fake.close();
  });

  const check = async (baseUrl: string, officeId = 1) => {
    const core = new FineractCore({
      clock: systemClock,
      baseUrl,
      username: fake.username,
      password: fake.password,
      tenantId: fake.tenantId,
      officeId,
      timeoutMs: 5_000,
      insecureTls: false,
      approve: false,
      disburse: false,
      logger: silentLogger(),
    });
    try {
      return (await core.checkConnection({ productIds: [] })).find((c) => c.name === 'core');
    } finally {
      await core.close();
    }
  };

  it('the right URL and office: ok', async () => {
    expect((await check(fake.url))?.status).toBe('ok');
  });

  it('a missing office (Fineract says so): core.http.officeId', async () => {
    expect(await check(fake.url, 7)).toMatchObject({
      status: 'fail',
      detail: 'Fineract has no office 7 (core.http.officeId)',
    });
  });

  it('a wrong path on the Fineract host (404 not from Fineract): core.http.baseUrl', async () => {
    const wrong = fake.url.replace('/fineract-provider/api/v1', '/fineract/api/v1');
    const c = await check(wrong);
    expect(c?.status).toBe('fail');
    expect(c?.detail).toMatch(
      /^core\.http\.baseUrl: http:\/\/127\.0\.0\.1:\d+\/fineract\/api\/v1 does not answer as Fineract's API/,
    );
    expect(c?.detail).toMatch(/\/fineract-provider\/api\/v1/);
    expect(c?.detail).not.toMatch(/officeId/);
  });

  it('a server that answers 200 with something else, or nothing listening: core.http.baseUrl', async () => {
    const other = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end('<html>welcome</html>');
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    const port = (other.address() as { port: number }).port;
    try {
      const c = await check(`http://127.0.0.1:${port}/api/v1`);
      expect(c?.status).toBe('fail');
      expect(c?.detail).toMatch(/^core\.http\.baseUrl: .* does not answer as Fineract's API/);
    } finally {
      await new Promise<void>((r) => other.close(() => r()));
    }
    const refused = await check(`http://127.0.0.1:${port}/fineract-provider/api/v1`);
    expect(refused?.status).toBe('fail');
    expect(refused?.detail).toMatch(/^core\.http\.baseUrl: .*ECONNREFUSED/);
  });
});
