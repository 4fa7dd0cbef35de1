import { clockReading } from '../../support/fake-clock.js';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileCore } from '../../../src/core/file/file-core.js';
import { readManifest, verifyPackage } from '../../../src/core/file/manifest.js';
import { CoreUnavailableError } from '../../../src/core/port.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { makePackage, sha256 } from './support.js';
import { testBatches } from './batches-support.js';
import type { Db } from '../../../src/store/sqlite/db.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const PDF = Buffer.from('%PDF-1.4 tax return 2024\n%%EOF\n');

let dir: string;
let now = Date.parse('2025-03-14T15:00:00Z');
const clock = clockReading(() => now);

let db: Db;
function core(opts: { csvBatches?: boolean } = {}): FileCore {
  const batches = opts.csvBatches === false ? undefined : testBatches(dir, clock, { db: sqliteStore(db) });
  return new FileCore({ dir, batches, timeZone: 'America/Chicago', logger: silentLogger(), clock });
}

function loanRecords(loanId: string, extra: Record<string, unknown> = {}) {
  return [
    {
      type: 'customer',
      externalId: `biz_${loanId}`,
      fields: { name: 'Acme, "Tools" LLC', kind: 'business' },
    },
    { type: 'loan', externalId: loanId, fields: { principalCents: 125000050, rateBps: 725, ...extra } },
    { type: 'relationship', externalId: `${loanId}:biz_${loanId}`, fields: { role: 'borrower' } },
  ];
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'file-core-'));
  db = openDatabase(join(dir, 'state.sqlite'));
  now = Date.parse('2025-03-14T15:00:00Z');
});
afterEach(async () => {
  db.close();
  await rm(dir, { recursive: true, force: true });
});

