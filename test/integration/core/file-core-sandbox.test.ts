import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDocumentFetcher } from '../../../src/core/documents.js';
import { FileCore } from '../../../src/core/file/file-core.js';
import { readManifest, verifyPackage } from '../../../src/core/file/manifest.js';
import type { BoardingPackage } from '../../../src/core/port.js';
import { safeId } from '../../../src/core/safe-name.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { testBatches, testLayout } from '../../unit/core/batches-support.js';
import type { PlatformApi } from '../../../src/platform/api.js';
import { createPlatformClient, type PlatformClient } from '../../../src/platform/client.js';
import type { QueueItem } from '../../../src/contract/schemas.js';
import { startSandbox, type RunningSandbox } from '../../../src/sandbox/index.js';

/**
 * The file core fed by the real platform client against the sandbox: every released loan becomes
 * exactly one package whose manifest matches its files and whose documents are the sandbox's bytes
 * (including the sandbox's odd names), and an address that expired before the download is
 * re-requested.
 */
let sandboxNow = Date.now();
let sb: RunningSandbox;
let platform: PlatformClient;
let dir: string;

beforeAll(async () => {
  sb = await startSandbox({
    amounts: 'extreme',
    loans: 16,
    seed: 7,
    releaseRatio: 1,
    readsPerWindow: 100_000,
    writesPerWindow: 100_000,
    legacyPerWindow: 100_000,
    now: () => sandboxNow,
  });
  platform = createPlatformClient({
    clock: systemClock,
    baseUrl: sb.baseUrl,
    apiKey: sb.apiKey,
    // The test's blob host is on 127.0.0.1: allow-listed, like an internal document store.
    documentHosts: { allow: ['127.0.0.1'] },
    rateLimit: { readsPerWindow: 100_000, writesPerWindow: 100_000, windowMs: 60_000, headroom: 0.9 },
    timeouts: { connectMs: 2_000, headersMs: 5_000, bodyMs: 5_000 },
    maxRetries: 2,
    pageSize: 50,
    logger: silentLogger(),
  });
  dir = await mkdtemp(join(tmpdir(), 'file-core-sandbox-'));
});
afterAll(async () => {
  await platform.close();
  await sb.close();
  await rm(dir, { recursive: true, force: true });
});

async function queue(): Promise<QueueItem[]> {
  const items: QueueItem[] = [];
  for await (const page of platform.boardingQueue()) items.push(...page.items);
  return items;
}

async function packageFor(loan: QueueItem, api: PlatformApi): Promise<BoardingPackage> {
  const documents = await platform.listDocuments(loan.id);
  return {
    loanId: loan.id,
    loanNumber: loan.loanNumber ?? null,
    mappingVersion: 'test',
    connectorVersion: '0.1.0',
    records: [
      {
        type: 'loan',
        externalId: loan.id,
        fields: { amountCents: loan.centsAmount, frequency: loan.paymentFrequency },
      },
    ],
    documents,
    fetchDocument: createDocumentFetcher(api, { maxBytes: 50 * 1024 * 1024, logger: silentLogger() }),
    source: {
      centsAmount: loan.centsAmount ?? null,
      bpsRate: loan.bpsRate ?? null,
      maturityDate: loan.maturityDate ?? null,
    },
  };
}

