import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ImagingExport } from '../../../src/imaging/export.js';
import { compileImagingLayout } from '../../../src/imaging/layout.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { computeImagingTie } from '../../../src/reports/imaging.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { ImagingStore } from '../../../src/store/imaging.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { TestImporter } from '../../support/imaging-importer.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';

const SET = join(process.cwd(), 'mappings/generic');
const layoutFile = 'imaging/delimited.yaml';
const layout = compileImagingLayout(layoutFile, readFileSync(join(SET, layoutFile), 'utf8'), (rel) =>
  readFileSync(join(SET, rel), 'utf8'),
).layout!;
const T0 = Date.parse('2026-12-02T12:00:00Z');

/**
 * An export on the store. Replicas share imaging.dir and its staging directory (beside it, on the
 * same share by default): a batch one replica froze, another can write.
 */
function exporter(db: StoreDb, root: string, mode: 'loan' | 'batch') {
  let now = T0;
  mkdirSync(join(root, 'dip'), { recursive: true });
  const exp = new ImagingExport({
    dir: join(root, 'dip'),
    stagingDir: join(root, 'staging'),
    store: new ImagingStore(db),
    layout: () => layout,
    mode,
    rule: { kind: 'daily', hour: 18, minute: 0, timeZone: 'UTC' },
    maxDocuments: 3,
    readyFile: 'READY',
    fetchDocument: async (doc, sink) => {
      // A little latency, so two replicas' exports of one loan overlap.
      await new Promise((r) => setTimeout(r, 5));
      const bytes = Buffer.from(`content of ${doc.id}`);
      sink.end(bytes);
      return { sha256: '', bytes: bytes.length, contentType: null };
    },
    logger: silentLogger(),
    clock: { now: () => now } as never,
  });
  return { exp, advance: (ms: number) => (now += ms) };
}

const loan = (id: string, docs: string[]) => ({
  loanId: id,
  releaseMarker: 'r1',
  loan: { id, loanNumber: `LN-${id}` } as never,
  entities: { businesses: [{ id: 'b', name: 'Acme', role: 'borrower' }], people: [] } as never,
  documents: docs.map((d) => ({ id: d, name: `${d}.pdf`, category: 'legal' })) as never,
  identity: { accountNumber: `A-${id}`, customers: {} } as never,
});

const importerOf = (root: string) =>
  new TestImporter({
    dir: join(root, 'dip'),
    indexFile: 'index.csv',
    format: 'delimited',
    fileKeyword: 'FileName',
  });

/**
 * The imaging tables (migration 20, src/store/imaging.ts) on both engines: exactly once when two
 * replicas export the same loan at the same moment, batches cut by size and cut-off, audited
 * re-exports numbered, and the reconciliation's tie-out with its gaps.
 */