describe('FileCore packages', () => {
  it('writes one package per loan whose manifest hashes match the files', async () => {
    const c = core();
    const pkg = makePackage('loan_1', loanRecords('loan_1'), [
      { id: 'doc_1', name: 'Tax Return 2024.pdf', bytes: PDF },
    ]);
    const receipt = await c.board(pkg);
    expect(receipt.coreReference).toBe('packages/loan_1');
    expect(receipt.documents).toEqual([
      {
        documentId: 'doc_1',
        sha256: sha256(PDF),
        bytes: PDF.length,
        coreId: 'packages/loan_1/documents/doc_1__Tax Return 2024.pdf',
      },
    ]);
    const pdir = join(dir, 'packages', 'loan_1');
    expect(await verifyPackage(pdir)).toEqual({ ok: true, problems: [] });
    const m = await readManifest(pdir);
    expect(m).toMatchObject({
      loanId: 'loan_1',
      mappingVersion: 'map-v1',
      connectorVersion: '0.1.0',
      batchDate: '2025-03-14',
      source: { centsAmount: 125000050 },
    });
    expect(m?.documents[0]).toMatchObject({
      documentId: 'doc_1',
      name: 'Tax Return 2024.pdf',
      category: 'financials',
      period: '2024',
      requirement: { id: 'req_1' },
    });
    expect(await readFile(join(pdir, 'documents', 'doc_1__Tax Return 2024.pdf'))).toEqual(PDF);
    // Tax ids and documents: nothing is readable by other users of the machine.
    for (const p of [
      pdir,
      join(pdir, 'records.json'),
      join(pdir, 'documents', 'doc_1__Tax Return 2024.pdf'),
    ]) {
      expect((await stat(p)).mode & 0o007).toBe(0);
    }
    const records = JSON.parse(await readFile(join(pdir, 'records.json'), 'utf8'));
    expect(records.records).toHaveLength(3);
    expect(await c.findLoan('loan_1')).toEqual({
      coreReference: 'packages/loan_1',
      loanExternalId: 'loan_1',
      mappingVersion: 'map-v1',
      fields: pkg.source,
    });
    expect(await c.findLoan('loan_2')).toBeNull();
  });

  it('boarding the same loan twice replaces its package: one package, the new content, no leftovers', async () => {
    const c = core();
    await c.board(makePackage('loan_1', loanRecords('loan_1'), [{ id: 'doc_1', name: 'a.pdf', bytes: PDF }]));
    now += 86_400_000; // next day: the loan stays in its first batch day
    const second = makePackage(
      'loan_1',
      loanRecords('loan_1', { note: 'v2' }),
      [{ id: 'doc_2', name: 'b.pdf', bytes: Buffer.from('second') }],
      { mappingVersion: 'map-v2' },
    );
    await c.board(second);
    expect(await readdir(join(dir, 'packages'))).toEqual(['loan_1']);
    const pdir = join(dir, 'packages', 'loan_1');
    expect(await verifyPackage(pdir)).toEqual({ ok: true, problems: [] });
    expect(await readdir(join(pdir, 'documents'))).toEqual(['doc_2__b.pdf']);
    const m = await readManifest(pdir);
    expect(m).toMatchObject({
      mappingVersion: 'map-v2',
      batchDate: '2025-03-14',
      firstBoardedAt: '2025-03-14T15:00:00.000Z',
    });
    expect(await readdir(join(dir, '.staging'))).toEqual([]);
    expect(await readdir(join(dir, '.trash'))).toEqual([]);
    const loans = [];
    for await (const l of c.listLoans()) loans.push(l);
    expect(loans.map((l) => l.loanExternalId)).toEqual(['loan_1']);
  });

  it('a failed document download leaves the previous package intact and no staging behind', async () => {
    const c = core();
    await c.board(makePackage('loan_1', loanRecords('loan_1'), [{ id: 'doc_1', name: 'a.pdf', bytes: PDF }]));
    const broken = makePackage('loan_1', loanRecords('loan_1'), [{ id: 'doc_1', name: 'a.pdf', bytes: PDF }]);
    broken.documents.push({ id: 'doc_missing', name: 'gone.pdf' });
    await expect(c.board(broken)).rejects.toThrow(/no bytes for doc_missing/);
    expect(await verifyPackage(join(dir, 'packages', 'loan_1'))).toEqual({ ok: true, problems: [] });
    expect(await readdir(join(dir, '.staging'))).toEqual([]);
  });

  it('recovers from a crash between moving the old package aside and moving the new one in', async () => {
    const c = core();
    await c.board(makePackage('loan_1', loanRecords('loan_1'), [{ id: 'doc_1', name: 'a.pdf', bytes: PDF }]));
    await c.close();
    // Simulate the crash: old package in .trash, a complete new one still in .staging, nothing live.
    await rename(join(dir, 'packages', 'loan_1'), join(dir, '.trash', 'loan_1.123-abc-deadbeef'));
    await cp(
      join(dir, '.trash', 'loan_1.123-abc-deadbeef'),
      join(dir, '.staging', 'loan_1.124-abd-feedbeef'),
      { recursive: true },
    );
    // …and an unrelated half-written staging directory without a manifest.
    await mkdir(join(dir, '.staging', 'loan_9.1-a-00000000', 'documents'), { recursive: true });
    await writeFile(join(dir, '.staging', 'loan_9.1-a-00000000', 'documents', 'x'), 'partial');

    const fresh = core();
    expect(await fresh.findLoan('loan_1')).toMatchObject({ loanExternalId: 'loan_1' });
    expect(await verifyPackage(join(dir, 'packages', 'loan_1'))).toEqual({ ok: true, problems: [] });
    expect(await readdir(join(dir, '.staging'))).toEqual([]);
    expect(await readdir(join(dir, '.trash'))).toEqual([]);
    await fresh.board(
      makePackage('loan_1', loanRecords('loan_1'), [{ id: 'doc_1', name: 'a.pdf', bytes: PDF }]),
    );
    expect(await readdir(join(dir, 'packages'))).toEqual(['loan_1']);
  });

  it('a crash after the swap (old package still in .trash) is cleaned up, keeping the live package', async () => {
    const c = core();
    await c.board(makePackage('loan_1', loanRecords('loan_1', { v: 1 }), []));
    await cp(join(dir, 'packages', 'loan_1'), join(dir, '.trash', 'loan_1.1-a-00000000'), {
      recursive: true,
    });
    await c.board(makePackage('loan_1', loanRecords('loan_1', { v: 2 }), []));
    expect(await readdir(join(dir, '.trash'))).toEqual([]);
    const records = JSON.parse(await readFile(join(dir, 'packages', 'loan_1', 'records.json'), 'utf8'));
    expect(records.records[1].fields.v).toBe(2);
  });

  it('stores hostile document names by id with a sanitised name, never outside the package', async () => {
    const c = core();
    const hostile = [
      { id: 'd1', name: '../../etc/passwd', bytes: Buffer.from('1') },
      { id: 'd2', name: '', bytes: Buffer.from('2') },
      { id: 'd3', name: null, bytes: Buffer.from('3') },
      { id: 'd4', name: `${'very long file name '.repeat(40)}.pdf`, bytes: Buffer.from('4') },
      { id: 'd5', name: '契約書.pdf', bytes: Buffer.from('5') },
      { id: 'd6', name: 'C:\\Windows\\system32\\evil.dll', bytes: Buffer.from('6') },
      { id: 'd7', name: '..', bytes: Buffer.from('7') },
      { id: '../d8', name: 'con', bytes: Buffer.from('8') },
      { id: 'd9', name: 'a\u0000b\nc\u202Egpj.exe', bytes: Buffer.from('9') },
    ];
    await c.board(makePackage('../../loan/evil', loanRecords('x'), hostile));
    const pkgs = await readdir(join(dir, 'packages'));
    expect(pkgs).toHaveLength(1);
    const pdir = join(dir, 'packages', pkgs[0]!);
    expect(pkgs[0]).not.toContain('/');
    expect(await verifyPackage(pdir)).toEqual({ ok: true, problems: [] });
    const files = await readdir(join(pdir, 'documents'));
    expect(files).toHaveLength(hostile.length);
    for (const f of files) {
      expect(resolve(pdir, 'documents', f).startsWith(join(pdir, 'documents') + '/')).toBe(true);
      expect(Buffer.byteLength(f)).toBeLessThanOrEqual(200);
      expect(
        [...f].some((ch) => ch === '/' || ch === '\\' || ch.charCodeAt(0) < 0x20 || ch === '\u202e'),
      ).toBe(false);
    }
    expect(existsSync(join(dir, 'etc'))).toBe(false);
    const m = await readManifest(pdir);
    expect(m?.documents.map((d) => d.name)).toEqual(hostile.map((h) => h.name));
    expect(await c.findLoan('../../loan/evil')).toMatchObject({ loanExternalId: '../../loan/evil' });
  });

  it('findLoan reports a package whose batch row is missing as incomplete, so the pipeline completes it', async () => {
    const c = core();
    await c.board(makePackage('loan_1', loanRecords('loan_1')));
    expect((await c.findLoan('loan_1'))?.complete).not.toBe(false);
    // A crash between the package swap and the batch row: the row is missing.
    db.prepare(`DELETE FROM file_batch_loans WHERE loan_id = 'loan_1'`).run();
    const fresh = core();
    expect((await fresh.findLoan('loan_1'))?.complete).toBe(false);
    await fresh.board(makePackage('loan_1', loanRecords('loan_1')));
    expect((await fresh.findLoan('loan_1'))?.complete).not.toBe(false);
    // Without CSV batches the package alone is the whole write.
    db.prepare(`DELETE FROM file_batch_loans WHERE loan_id = 'loan_1'`).run();
    expect((await core({ csvBatches: false }).findLoan('loan_1'))?.complete).not.toBe(false);
  });

  it('health reports a writable directory', async () => {
    expect(await core().health()).toMatchObject({ ok: true });
  });
});

describe('FileCore failures', () => {
  it('reports a file-system failure as CoreUnavailableError (retry later), not a rejection', async () => {
    await writeFile(join(dir, 'packages'), 'not a directory');
    const err = await core()
      .board(makePackage('loan_1', loanRecords('loan_1')))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CoreUnavailableError);
    expect((err as CoreUnavailableError).ambiguous).toBe(false);
  });
});
