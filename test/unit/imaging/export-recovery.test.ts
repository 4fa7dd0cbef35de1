import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ImagingExport, ImagingUnavailableError } from '../../../src/imaging/export.js';
import { compileImagingLayout } from '../../../src/imaging/layout.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { ImagingStore } from '../../../src/store/imaging.js';
import { openTestStore } from '../../support/store-engines.js';
import { TestImporter } from '../../support/imaging-importer.js';

const SET = join(process.cwd(), 'mappings/generic');
const layoutFile = 'imaging/delimited.yaml';
const layout = compileImagingLayout(layoutFile, readFileSync(join(SET, layoutFile), 'utf8'), (rel) =>
  readFileSync(join(SET, rel), 'utf8'),
).layout!;

function exporterFor(
  db: Awaited<ReturnType<typeof openTestStore>>['db'],
  root: string,
  mode: 'loan' | 'batch',
) {
  let now = Date.parse('2026-12-02T12:00:00Z');
  // The daemon creates imaging.dir at start (src/app/imaging.ts); the export never does.
  mkdirSync(join(root, 'dip'), { recursive: true });
  return {
    exp: new ImagingExport({
      dir: join(root, 'dip'),
      stagingDir: join(root, 'staging'),
      store: new ImagingStore(db),
      layout: () => layout,
      mode,
      rule: { kind: 'daily', hour: 18, minute: 0, timeZone: 'UTC' },
      maxDocuments: 100,
      readyFile: 'READY',
      fetchDocument: (doc, sink) => {
        const bytes = Buffer.from(`content of ${doc.id}`);
        sink.end(bytes);
        return Promise.resolve({ sha256: '', bytes: bytes.length, contentType: null });
      },
      logger: silentLogger(),
      clock: { now: () => now } as never,
    }),
    advance: (ms: number) => (now += ms),
  };
}

const loan = (id: string, docs: string[]) => ({
  loanId: id,
  releaseMarker: 'r1',
  loan: { id, loanNumber: `LN-${id}` } as never,
  entities: { businesses: [{ id: 'b', name: 'Acme', role: 'borrower' }], people: [] } as never,
  documents: docs.map((d) => ({ id: d, name: `${d}.pdf`, category: 'legal' })) as never,
  identity: { accountNumber: `A-${id}`, customers: {} } as never,
});