describe.each(STORE_ENGINES)('imaging store on %s', (engine) => {
  const open = testStores(engine);

  it.skipIf(engineSkipped(engine))(
    'two replicas exporting one loan at once: each document in one folder, once',
    async () => {
      const { db } = await open();
      const root = mkdtempSync(join(tmpdir(), 'imaging-store-'));
      const a = exporter(db, root, 'loan').exp;
      const b = exporter(db, root, 'loan').exp;
      const tries = await Promise.allSettled([
        a.exportLoan(loan('L1', ['d1', 'd2', 'd3'])),
        b.exportLoan(loan('L1', ['d1', 'd2', 'd3'])),
      ]);
      const exported = tries.flatMap((t) => (t.status === 'fulfilled' ? t.value.exported : []));
      // One replica's folder write may fail under the other's (in one process, each sweeps the
      // other's temp files): the loan retries, as the pipeline does, and finds its folder to finish.
      for (const [i, t] of tries.entries())
        if (t.status === 'rejected') {
          const again = await [a, b][i]!.exportLoan(loan('L1', ['d1', 'd2', 'd3']));
          exported.push(...again.exported);
        }
      expect(await a.loanExported('L1', 'r1')).toBe(true);
      expect(await a.store.unfinishedOfLoan('L1')).toEqual([]);
      const importer = importerOf(root);
      importer.poll();
      expect(importer.imported.map((d) => d.keywords['DocumentId']).sort()).toEqual(['d1', 'd2', 'd3']);
      const docs = await a.store.documentsOfLoan('L1');
      expect(docs.map((d) => [d.documentId, d.status, d.reexport]).sort()).toEqual([
        ['d1', 'sealed', 0],
        ['d2', 'sealed', 0],
        ['d3', 'sealed', 0],
      ]);
      // Sealed: the encrypted records left the database with the seal.
      expect(docs.every((d) => d.record === '')).toBe(true);

      // An audited re-export: a new batch, numbered, under who and why; the tie-out counts first exports.
      const again = await a.exportLoan(loan('L1', ['d1', 'd2', 'd3']), undefined, {
        by: 'ops-anna',
        reason: 'DIP lost the batch',
        documentIds: ['d2'],
      });
      expect(again.exported).toEqual(['d2']);
      const d2 = (await a.store.documentsOfLoan('L1'))
        .filter((d) => d.documentId === 'd2')
        .sort((x, y) => x.reexport - y.reexport);
      expect(d2.map((d) => [d.reexport, d.reexportBy, d.reexportReason])).toEqual([
        [0, null, null],
        [1, 'ops-anna', 'DIP lost the batch'],
      ]);
      expect((await a.store.exportedIds('L1')).size).toBe(3);
    },
  );

  it.skipIf(engineSkipped(engine))(
    'batch mode: cut at the size and at the cut-off; the tie-out names the loan whose documents do not tie',
    async () => {
      const { db } = await open();
      const root = mkdtempSync(join(tmpdir(), 'imaging-store-'));
      const { exp, advance } = exporter(db, root, 'batch');
      await exp.exportLoan(loan('L1', ['d1', 'd2']));
      // The third document fills the batch (maxDocuments 3): frozen and written at once.
      await exp.exportLoan(loan('L2', ['d3']));
      await exp.exportLoan(loan('L3', ['d4']));
      const batches = await exp.store.list();
      expect(batches.map((b) => b.status)).toEqual(['open', 'sealed']);
      expect(await exp.store.counts(batches[1]!.id)).toMatchObject({ documents: 3, loans: 2 });
      expect(await exp.store.documentsByStatus()).toEqual({ open: 1, sealing: 0, publishing: 0, sealed: 3 });
      // Not past the cut-off: nothing to write. Past it: the open batch is frozen and written.
      expect(await exp.sealDue()).toEqual([]);
      advance(7 * 3600_000);
      expect(await exp.sealDue()).toHaveLength(1);
      expect(await exp.store.documentsByStatus()).toEqual({ open: 0, sealing: 0, publishing: 0, sealed: 4 });
      const importer = importerOf(root);
      expect(importer.poll()).toBe(2);
      expect(importer.imported).toHaveLength(4);

      // The tie-out: L1 and L3 tie; L2 listed 3 documents but only 1 went out (a gap a person looks at).
      const s = createBoardingStore(db);
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      await s.loans.insert({ id: 'L2', state: 'queued' }, T0);
      await s.loans.insert({ id: 'L3', state: 'queued' }, T0);
      await db.write(() => db.run(`UPDATE loans SET state = 'acknowledged'`));
      await db.write(() => db.run(`UPDATE imaging_loans SET documents = 3 WHERE loan_id = 'L2'`));
      const tie = computeImagingTie(await s.reports.imagingTie());
      expect(tie).toMatchObject({ loans: 3, listed: 6, exported: 4, published: 4, ties: false });
      expect(tie?.gaps).toEqual([{ loanId: 'L2', listed: 3, writtenToCore: null, exported: 1 }]);
    },
  );
});
