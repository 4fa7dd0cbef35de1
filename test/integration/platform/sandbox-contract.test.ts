import { createHash } from 'node:crypto';
import { systemClock } from '../../../src/lib/clock.js';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/lib/logger.js';
import { createPlatformClient, type PlatformClient } from '../../../src/platform/client.js';
import { startSandbox, type RunningSandbox } from '../../../src/sandbox/index.js';

/** The client against the Loan Platform simulator: every operation the connector uses, end to end. */
describe('platform client against the sandbox', () => {
  let sandbox: RunningSandbox;
  let client: PlatformClient;
  beforeAll(async () => {
    sandbox = await startSandbox({ amounts: 'extreme', loans: 30, seed: 7, releaseRatio: 1 });
    client = createPlatformClient({
      clock: systemClock,
      baseUrl: sandbox.baseUrl,
      apiKey: sandbox.apiKey,
      // The test's blob host is on 127.0.0.1: allow-listed, like an internal document store.
      documentHosts: { allow: ['127.0.0.1'] },
      rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: 60_000, headroom: 0.9 },
      timeouts: { connectMs: 2000, headersMs: 5000, bodyMs: 5000 },
      maxRetries: 2,
      pageSize: 7,
      logger: silentLogger(),
      retry: { minDelayMs: 10, maxDelayMs: 50 },
    });
  });
  afterAll(async () => {
    await client.close();
    await sandbox.close();
  });

  it('walks the queue in cursor mode and reads each part of a loan', async () => {
    const ids: string[] = [];
    const cursors: Array<string | null> = [];
    for await (const page of client.boardingQueue()) {
      expect(page.invalid).toEqual([]);
      ids.push(...page.items.map((i) => i.id));
      cursors.push(page.nextCursor);
    }
    expect(ids.length).toBeGreaterThan(0);
    expect(new Set(ids).size).toBe(ids.length);
    expect(cursors.at(-1)).toBeNull();
    if (cursors.length > 1) expect(cursors[0]).toMatch(/.+/);

    const id = ids[0]!;
    expect((await client.getLoan(id)).id).toBe(id);
    expect((await client.getLoanSummary(id)).loan.id).toBe(id);
    const entities = await client.getEntities(id);
    expect(Array.isArray(entities.businesses)).toBe(true);
    const products = await client.listProducts();
    expect(products.length).toBeGreaterThan(0);
    await expect(client.getProduct(products[0]!.id)).resolves.toMatchObject({ id: products[0]!.id });

    let downloaded = false;
    for (const loanId of ids) {
      const docs = await client.listDocuments(loanId);
      const doc = docs[0];
      if (!doc) continue;
      const addr = await client.getDownloadAddress(doc.id);
      const chunks: Buffer[] = [];
      const r = await client.download(
        addr.url,
        new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c), cb()) }),
        { maxBytes: 50 * 1024 * 1024 },
      );
      expect(r.bytes).toBe(Buffer.concat(chunks).length);
      expect(r.sha256).toBe(createHash('sha256').update(Buffer.concat(chunks)).digest('hex'));
      downloaded = true;
      break;
    }
    expect(downloaded).toBe(true);
  });

  it('acknowledges a board and the loan then shows up with boarded=true', async () => {
    const first = (await client.boardingQueue().next()).value;
    const loan = first?.items[0];
    expect(loan).toBeDefined();
    await client.acknowledgeBoarding(loan!.id, {}, { idempotencyKey: `ack:${loan!.id}:test` });
    const boarded: string[] = [];
    for await (const page of client.boardingQueue({ boarded: true, boardedSince: '2000-01-01T00:00:00Z' }))
      boarded.push(...page.items.map((i) => i.id));
    expect(boarded).toContain(loan!.id);
  });

  it('a missing loan is loan.not_found', async () => {
    await expect(client.getLoan('does-not-exist')).rejects.toMatchObject({
      code: 'loan.not_found',
      status: 404,
      retryable: false,
    });
  });
});
