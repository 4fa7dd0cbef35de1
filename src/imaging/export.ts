import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { createWriteStream, type WriteStream } from 'node:fs';
import { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { join } from 'node:path';
import type { Entities, PlatformDocument, QueueItem } from '../contract/schemas.js';
import type { MappingIdentity } from '../mapping/types.js';
import type { DocumentFetcher } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { BatchKeys } from '../core/file/batch-keys.js';
import { batchDay, nextCutoff, type CutoffRule } from '../core/file/cutoff.js';
import { sha256File } from '../core/file/manifest.js';
import {
  DIR_MODE,
  exists,
  fsyncDir,
  fsyncPath,
  sweepTempFiles,
  TEMP_PREFIX,
  uniqueSuffix,
  writeFileAtomic,
} from '../core/durable-fs.js';
import { documentFileName, safeId } from '../core/safe-name.js';
import type { ImagingBatchRow, ImagingDocumentRow, ImagingStore } from '../store/imaging.js';
import { compileImagingLayout, type ImagingLayout } from './layout.js';
import { checkRecord, documentContext, evaluateRecord, renderIndex, type IndexDocument } from './render.js';
import { afterDrain } from '../lib/streams.js';

/**
 * The imaging export: each boarded loan's documents into `imaging.dir` for the bank's importer
 * (OnBase DIP and the like), after the core write and before the acknowledgement.
 *
 * What the importer sees is always whole. A batch is a folder `<dir>/<batch id>/`: the document
 * files, then the index, then `manifest.sha256` (a sha256 per file), then the ready marker, each
 * written under a temporary name (`.tmp-…`) and renamed; the importer takes a folder only once its
 * marker exists, and deletes the marker last. Until its batch is written a document waits in the
 * staging directory (outside the folder the importer polls), so an open batch is never visible.
 *
 * Exactly once: which batch a document goes to is decided in one transaction of the state
 * database that leaves out any document exported before (a crash after the commit, a re-board,
 * another replica). A batch moves open → sealing (frozen: its rows never change) → publishing
 * (files, index and manifest are in place: committed before the marker is renamed) → sealed. A
 * crash in `sealing` writes the same bytes again; in `publishing` the marker is written only when
 * the manifest is still there: a folder the importer already took (and deleted) is never written
 * twice.
 */

export const MANIFEST_FILE = 'manifest.sha256';
/** Where the core write's copies of documents wait for the export (in the staging directory). */
const SPOOL_DIR = '.spool';
const SPOOL_KEEP_MS = 24 * 60 * 60_000;

/** A file-system failure of the export (a missing, full or read-only folder): the loan retries later. */
export class ImagingUnavailableError extends Error {
  override readonly name = 'ImagingUnavailableError';
  readonly code: string;
  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

export interface ImagingExportOptions {
  dir: string;
  stagingDir: string;
  store: ImagingStore;
  /** The index layout in use (asked at each board: a reload may change it). */
  layout: () => ImagingLayout;
  mode: 'loan' | 'batch';
  rule: CutoffRule;
  maxDocuments: number;
  readyFile: string;
  fetchDocument: DocumentFetcher;
  logger: Logger;
  clock: Clock;
}

export interface LoanDocumentsInput {
  loanId: string;
  releaseMarker: string;
  loan: QueueItem;
  entities: Entities;
  documents: readonly PlatformDocument[];
  identity?: MappingIdentity | undefined;
}

export interface LoanExportResult {
  batchId: string | null;
  exported: string[];
  skipped: string[];
  /** Documents that took the layout's default document type: review items on the loan. */
  reviews: Array<{ documentId: string; message: string }>;
}

function fsCode(err: unknown): string | undefined {
  const c = (err as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

const FS_CODES = new Set([
  'ENOSPC',
  'EDQUOT',
  'EACCES',
  'EPERM',
  'EROFS',
  'ENOENT',
  'EIO',
  'ENOTDIR',
  'EBUSY',
]);

/** File-system errors become ImagingUnavailableError (retried); anything else goes up as it is. */
async function fsStep<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const code = fsCode(err);
    if (code !== undefined && FS_CODES.has(code))
      throw new ImagingUnavailableError(`imaging: ${what}: ${code}`, `imaging.${code.toLowerCase()}`, {
        cause: err,
      });
    throw err;
  }
}

export class ImagingExport {
  readonly store: ImagingStore;
  readonly keys: BatchKeys;
  private writing: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: ImagingExportOptions) {
    this.store = opts.store;
    this.keys = new BatchKeys(join(opts.stagingDir, '.keys'));
  }

  get dir(): string {
    return this.opts.dir;
  }

  get readyFile(): string {
    return this.opts.readyFile;
  }

  batchDir(id: string): string {
    if (!/^\d{4}-\d{2}-\d{2}-\d{4,}$/.test(id))
      throw new Error(`invalid imaging batch id ${JSON.stringify(id)}`);
    return join(this.opts.dir, id);
  }

  loanExported(loanId: string, releaseMarker: string): Promise<boolean> {
    return this.store.loanExported(loanId, releaseMarker);
  }

  /**
   * Exports a loan's documents not exported before: each record evaluated and checked against the
   * layout first (a value the index cannot hold stops the loan before anything is written), each
   * file fetched into staging and fsynced, then one transaction puts them into a batch. A loan's own
   * batch (mode loan) and any batch the call froze are written before it returns.
   */
  async exportLoan(
    input: LoanDocumentsInput,
    signal?: AbortSignal,
    reexport?: { by: string; reason: string; documentIds?: readonly string[] },
  ): Promise<LoanExportResult> {
    const layout = this.opts.layout();
    const log = this.opts.logger.child({ loanId: input.loanId });
    const done = reexport === undefined ? await this.store.exportedIds(input.loanId) : new Set<string>();
    const wanted = input.documents.filter(
      (d) => !done.has(d.id) && (reexport?.documentIds === undefined || reexport.documentIds.includes(d.id)),
    );
    const reviews: LoanExportResult['reviews'] = [];
    const prepared: Array<{
      doc: PlatformDocument;
      values: Array<string | null>;
      type: string;
      fellBack: boolean;
      fileName: string;
    }> = [];
    for (const doc of wanted) {
      const { context, choice } = documentContext(layout, input, doc);
      const values = await evaluateRecord(layout, context, this.opts.rule.timeZone);
      const fileName = documentFileName(doc.id, doc.name);
      checkRecord(layout, values, fileName);
      if (choice.fellBack)
        reviews.push({
          documentId: doc.id,
          message:
            `document ${doc.id} (category ${JSON.stringify(doc.category ?? null)}, requirement ` +
            `${JSON.stringify(doc.requirement?.name ?? null)}) has no document type in ${layout.file}: ` +
            `exported as ${JSON.stringify(choice.documentType)}`,
        });
      prepared.push({ doc, values, type: choice.documentType, fellBack: choice.fellBack, fileName });
    }
    const loanDir = join(this.opts.stagingDir, safeId(input.loanId));
    const staged = [];
    for (const p of prepared) {
      signal?.throwIfAborted();
      const path = join(loanDir, p.fileName);
      const got = await this.stage(p.doc, loanDir, path, signal);
      const plain = JSON.stringify(p.values);
      staged.push({
        documentId: p.doc.id,
        fileName: p.fileName,
        stagedPath: path,
        sha256: got.sha256,
        bytes: got.bytes,
        documentType: p.type,
        fellBack: p.fellBack,
        record: (batchId: string) => this.keys.seal(batchId, plain),
      });
    }
    const now = this.opts.clock.now();
    const result = await this.store.append({
      loanId: input.loanId,
      releaseMarker: input.releaseMarker,
      documentCount: input.documents.length,
      now,
      layout: layout.source,
      mode: this.opts.mode,
      maxDocuments: this.opts.maxDocuments,
      openBatch: (at) => {
        if (this.opts.mode === 'loan')
          return { cutoffAt: null, day: batchDay(at + 1, this.opts.rule.timeZone) };
        const cutoffAt = nextCutoff(at, this.opts.rule);
        return { cutoffAt, day: batchDay(cutoffAt, this.opts.rule.timeZone) };
      },
      docs: staged,
      ...(reexport ? { reexport: { by: reexport.by, reason: reexport.reason } } : {}),
    });
    for (const id of result.frozen) {
      if (this.opts.mode === 'loan' && id === result.batchId) await this.writeBatch(id);
      else
        await this.writeBatch(id).catch((err: unknown) => {
          log.error(
            { err, batchId: id },
            'writing an imaging batch past its cut-off failed; the seal job retries it',
          );
        });
    }
    await this.finishLoan(input.loanId);
    if (result.added.length > 0)
      log.info(
        { batchId: result.batchId, documents: result.added.length, skipped: result.skipped.length },
        reexport ? 'documents re-exported to imaging' : 'documents exported to imaging',
      );
    return { batchId: result.batchId, exported: result.added, skipped: result.skipped, reviews };
  }

  /**
   * mode loan: the loan's batches a crash or a failed write (a full disk) left frozen but not
   * published, written now. The ack of a loan waits for its folder, so a retry after the export
   * committed still finds it unwritten and writes it before acknowledging.
   */
  async finishLoan(loanId: string): Promise<void> {
    if (this.opts.mode !== 'loan') return;
    for (const id of await this.store.unfinishedOfLoan(loanId)) await this.writeBatch(id);
  }

  private get spoolDir(): string {
    return join(this.opts.stagingDir, SPOOL_DIR);
  }

  /**
   * The core's document fetcher, teeing each document's bytes into the imaging spool (a file per
   * document id in the staging directory), so the export that follows the core write takes the
   * same bytes instead of downloading the document a second time. The spool never fails the core:
   * a spool that cannot be written (a full disk) is dropped and the export downloads as before.
   */
  spoolingFetcher(inner: DocumentFetcher): DocumentFetcher {
    return async (doc, sink, signal) => {
      const dir = this.spoolDir;
      let spool: WriteStream | null = null;
      let broken = false;
      const tmp = join(dir, `${TEMP_PREFIX}${uniqueSuffix()}`);
      try {
        await mkdir(dir, { recursive: true, mode: DIR_MODE });
        spool = createWriteStream(tmp, { mode: 0o640 });
        spool.on('error', () => (broken = true));
      } catch {
        spool = null;
      }
      const tee = new Writable({
        write(chunk: Buffer, _enc, cb) {
          if (spool !== null && !broken) spool.write(chunk);
          if (sink.write(chunk)) return cb();
          afterDrain(sink, cb);
        },
        final(cb) {
          sink.end();
          // As the fetcher does with the core's own sink (src/core/documents.ts): ended and flushed.
          finished(sink).then(() => cb(), cb);
        },
        destroy(err, cb) {
          if (err) sink.destroy(err);
          cb(err);
        },
      });
      const got = await inner(doc, tee, signal).catch(async (err: unknown) => {
        spool?.destroy();
        await rm(tmp, { force: true });
        throw err;
      });
      if (spool === null) return got;
      try {
        spool.end();
        await finished(spool);
        if (broken) throw new Error('spool write failed');
        await fsyncPath(tmp);
        if ((await stat(tmp)).size !== got.bytes) throw new Error('spool incomplete');
        await rename(tmp, join(dir, safeId(doc.id)));
      } catch {
        await rm(tmp, { force: true });
      }
      return got;
    };
  }

  /** A document the core write spooled (spoolingFetcher) moved into staging; null when none is there. */
  private async fromSpool(doc: PlatformDocument, loanDir: string, path: string) {
    const spooled = join(this.spoolDir, safeId(doc.id));
    if (!(await exists(spooled))) return null;
    return fsStep('staging a spooled document', async () => {
      await rename(spooled, path);
      await fsyncDir(loanDir);
      return sha256File(path);
    });
  }

  /** Spooled documents no export took (a loan quarantined after its core write): removed after a day. */
  private async sweepSpool(): Promise<void> {
    const dir = this.spoolDir;
    await sweepTempFiles(dir).catch(() => []);
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      return;
    }
    const before = this.opts.clock.now() - SPOOL_KEEP_MS;
    for (const n of names) {
      const p = join(dir, n);
      const st = await stat(p).catch(() => null);
      if (st !== null && st.isFile() && st.mtimeMs < before) await rm(p, { force: true });
    }
  }

  /** Fetches a document into staging: temp file, fsync, rename; its sha256 and size. */
  private async stage(
    doc: PlatformDocument,
    loanDir: string,
    path: string,
    signal?: AbortSignal,
  ): Promise<{ sha256: string; bytes: number }> {
    await fsStep('staging directory', () => mkdir(loanDir, { recursive: true, mode: DIR_MODE }));
    const spooled = await this.fromSpool(doc, loanDir, path);
    if (spooled !== null) return spooled;
    const tmp = join(loanDir, `${TEMP_PREFIX}${uniqueSuffix()}`);
    const sink = createWriteStream(tmp, { mode: 0o640 });
    try {
      const got = await this.opts.fetchDocument(doc, sink, signal);
      if (!sink.writableFinished) {
        sink.end();
        await finished(sink);
      }
      // The checksum of the bytes on disk (what the batch copies and the manifest states), not the fetch's word.
      const onDisk = await fsStep('staging a document', async () => {
        await fsyncPath(tmp);
        const sum = await sha256File(tmp);
        await rename(tmp, path);
        await fsyncDir(loanDir);
        return sum;
      });
      if (onDisk.bytes !== got.bytes)
        throw new Error(`imaging: document ${doc.id}: ${got.bytes} bytes fetched, ${onDisk.bytes} on disk`);
      return onDisk;
    } catch (err) {
      sink.destroy();
      await rm(tmp, { force: true });
      throw err;
    }
  }

  /** Freezes the open batch past its cut-off and writes every frozen batch a crash or a failure left. */
  async sealDue(): Promise<string[]> {
    await this.sweepSpool();
    const due = await this.store.freezeDue(this.opts.clock.now());
    const done: string[] = [];
    for (const b of await this.store.unfinished()) {
      await this.writeBatch(b.id);
      done.push(b.id);
    }
    if (due !== undefined && !done.includes(due)) done.push(due);
    return done;
  }

  /** An early seal by ops (who and why are kept on the batch). */
  async sealNow(reason: string, by: string): Promise<string | undefined> {
    const id = await this.store.freezeOpen(this.opts.clock.now(), `ops: ${reason}`, by);
    if (id !== undefined) await this.writeBatch(id);
    return id;
  }

  /** At start: finishes the batches a crash left frozen or publishing. */
  async recover(): Promise<void> {
    for (const b of await this.store.unfinished()) {
      this.opts.logger.warn(
        { batchId: b.id, status: b.status },
        'finishing an imaging batch a crash interrupted',
      );
      await this.writeBatch(b.id);
    }
    for (const id of this.keys.batchesWithKeys()) {
      if ((await this.store.get(id))?.status === 'sealed') this.keys.destroy(id);
    }
  }

  /** Batch writes are serialised in the process; across processes the status transitions decide. */
  writeBatch(id: string): Promise<void> {
    const run = this.writing.then(() => fsStep(`batch ${id}`, () => this.writeBatchNow(id)));
    this.writing = run.catch(() => undefined);
    return run;
  }

  private layoutOf(batch: ImagingBatchRow): ImagingLayout {
    const current = this.opts.layout();
    if (batch.layout === current.source) return current;
    // The batch was opened in another layout (a reload since): its own text, with today's lookup file.
    const r = compileImagingLayout(current.file, batch.layout, () => undefined);
    if (r.layout === undefined)
      throw new Error(
        `imaging batch ${batch.id}: its stored layout does not compile: ${r.problems[0]?.message ?? ''}`,
      );
    return r.layout;
  }

  private async writeBatchNow(id: string): Promise<void> {
    let batch = await this.store.get(id);
    if (batch === undefined || batch.status === 'open') return;
    const dir = this.batchDir(id);
    const docs = await this.store.documentsOf(id);
    if (batch.status === 'sealing') {
      // Not recursive: a missing imaging.dir (an unmounted share) is an error the loan waits on, never
      // a local folder created where the share should be (the daemon creates imaging.dir at start).
      await mkdir(dir, { mode: DIR_MODE }).catch((err: unknown) => {
        if (fsCode(err) !== 'EEXIST') throw err;
      });
      await sweepTempFiles(dir);
      const layout = this.layoutOf(batch);
      const names = new Set<string>();
      for (const d of docs) {
        names.add(d.fileName);
        await this.placeFile(dir, d);
      }
      const index = renderIndex(
        layout,
        id,
        docs.map((d) => this.indexDocument(id, d)),
      );
      await writeFileAtomic(join(dir, layout.indexFile), index);
      const manifest =
        docs.map((d) => `${d.sha256}  ${d.fileName}\n`).join('') +
        `${createHash('sha256').update(index).digest('hex')}  ${layout.indexFile}\n`;
      await writeFileAtomic(join(dir, MANIFEST_FILE), manifest);
      // Nothing else belongs in a batch folder (a document file a crash left that is not in its rows).
      for (const name of await readdir(dir)) {
        if (
          !names.has(name) &&
          name !== layout.indexFile &&
          name !== MANIFEST_FILE &&
          // A marker here is another writer's (it published the same folder meanwhile): never removed.
          name !== this.opts.readyFile &&
          !name.startsWith(TEMP_PREFIX)
        )
          await rm(join(dir, name), { force: true });
      }
      await fsyncDir(dir);
      if (!(await this.store.markPublishing(id))) {
        // Another writer (a replica, a command) published it meanwhile: the marker is its to write.
        // Had the importer already taken that folder, what this call wrote is a folder without a
        // marker: removed once the batch is sealed, never given a marker (never imported twice).
        const now = await this.store.get(id);
        if (now?.status === 'sealed' && !(await exists(join(dir, this.opts.readyFile))))
          await rm(dir, { recursive: true, force: true });
        return;
      }
      batch = await this.store.get(id);
      if (batch === undefined) return;
    }
    if (batch.status === 'publishing') {
      const marker = join(dir, this.opts.readyFile);
      if (!(await exists(marker))) {
        if (await exists(join(dir, MANIFEST_FILE))) {
          // A crash while the marker was being written leaves its temp file: never in a folder the importer takes.
          await sweepTempFiles(dir);
          await writeFileAtomic(marker, `${id}\n`);
        } else
          this.opts.logger.warn(
            { batchId: id },
            'imaging batch folder already taken by the importer before its seal was recorded; not written again',
          );
      }
      const sealedNow = await this.store.markSealed(id, this.opts.clock.now());
      if (sealedNow)
        this.opts.logger.info(
          { batchId: id, documents: docs.length, loans: new Set(docs.map((d) => d.loanId)).size },
          'imaging batch ready for the importer',
        );
    }
    this.keys.destroy(id);
    for (const d of docs) await rm(d.stagedPath, { force: true });
  }

  private indexDocument(batchId: string, d: ImagingDocumentRow): IndexDocument {
    const values =
      d.record === '' ? [] : (JSON.parse(this.keys.open(batchId, d.record)) as Array<string | null>);
    return { values, fileName: d.fileName, sha256: d.sha256, bytes: d.bytes };
  }

  /** A document into its batch folder (temp + fsync + rename), unless it is there already with its sha256. */
  private async placeFile(dir: string, d: ImagingDocumentRow): Promise<void> {
    const target = join(dir, d.fileName);
    if (await exists(target)) {
      const have = await sha256File(target);
      if (have.sha256 === d.sha256) return;
    }
    if (!(await exists(d.stagedPath)))
      throw new Error(
        `imaging batch ${d.batchId}: document ${d.documentId}'s staged file ${d.stagedPath} is missing; ` +
          `\`imaging reexport --loan ${d.loanId}\` exports it again`,
      );
    const tmp = join(dir, `${TEMP_PREFIX}${uniqueSuffix()}`);
    try {
      await copyFile(d.stagedPath, tmp);
      await fsyncPath(tmp);
      const got = await sha256File(tmp);
      if (got.sha256 !== d.sha256)
        throw new Error(
          `imaging batch ${d.batchId}: staged document ${d.documentId} changed on disk (sha256 differs)`,
        );
      await rename(tmp, target);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }
}