/** The bytes the sandbox serves for a document, fetched independently of the adapter. */
async function sandboxBytes(documentId: string): Promise<Buffer> {
  const { url } = await platform.getDownloadAddress(documentId);
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

const LOAN_LAYOUT = testLayout(`
files:
  - name: loan.csv
    record: loan
    format: csv
    columns:
      - { name: loan_id, source: externalId }
      - { name: amount_cents, field: amountCents, neutralise: false }
      - { name: frequency, field: frequency }
`);

describe('file core with the sandbox', () => {
  it('boards every released loan into exactly one verified package, twice over', async () => {
    const core = new FileCore({
      clock: systemClock,
      dir,
      batches: testBatches(dir, systemClock, { layout: LOAN_LAYOUT }),
      timeZone: 'America/Chicago',
      logger: silentLogger(),
    });
    const loans = await queue();
    expect(loans.length).toBeGreaterThan(5);
    let documents = 0;
    for (const round of [1, 2]) {
      for (const loan of loans) {
        const pkg = await packageFor(loan, platform);
        documents += round === 1 ? pkg.documents.length : 0;
        await core.board(pkg);
      }
    }
    expect(documents).toBeGreaterThan(0);
    const packages = await readdir(join(dir, 'packages'));
    // The sandbox's ids come in every shape (short, UUID, up to 64 characters with ':'): a package
    // is named by the id, or by a readable prefix and a hash when the id is not a plain name.
    expect(loans.some((l) => l.id.includes(':'))).toBe(true);
    expect(packages.sort()).toEqual(loans.map((l) => safeId(l.id)).sort());
    for (const name of packages) {
      const pdir = join(dir, 'packages', name);
      expect(await verifyPackage(pdir)).toEqual({ ok: true, problems: [] });
      const m = (await readManifest(pdir))!;
      for (const d of m.documents) {
        const onDisk = await readFile(join(pdir, d.path));
        expect(onDisk.equals(await sandboxBytes(d.documentId)), `${name}/${d.path}`).toBe(true);
      }
    }
    // Round 2 re-boarded identical loans into the open batch: no second copy.
    const batchId = await core.batches!.sealNow('test', 'test');
    const control = (await readFile(join(dir, 'batches', batchId!, 'control.csv'), 'utf8'))
      .trim()
      .split('\n');
    expect(control.find((l) => l.includes(',*,loans,'))!.split(',')[3]).toBe(String(loans.length));
    const cents = loans.reduce((s, l) => s + BigInt(l.centsAmount ?? 0), 0n);
    expect(control.at(-1)!.split(',')[3]).toBe(cents.toString());
    const lines = (await readFile(join(dir, 'batches', batchId!, 'loan.csv'), 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(loans.length + 1);
    await core.close();
  });

  it('re-requests a download address that expired before the download started', async () => {
    const loans = await queue();
    let loan: QueueItem | undefined;
    let docs: Awaited<ReturnType<PlatformClient['listDocuments']>> = [];
    for (const l of loans) {
      docs = await platform.listDocuments(l.id);
      if (docs.length > 0) {
        loan = l;
        break;
      }
    }
    expect(loan).toBeDefined();
    let addresses = 0;
    // The queue was slow: six minutes pass between getting the first address and using it.
    const slow = Object.create(platform) as PlatformApi;
    slow.getDownloadAddress = async (id, o) => {
      const a = await platform.getDownloadAddress(id, o);
      addresses += 1;
      if (addresses === 1) sandboxNow += 6 * 60_000;
      return a;
    };
    const core = new FileCore({
      clock: systemClock,
      dir: join(dir, 'expiry'),
      timeZone: 'UTC',
      logger: silentLogger(),
    });
    const receipt = await core.board(await packageFor(loan!, slow));
    expect(addresses).toBe(docs.length + 1);
    expect(await verifyPackage(join(dir, 'expiry', receipt.coreReference))).toEqual({
      ok: true,
      problems: [],
    });
  });

  it('a blob host that drops the connection mid-body fails that board cleanly, and the next board completes (regression: ERR_STREAM_DESTROYED crashed the process)', async () => {
    const loans = await queue();
    const withDocs: QueueItem[] = [];
    for (const l of loans) if ((await platform.listDocuments(l.id)).length > 0) withDocs.push(l);
    expect(withDocs.length).toBeGreaterThan(1);
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown): void => {
      uncaught.push(err);
    };
    process.on('uncaughtException', onUncaught);
    const core = new FileCore({
      clock: systemClock,
      dir: join(dir, 'resets'),
      timeZone: 'UTC',
      logger: silentLogger(),
    });
    try {
      await fetch(`${sb.adminUrl}/faults`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ seed: 3, rules: [{ route: 'GET /blobs/:id', resetAfterCommitRate: 1 }] }),
      });
      for (const loan of withDocs)
        await expect(core.board(await packageFor(loan, platform))).rejects.toThrow();
      // What is asserted is an absence (no uncaught stream error after the reset). No window to wait
      // in: each failed board settles only once stream.pipeline has torn every stream of its
      // download down, and the boards below run on the same event loop afterwards, so a late error
      // from a reset stream would surface before the final assertion.
      await fetch(`${sb.adminUrl}/faults`, { method: 'DELETE' });
      for (const loan of withDocs) {
        const receipt = await core.board(await packageFor(loan, platform));
        expect(await verifyPackage(join(dir, 'resets', receipt.coreReference))).toEqual({
          ok: true,
          problems: [],
        });
      }
    } finally {
      process.off('uncaughtException', onUncaught);
      await core.close();
    }
    expect(uncaught).toEqual([]);
  });
});
