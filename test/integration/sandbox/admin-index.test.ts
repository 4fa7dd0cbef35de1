import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '../../../src/sandbox/index.js';
import { silentLogger } from '../../../src/lib/logger.js';

/**
 * Issue 42 (first hour, 2): the demo's and the sandbox's banner print `admin: http://…/admin`, and
 * that link answered 404 `no such admin operation`. It is now the admin API's index.
 */
describe('GET /admin: the index the banner links to', () => {
  let sb: RunningSandbox;
  beforeAll(async () => {
    sb = await startSandbox({ port: 0, loans: 2, logger: silentLogger() });
  });
  afterAll(async () => {
    await sb.close();
  });

  it('answers 200 at the printed adminUrl (with and without the slash) and lists every operation', async () => {
    for (const url of [sb.adminUrl, `${sb.adminUrl}/`]) {
      const res = await fetch(url);
      expect(res.status, url).toBe(200);
      const body = (await res.json()) as { operations: string[]; docs: string };
      expect(body.operations).toContain('GET /admin/counters');
      expect(body.operations).toContain('POST /admin/loans/:id/release');
      expect(body.operations).toContain('PUT /admin/faults');
      expect(body.docs).toMatch(/docs\/sandbox\.md/);
    }
  });

  it('each listed GET without a parameter answers 200', async () => {
    const body = (await (await fetch(sb.adminUrl)).json()) as { operations: string[] };
    expect(body.operations.length).toBeGreaterThan(15);
    for (const op of body.operations.filter((o) => o.startsWith('GET ') && !o.includes(':'))) {
      const res = await fetch(`${sb.adminUrl.replace(/\/admin$/, '')}${op.slice(4)}`);
      expect(res.status, op).toBe(200);
    }
  });

  it('an unknown operation is still 404, and says where the list is', async () => {
    const res = await fetch(`${sb.adminUrl}/nope`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as { message: string }).message).toBe(
      'no such admin operation: GET /admin/nope (GET /admin lists them)',
    );
  });
});