describe('imaging export: exactly once across crashes', () => {
  it('a document is exported once whatever re-boards; a folder the importer took before the seal was recorded is not written again', async () => {
    const s = await openTestStore('sqlite');
    const root = mkdtempSync(join(tmpdir(), 'imaging-rec-'));
    const { exp } = exporterFor(s.db, root, 'loan');
    const first = await exp.exportLoan(loan('L1', ['d1', 'd2']));
    expect(first.exported).toEqual(['d1', 'd2']);
    // A re-board (a crash after the commit, a retry of the ack, another replica): nothing again.
    const again = await exp.exportLoan(loan('L1', ['d1', 'd2', 'd3']));
    expect(again.exported).toEqual(['d3']);
    expect(again.skipped).toEqual([]);
    const importer = new TestImporter({
      dir: join(root, 'dip'),
      indexFile: 'index.csv',
      format: 'delimited',
      fileKeyword: 'FileName',
    });
    expect(importer.poll()).toBe(2);
    expect(importer.imported.map((d) => d.keywords['DocumentId']).sort()).toEqual(['d1', 'd2', 'd3']);

    // A crash between the marker and the seal's commit: the batch is left in `publishing`, the
    // importer takes the folder meanwhile; recovery must not publish it a second time.
    await exp.exportLoan(loan('L2', ['d4']));
    const id = (await exp.store.list(1))[0]!.id;
    await s.db.write(() => s.db.run(`UPDATE imaging_batches SET status = 'publishing' WHERE id = ?`, [id]));
    expect(importer.poll()).toBe(1);
    expect(existsSync(join(root, 'dip', id))).toBe(false);
    await exp.recover();
    expect(existsSync(join(root, 'dip', id))).toBe(false);
    expect((await exp.store.get(id))!.status).toBe('sealed');
    expect(importer.poll()).toBe(0);
    expect(importer.imported).toHaveLength(4);
    await s.close();
  });

  it('a batch frozen by a crash before its files were written is written whole at recovery, never half', async () => {
    const s = await openTestStore('sqlite');
    const root = mkdtempSync(join(tmpdir(), 'imaging-rec-'));
    const { exp, advance } = exporterFor(s.db, root, 'batch');
    await exp.exportLoan(loan('L1', ['d1']));
    await exp.exportLoan(loan('L2', ['d2', 'd3']));
    // The open batch is invisible to the importer: no folder at all until the cut-off.
    expect(readdirSync(join(root, 'dip'))).toEqual([]);
    advance(7 * 3600_000);
    // Frozen at the cut-off, then "crash" before the folder is written.
    expect(await exp.store.freezeDue(Date.parse('2026-12-02T19:00:00Z'))).toBeDefined();
    const importer = new TestImporter({
      dir: join(root, 'dip'),
      indexFile: 'index.csv',
      format: 'delimited',
      fileKeyword: 'FileName',
    });
    expect(importer.poll()).toBe(0);
    await exp.recover();
    expect(importer.poll()).toBe(1);
    expect(importer.imported.map((d) => d.keywords['DocumentId'])).toEqual(['d1', 'd2', 'd3']);
    expect(readdirSync(join(root, 'staging', 'L1'))).toEqual([]);
    await s.close();
  });

  it('a folder missing (an unmounted share) makes the loan wait; its retry writes the folder before the ack', async () => {
    const s = await openTestStore('sqlite');
    const root = mkdtempSync(join(tmpdir(), 'imaging-rec-'));
    const { exp } = exporterFor(s.db, root, 'loan');
    renameSync(join(root, 'dip'), join(root, 'dip-away'));
    const err = await exp.exportLoan(loan('L1', ['d1', 'd2'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImagingUnavailableError);
    expect((err as ImagingUnavailableError).code).toBe('imaging.enoent');
    // Not created where the share should be.
    expect(existsSync(join(root, 'dip'))).toBe(false);
    // The export committed: the retry finds the loan exported, and writes its folder first.
    expect(await exp.loanExported('L1', 'r1')).toBe(true);
    expect(await exp.store.unfinishedOfLoan('L1')).toHaveLength(1);
    await expect(exp.finishLoan('L1')).rejects.toBeInstanceOf(ImagingUnavailableError);
    renameSync(join(root, 'dip-away'), join(root, 'dip'));
    await exp.finishLoan('L1');
    expect(await exp.store.unfinishedOfLoan('L1')).toEqual([]);
    const importer = new TestImporter({
      dir: join(root, 'dip'),
      indexFile: 'index.csv',
      format: 'delimited',
      fileKeyword: 'FileName',
    });
    expect(importer.poll()).toBe(1);
    expect(importer.imported.map((d) => d.keywords['DocumentId']).sort()).toEqual(['d1', 'd2']);
    await s.close();
  });

  it('a crash while the ready marker was written leaves no temp file in the folder the importer takes', async () => {
    const s = await openTestStore('sqlite');
    const root = mkdtempSync(join(tmpdir(), 'imaging-rec-'));
    const { exp } = exporterFor(s.db, root, 'loan');
    await exp.exportLoan(loan('L1', ['d1']));
    const id = (await exp.store.list(1))[0]!.id;
    // As a process killed inside writeFileAtomic(READY) leaves it: the marker's temp file, no marker,
    // the batch still publishing (a pid no process has).
    rmSync(join(root, 'dip', id, 'READY'));
    writeFileSync(join(root, 'dip', id, '.tmp-4194300-crashed-marker'), `${id}\n`);
    await s.db.write(() => s.db.run(`UPDATE imaging_batches SET status = 'publishing' WHERE id = ?`, [id]));
    await exp.recover();
    expect(readdirSync(join(root, 'dip', id)).sort()).toEqual(
      ['READY', 'd1__d1.pdf', 'index.csv', 'manifest.sha256'].sort(),
    );
    const importer = new TestImporter({
      dir: join(root, 'dip'),
      indexFile: 'index.csv',
      format: 'delimited',
      fileKeyword: 'FileName',
    });
    expect(importer.poll()).toBe(1);
    await s.close();
  });
});
