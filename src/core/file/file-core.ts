import { createHash } from 'node:crypto';
import { constants, mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { access, mkdir, opendir, readdir, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { finished } from 'node:stream/promises';
import type { Clock } from '../../lib/clock.js';
import { localDate } from '../../lib/calendar.js';
import { errorMessage } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { PlatformDocument } from '../../contract/schemas.js';
import { LayoutRenderError } from './layout/render.js';
import {
  CoreRejectedError,
  CoreUnavailableError,
  type BatchingCapability,
  type BoardingPackage,
  type CoreLoanRecord,
  type CoreReceipt,
  type CoreSystem,
  type CoreCheck,
  type CustomerDirectory,
} from '../port.js';
import { DIR_MODE, SyncedFileSink, fsyncDir, uniqueSuffix, writeFileSynced } from '../durable-fs.js';
import { documentFileName, safeId } from '../safe-name.js';
import { KeyedLock } from '../keyed-lock.js';
import type { FileBatches, PreparedBoard } from './batches.js';
import {
  MANIFEST,
  readManifest,
  readManifestSync,
  type ManifestDocument,
  type PackageManifest,
} from './manifest.js';

export interface FileCoreOptions {
  dir: string;
  /** Sealed batch files in the bank's layout (absent: packages only). */
  batches?: FileBatches | undefined;
  /** IANA zone of the bank day recorded in the manifest. */
  timeZone: string;
  logger: Logger;
  clock: Clock;
  /** The bank's customer extract (customers.extract): the core's existing customers. */
  customers?: CustomerDirectory | undefined;
}

/**
 * File-drop core: one boarding package per loan, `packages/<loan>/` with `records.json`,
 * `documents/<id>__<name>` and `manifest.json`, for a core job that imports directories.
 *
 * A package is built in `.staging/` (same file system), fsynced, then swapped in: the old package
 * is renamed into `.trash/`, the new one renamed into place, the old one deleted. At any instant
 * `packages/<loan>` is either absent, the complete old package or the complete new one. A crash
 * between the two renames leaves the old package in `.trash/`; recovery (on first use, and before
 * each board of that loan) puts it back, and removes staging leftovers. Boards are serialised
 * per loan inside the process; one process per directory.
 */
export class FileCore implements CoreSystem {
  readonly name = 'file';
  private readonly packagesDir: string;
  private readonly stagingDir: string;
  private readonly trashDir: string;
  readonly batches: FileBatches | undefined;
  readonly batching: BatchingCapability | undefined;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readied: Promise<void> | undefined;
  private readonly locks = new KeyedLock();
  readonly customers: CustomerDirectory | undefined;

  constructor(private readonly opts: FileCoreOptions) {
    this.customers = opts.customers;
    this.packagesDir = join(opts.dir, 'packages');
    this.stagingDir = join(opts.dir, '.staging');
    this.trashDir = join(opts.dir, '.trash');
    this.batches = opts.batches;
    const batches = opts.batches;
    this.batching = batches
      ? {
          sealDue: () => this.sealDue(),
          sealNow: async (reason, by, id) => {
            await this.ready();
            await batches.recover();
            return batches.sealNow(reason, by, id);
          },
          list: (limit) => batches.summaries(limit),
        }
      : undefined;
    this.clock = opts.clock;
    this.logger = opts.logger.child({ component: 'core.file' });
  }

  packageDir(loanId: string): string {
    return join(this.packagesDir, safeId(loanId));
  }

  private ready(): Promise<void> {
    this.readied ??= (async () => {
      for (const d of [this.packagesDir, this.stagingDir, this.trashDir])
        await mkdir(d, { recursive: true, mode: DIR_MODE });
      // Nothing is in progress yet: every staging directory is a crash leftover.
      for (const e of await readdir(this.stagingDir))
        await rm(join(this.stagingDir, e), { recursive: true, force: true });
      const names = new Set((await readdir(this.trashDir)).map(nameOfAside));
      for (const n of names) await this.recoverOne(n);
      await this.batches?.recover();
    })().catch((err: unknown) => {
      this.readied = undefined;
      throw err;
    });
    return this.readied;
  }

  /**
   * Restores a package a crash left aside (old renamed away, new not yet in), drops leftovers.
   * Before every board too, not only at the first: with replicas, the one that takes over may have
   * made its first use long before the leader that crashed left this loan's package aside.
   * Synchronous (durable-fs.ts says why): two directory reads that are empty nearly always.
   */
  private async recoverOne(name: string): Promise<void> {
    const aside = readdirSync(this.trashDir).filter((e) => nameOfAside(e) === name);
    const staged = readdirSync(this.stagingDir).filter((e) => nameOfAside(e) === name);
    for (const s of staged) await rm(join(this.stagingDir, s), { recursive: true, force: true });
    if (aside.length === 0) return;
    let keep: string | undefined;
    if (statSync(join(this.packagesDir, name), { throwIfNoEntry: false }) === undefined) {
      // Prefer the newest complete one (every package in .trash was live once, so all are complete).
      const withTimes = await Promise.all(
        aside.map(async (a) => ({ a, t: (await stat(join(this.trashDir, a))).mtimeMs })),
      );
      keep = withTimes.sort((x, y) => y.t - x.t)[0]?.a;
      if (keep !== undefined && (await readManifest(join(this.trashDir, keep))) !== null) {
        renameSync(join(this.trashDir, keep), join(this.packagesDir, name));
        await fsyncDir(this.packagesDir);
        this.logger.warn({ package: name }, 'restored a package a crash left aside during replacement');
      } else {
        keep = undefined;
      }
    }
    for (const a of aside) if (a !== keep) await rm(join(this.trashDir, a), { recursive: true, force: true });
  }

  async board(pkg: BoardingPackage, opts: { signal?: AbortSignal } = {}): Promise<CoreReceipt> {
    try {
      await this.ready();
    } catch (err) {
      throw new CoreUnavailableError(`file core ${this.opts.dir}: ${errorMessage(err)}`, false, {
        cause: err,
      });
    }
    const name = safeId(pkg.loanId);
    return this.locks.run(name, () => this.boardLocked(pkg, name, opts.signal));
  }

  private async boardLocked(
    pkg: BoardingPackage,
    name: string,
    signal: AbortSignal | undefined,
  ): Promise<CoreReceipt> {
    // A value the bank's layout cannot hold is the data's problem: refuse before anything is written.
    // The rows rendered here are the ones the batch stores (the board is rendered once).
    let board: PreparedBoard | undefined;
    if (this.batches) {
      try {
        board = this.batches.check(pkg.loanId, pkg.records);
      } catch (err) {
        if (err instanceof LayoutRenderError) throw new CoreRejectedError(`file layout: ${err.message}`);
        throw err;
      }
    }
    await this.recoverOne(name);
    const target = join(this.packagesDir, name);
    const previous = previousManifest(target);
    const now = new Date(this.clock.now());
    const createdAt = now.toISOString();
    const staging = join(this.stagingDir, `${name}.${uniqueSuffix()}`);
    makeStagingDir(staging);
    let manifest: PackageManifest;
    try {
      const files: PackageManifest['files'] = [];
      const documents: ManifestDocument[] = [];
      const usedNames = new Set<string>();
      for (const doc of pkg.documents) {
        signal?.throwIfAborted();
        let fileName = documentFileName(doc.id, doc.name);
        // Two records with the same id would collide; keep both, never overwrite silently.
        for (let i = 2; usedNames.has(fileName); i += 1)
          fileName = `${documentFileName(doc.id, doc.name)}.${i}`;
        usedNames.add(fileName);
        const rel = `documents/${fileName}`;
        const written = await this.writeDocument(pkg, doc, join(staging, rel), signal);
        files.push({ path: rel, sha256: written.sha256, bytes: written.bytes });
        documents.push({
          documentId: doc.id,
          name: doc.name ?? null,
          path: rel,
          sha256: written.sha256,
          bytes: written.bytes,
          contentType: written.contentType,
          category: doc.category ?? null,
          type: doc.type ?? null,
          period: doc.period ?? doc.requirement?.period ?? null,
          requirement: doc.requirement ? { ...doc.requirement } : null,
          uploadedAt: doc.uploadedAt ?? null,
        });
      }
      await fsyncDir(join(staging, 'documents'));

      const recordsText = `${JSON.stringify(
        {
          loanId: pkg.loanId,
          loanNumber: pkg.loanNumber,
          mappingVersion: pkg.mappingVersion,
          source: pkg.source,
          records: pkg.records,
          documents,
        },
        null,
        2,
      )}\n`;
      await writeFileSynced(join(staging, 'records.json'), recordsText);
      files.push({ path: 'records.json', ...hashText(recordsText) });

      manifest = {
        formatVersion: 1,
        loanId: pkg.loanId,
        loanNumber: pkg.loanNumber,
        mappingVersion: pkg.mappingVersion,
        connectorVersion: pkg.connectorVersion,
        createdAt,
        firstBoardedAt: previous?.firstBoardedAt ?? createdAt,
        batchDate: previous?.batchDate ?? localDate(now.getTime(), this.opts.timeZone),
        source: pkg.source,
        records: pkg.records.map((r) => ({ type: r.type, externalId: r.externalId })),
        documents,
        files,
      };
      // The manifest is written last: a package with a manifest is a complete package.
      await writeFileSynced(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
      await fsyncDir(staging);
      signal?.throwIfAborted();
      await this.swapIn(staging, target, name);
    } catch (err) {
      await rm(staging, { recursive: true, force: true }).catch(() => undefined);
      if (isFsError(err))
        throw new CoreUnavailableError(`file core: ${errorMessage(err)}`, false, { cause: err });
      throw err;
    }

    let batchId: string | undefined;
    if (this.batches && board !== undefined) {
      try {
        const principal = typeof pkg.source.centsAmount === 'number' ? String(pkg.source.centsAmount) : null;
        const r = await this.batches.append(board, principal);
        batchId = r.batchId;
        if (r.kind === 'correction')
          this.logger.info(
            { loanId: pkg.loanId, batchId: r.batchId },
            'loan already in a sealed batch: correction record in the open batch',
          );
      } catch (err) {
        if (err instanceof LayoutRenderError) throw new CoreRejectedError(`file layout: ${err.message}`);
        // The package is in place; boarding again puts the rows in (findLoan reports the board incomplete meanwhile).
        throw new CoreUnavailableError(`file core: batch: ${errorMessage(err)}`, false, { cause: err });
      }
    }
    this.logger.info(
      {
        loanId: pkg.loanId,
        package: name,
        documents: manifest.documents.length,
        replaced: previous !== null,
        batchId,
      },
      'package written',
    );
    return {
      coreReference: `packages/${name}`,
      loanExternalId: pkg.loanId,
      mappingVersion: pkg.mappingVersion,
      records: pkg.records.map((r, i) => ({
        type: r.type,
        externalId: r.externalId,
        coreId: `packages/${name}/records.json#${i}`,
      })),
      documents: manifest.documents.map((d) => ({
        documentId: d.documentId,
        sha256: d.sha256,
        bytes: d.bytes,
        coreId: `packages/${name}/${d.path}`,
      })),
      boardedAt: createdAt,
    };
  }

  private async swapIn(staging: string, target: string, name: string): Promise<void> {
    let aside: string | null = join(this.trashDir, `${name}.${uniqueSuffix()}`);
    try {
      renameSync(target, aside);
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err;
      aside = null; // a first board: nothing to move aside
    }
    renameSync(staging, target);
    await fsyncDir(this.packagesDir);
    await fsyncDir(this.stagingDir);
    if (aside !== null) {
      await fsyncDir(this.trashDir);
      await rm(aside, { recursive: true, force: true });
    }
  }

  /**
   * Streams one document into `path` (a new file), hashing what is written; the fetcher ends the
   * sink, whose end fsyncs the file.
   */
  private async writeDocument(
    pkg: BoardingPackage,
    doc: PlatformDocument,
    path: string,
    signal: AbortSignal | undefined,
  ): Promise<{ sha256: string; bytes: number; contentType: string | null }> {
    const file = new SyncedFileSink(path);
    try {
      const res = await pkg.fetchDocument(doc, file, signal);
      if (!file.writableEnded) file.end();
      await finished(file);
      const sha256 = file.sha256();
      if (res.sha256 !== sha256 || res.bytes !== file.bytes) {
        throw new CoreUnavailableError(
          `document ${doc.id}: the fetcher reported ${res.bytes} bytes sha256 ` +
            `${res.sha256}, the file got ${file.bytes} bytes sha256 ${sha256}`,
          false,
        );
      }
      return { sha256, bytes: file.bytes, contentType: res.contentType };
    } finally {
      file.destroy();
    }
  }

  async findLoan(loanExternalId: string): Promise<CoreLoanRecord | null> {
    await this.ready();
    const name = safeId(loanExternalId);
    const manifest = await readManifest(join(this.packagesDir, name));
    if (manifest === null || manifest.loanId !== loanExternalId) return null;
    const record = toLoanRecord(name, manifest);
    // The package swaps in before its batch row is written: without the row the board is partial.
    if (this.batches && !(await this.batches.hasLoan(loanExternalId))) record.complete = false;
    return record;
  }

  async *listLoans(): AsyncIterable<CoreLoanRecord> {
    await this.ready();
    const dir = await opendir(this.packagesDir);
    for await (const e of dir) {
      if (!e.isDirectory()) continue;
      try {
        const m = await readManifest(join(this.packagesDir, e.name));
        if (m !== null) yield toLoanRecord(e.name, m);
      } catch (err) {
        this.logger.warn({ package: e.name, err }, 'unreadable package manifest skipped');
      }
    }
  }

  /**
   * The directories the core writes can be written, without creating or touching anything (a
   * running daemon may be mid-write in them): an existing directory must be writable, a missing
   * one must be creatable in its nearest existing parent.
   */
  async checkConnection(): Promise<CoreCheck[]> {
    const dirs = [
      this.opts.dir,
      this.packagesDir,
      this.stagingDir,
      ...(this.batches ? [join(this.opts.dir, 'batches')] : []),
    ];
    const problems: string[] = [];
    const toCreate: string[] = [];
    for (const d of dirs) {
      const r = await writableOrCreatable(d);
      if (r.state === 'creatable') toCreate.push(d);
      else if (r.state === 'problem') problems.push(r.detail);
    }
    if (problems.length > 0)
      return [{ name: 'core', status: 'fail', detail: `file core: ${problems.join('; ')} (core.file.dir)` }];
    const what = this.batches ? 'packages and batches' : 'packages';
    const detail = toCreate.includes(this.opts.dir)
      ? `file core: ${this.opts.dir} does not exist yet; its parent is writable, the first board creates it (${what})`
      : `file core: ${this.opts.dir} writable ` +
        `(${what})${toCreate.length > 0 ? `; created on first board: ${toCreate.join(', ')}` : ''}`;
    return [{ name: 'core', status: 'ok', detail }];
  }

  async health(): Promise<{ ok: boolean; detail?: string }> {
    try {
      await this.ready();
      await access(this.packagesDir, constants.W_OK);
      return { ok: true, detail: this.opts.dir };
    } catch (err) {
      return { ok: false, detail: `${this.opts.dir}: ${errorMessage(err)}` };
    }
  }

  /** Seals the open batch when its cut-off has passed (the daemon calls this every minute). */
  async sealDue(): Promise<string[]> {
    await this.ready();
    return this.batches ? this.batches.sealDue() : [];
  }

  async close(): Promise<void> {
    await this.locks.idle();
  }
}

type DirState = { state: 'ok' | 'creatable' } | { state: 'problem'; detail: string };

/** ok (a writable directory), creatable (missing, its nearest existing parent is writable), or why not. */
async function writableOrCreatable(dir: string): Promise<DirState> {
  let st;
  try {
    st = await stat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      return { state: 'problem', detail: `${dir}: ${errorMessage(err)}` };
    const parent = dirname(dir);
    if (parent === dir) return { state: 'problem', detail: `${dir}: does not exist` };
    const p = await writableOrCreatable(parent);
    return p.state === 'problem' ? p : { state: 'creatable' };
  }
  if (!st.isDirectory()) return { state: 'problem', detail: `${dir}: not a directory` };
  try {
    await access(dir, constants.W_OK | constants.X_OK);
    return { state: 'ok' };
  } catch {
    return { state: 'problem', detail: `${dir}: not writable by this user` };
  }
}

function toLoanRecord(name: string, m: PackageManifest): CoreLoanRecord {
  return {
    coreReference: `packages/${name}`,
    loanExternalId: m.loanId,
    mappingVersion: m.mappingVersion,
    fields: m.source,
  };
}

/** `<name>.<suffix>` → `<name>` (the suffix never contains a dot; names may). */
function nameOfAside(entry: string): string {
  const i = entry.lastIndexOf('.');
  return i > 0 ? entry.slice(0, i) : entry;
}

/**
 * `<staging>/documents`: two plain mkdirs, as .staging exists since ready() (a recursive one first
 * tries the deepest directory and fails); recursive when .staging was removed under a running process.
 */
function makeStagingDir(staging: string): void {
  try {
    mkdirSync(staging, { mode: DIR_MODE });
  } catch (err) {
    if ((err as { code?: string }).code !== 'ENOENT') throw err;
    mkdirSync(staging, { recursive: true, mode: DIR_MODE });
  }
  mkdirSync(join(staging, 'documents'), { mode: DIR_MODE });
}

/** The package a board replaces, if it has a readable manifest (an unreadable one is replaced). */
function previousManifest(target: string): PackageManifest | null {
  try {
    return readManifestSync(target);
  } catch {
    return null;
  }
}

function hashText(text: string): { sha256: string; bytes: number } {
  const buf = Buffer.from(text, 'utf8');
  return { sha256: createHash('sha256').update(buf).digest('hex'), bytes: buf.length };
}

function isFsError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code) && !(err instanceof CoreUnavailableError);
}
