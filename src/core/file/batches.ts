import { createHash } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import { mkdir, readdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { BatchSummary } from '../port.js';
import type { Clock } from '../../lib/clock.js';
import { csvRecord } from '../../lib/csv.js';
import type { Logger } from '../../lib/logger.js';
import { compileLayout, CONTROL_FILE, type Layout } from './layout/layout.js';
import {
  concatBytes,
  encodeLine,
  headerRowLine,
  renderLoanRows,
  summaryLine,
  type BatchSummary as FileSummary,
  type RenderedRows,
  type RowKind,
} from './layout/render.js';
import type { MappedRecord } from '../../contract/records.js';
import type { FileBatchStore, AppendResult, FileBatchRow, RenderedLoan } from './batch-store.js';
import {
  DIR_MODE,
  FILE_MODE,
  exists,
  fsyncPath,
  sweepTempFiles,
  writeFileAtomic,
  writeFilesAtomic,
} from '../durable-fs.js';
import { BatchKeys } from './batch-keys.js';
import { batchDay, nextCutoff, type CutoffRule } from './cutoff.js';

/**
 * Sealed batches for a core's import job: `batches/<id>/` holds one file per declared layout file,
 * `control.csv` (counts, totals, sha256 per file) and, last, the trigger file the job waits for.
 *
 * Why rows live in the state database and files are written once at the seal: a board then costs one
 * transaction whatever the batch already holds (no file is re-read or regenerated), the open
 * batch is invisible to the import job (it has no trigger file yet), and a sealed batch's bytes are
 * a pure function of its frozen rows, so a seal a crash interrupted is simply written again.
 *
 * Steps of a seal: (1) open → sealing in one transaction (from then on boards go to a new batch,
 * so the frozen rows never change); (2) data files, each temp + fsync + rename; (3) control.csv;
 * (4) the trigger file; (5) sealing → sealed. A crash before (4) redoes (2)–(4) with identical
 * bytes; after (4) only (5) is left, and the files are not touched again. (6) The batch's key is
 * deleted: its rows are stored encrypted with it (batch-keys.ts), never in clear, because they
 * carry full tax ids and a database keeps what it once held in its WAL and backups.
 */
export interface FileBatchesOptions {
  root: string;
  /** The batches' rows in the state database (built by the composition root). */
  store: FileBatchStore;
  /**
   * The layout of the mapping set in use, asked at each board (a reload may change it). A batch
   * keeps the layout it was opened in and is sealed in it; a board in another layout seals it first.
   */
  layout: () => Layout;
  rule: CutoffRule;
  triggerFile: string;
  logger: Logger;
  clock: Clock;
}

export interface StoredRows {
  [file: string]: { lines: string[]; amounts: Record<string, string> };
}

/**
 * A loan's rows rendered by `FileBatches.check`, ready for `append` (the layout they were rendered in travels
 * with them).
 */
export interface PreparedBoard {
  readonly loanId: string;
  /** The layout.yaml text the rows are in. */
  readonly layout: string;
  /** File name → rows, for each kind of board (a file the loan has no record for is absent). */
  readonly rows: Readonly<Record<RowKind, Record<string, RenderedRows>>>;
  readonly recordCount: Readonly<Record<RowKind, number>>;
}

export class FileBatches {
  readonly store: FileBatchStore;
  /** The open batches' keys (the rows in the state database are encrypted with them). */
  readonly keys: BatchKeys;
  private sealing: Promise<unknown> = Promise.resolve();
  /** A seal whose WAL truncation a reader blocked: retried by the next sealDue. */
  private scrubPending = false;

  constructor(private readonly opts: FileBatchesOptions) {
    this.store = opts.store;
    this.keys = new BatchKeys(join(dirname(opts.root), '.batch-keys'));
  }

  batchDir(id: string): string {
    if (!/^\d{4}-\d{2}-\d{2}-\d{3,}$/.test(id)) throw new Error(`invalid batch id ${JSON.stringify(id)}`);
    return join(this.opts.root, id);
  }

  /** Batches newest first with their counts, totals and (sealed) files: the ops console's batches page. */
  async summaries(limit: number): Promise<BatchSummary[]> {
    const out: BatchSummary[] = [];
    for (const b of await this.store.list(limit)) {
      const counts = await this.store.counts(b.id);
      const files: Array<{ name: string; bytes: number }> = [];
      if (b.status !== 'open') {
        const dir = this.batchDir(b.id);
        const names = await readdir(dir).catch(() => [] as string[]);
        for (const name of names.sort()) {
          if (name.startsWith('.')) continue;
          const st = await stat(join(dir, name)).catch(() => null);
          if (st?.isFile()) files.push({ name, bytes: st.size });
        }
      }
      out.push({
        id: b.id,
        status: b.status,
        openedAt: b.openedAt,
        cutoffAt: b.cutoffAt,
        sealedAt: b.sealedAt,
        sealReason: b.sealReason,
        sealedBy: b.sealedBy,
        loanCount: counts.loans,
        corrections: counts.corrections,
        recordCount: counts.records,
        principalCents: b.principalCents ?? (await this.store.principalOf(b.id)),
        files,
      });
    }
    return out;
  }

  /**
   * Renders a loan's records in the layout in use, once, for both kinds of board (a first board, a
   * correction of a loan in a sealed batch: the store decides which inside its transaction). Throws
   * LayoutRenderError when a record does not fit the layout (a value too wide, a character the
   * encoding lacks), before anything is written. What it returns is what `append` stores.
   */
  check(loanId: string, records: readonly MappedRecord[]): PreparedBoard {
    const layout = this.opts.layout();
    const byKind: Record<RowKind, Record<string, RenderedRows>> = { new: {}, correction: {} };
    const recordCount: Record<RowKind, number> = { new: 0, correction: 0 };
    for (const f of layout.files) {
      const r = renderLoanRows(f, records, { loanId, timeZone: this.opts.rule.timeZone });
      for (const kind of ['new', 'correction'] as const) {
        if (r[kind].lines.length > 0) byKind[kind][f.name] = r[kind];
        recordCount[kind] += r[kind].lines.length;
      }
    }
    return { loanId, layout: layout.source, rows: byKind, recordCount };
  }

  /**
   * Puts a board `check` rendered into the open batch (nothing is rendered again here, and it goes
   * in the layout it was rendered in); seals a batch this board found past its cut-off.
   */
  async append(board: PreparedBoard, principalCents: string | null): Promise<AppendResult> {
    const now = this.opts.clock.now();
    const render = (kind: RowKind, batchId: string): RenderedLoan => {
      const plain = JSON.stringify(board.rows[kind]);
      return {
        digest: this.keys.digest(batchId, `${principalCents ?? ''}\u0000${plain}`),
        rowsJson: this.keys.seal(batchId, plain),
        recordCount: board.recordCount[kind],
      };
    };
    const result = await this.store.append({
      loanId: board.loanId,
      principalCents,
      now,
      layout: board.layout,
      openBatch: (at) => {
        const cutoffAt = nextCutoff(at, this.opts.rule);
        return { cutoffAt, day: batchDay(cutoffAt, this.opts.rule.timeZone) };
      },
      render,
    });
    // Once the loan's rows (and the freeze) are committed — with the board's `written` state when
    // the append ran inside it — the frozen batches' files are written: a seal that fails here is
    // finished by the cut-off job or the next start (recover), never held against this loan.
    if (result.frozen.length > 0) {
      await this.store.afterCommit(async () => {
        for (const id of result.frozen) {
          await this.writeSealed(id).catch((err: unknown) => {
            this.opts.logger.error(
              { err, batchId: id },
              'sealing a batch past its cut-off failed; the seal job retries it',
            );
          });
        }
      });
    }
    return result;
  }

  /**
   * Truncates the WAL after a seal; retried by the next seal job run when a reader held it, or a
   * transaction of this process was open on the connection (a board's step: sqlite/db.ts truncateWal).
   */
  private scrub(batchId: string | null): void {
    const r = this.store.scrubAfterSeal();
    this.scrubPending = !r.done;
    if (!r.done) {
      this.opts.logger.warn(
        { batchId },
        'the state database WAL could not be truncated after the ' +
          'seal (a reader or an open transaction held it); retried at the next seal job run',
      );
    }
  }

  /** Seals the open batch when its cut-off has passed, and finishes seals a crash interrupted. */
  async sealDue(): Promise<string[]> {
    if (this.scrubPending) this.scrub(null);
    const id = await this.store.freezeDue(this.opts.clock.now());
    const done: string[] = [];
    for (const b of await this.store.sealing()) {
      await this.writeSealed(b.id);
      done.push(b.id);
    }
    if (id !== undefined && !done.includes(id)) done.push(id);
    return done;
  }

  /** An early seal by ops (audited: who and why are kept on the batch). */
  async sealNow(reason: string, by: string, id?: string): Promise<string | undefined> {
    const frozen = await this.store.freezeOpen(this.opts.clock.now(), `ops: ${reason}`, by, id);
    if (frozen !== undefined) {
      this.opts.logger.warn({ batchId: frozen, by, reason }, 'batch sealed early by ops');
      await this.writeSealed(frozen);
    }
    return frozen;
  }

  /**
   * Completes every frozen batch whose files a crash may have left incomplete, and deletes the keys of sealed
   * batches a crash left.
   */
  async recover(): Promise<void> {
    // Its own transactions, never a board's step it was called from: `sealed` must be committed
    // before the key goes (a step rolled back after it lost a batch's key for good).
    const run = async (): Promise<void> => {
      for (const b of await this.store.sealing()) {
        this.opts.logger.warn({ batchId: b.id }, 'finishing the seal of a batch a crash interrupted');
        await this.writeSealed(b.id);
      }
      // Only sealed batches: a key without a batch row may belong to a batch another replica is creating now.
      for (const id of this.keys.batchesWithKeys()) {
        if ((await this.store.get(id))?.status === 'sealed') this.keys.destroy(id);
      }
    };
    await (this.store.outside ? this.store.outside(run) : run());
  }

  /** A stored row's lines, decrypted with its batch's key. */
  rowsOf(batchId: string, rowsJson: string): StoredRows {
    return JSON.parse(this.keys.open(batchId, rowsJson)) as StoredRows;
  }

  hasLoan(loanId: string): Promise<boolean> {
    return this.store.hasLoan(loanId);
  }

  async triggerPresent(id: string): Promise<boolean> {
    return exists(join(this.batchDir(id), this.opts.triggerFile));
  }

  /** Seals are serialised in the process; across processes the status transition decides. */
  private writeSealed(id: string): Promise<void> {
    const run = this.sealing.then(() => this.writeSealedNow(id));
    this.sealing = run.catch(() => undefined);
    return run;
  }

  private async writeSealedNow(id: string): Promise<void> {
    const batch = await this.store.get(id);
    if (batch === undefined) return;
    if (batch.status === 'sealed') {
      this.keys.destroy(id); // another process sealed it; a key may be left on this host's view
      return;
    }
    const dir = this.batchDir(id);
    const t = await this.tally(batch);
    if (!(await exists(join(dir, this.opts.triggerFile)))) {
      await mkdir(dir, { recursive: true, mode: DIR_MODE });
      // Temp files of a write a crash cut short: never renamed, never read by the job.
      const swept = await sweepTempFiles(dir);
      if (swept.length > 0)
        this.opts.logger.info(
          { batchId: id, files: swept.length },
          'removed temp files an interrupted seal left',
        );
      const control = await this.writeDataFiles(batch, t, dir);
      await writeFileAtomic(join(dir, CONTROL_FILE), control);
      await writeFileAtomic(join(dir, this.opts.triggerFile), `${id}\n`);
    }
    const recordCount = t.files.reduce((n, f) => n + f.summary.records, 0);
    const sealedNow = await this.store.markSealed(id, this.opts.clock.now(), {
      principalCents: t.principalCents,
    });
    // After the commit: a crash before this line leaves the key, swept at the next start (recover).
    // Called inside a caller's transaction, only once that commits (a rollback keeps the key).
    await this.store.afterCommit(() => Promise.resolve(this.keys.destroy(id)));
    if (sealedNow) {
      this.opts.logger.info(
        {
          batchId: id,
          loans: t.loanCount,
          corrections: t.corrections,
          records: recordCount,
          principalCents: t.principalCents,
        },
        'batch sealed',
      );
      this.scrub(id);
    }
  }

  /** The layout a batch was opened in (compiled again when the set in use has another one). */
  private layoutOf(batch: FileBatchRow): Layout {
    const current = this.opts.layout();
    if (batch.layout === current.source) return current;
    const r = compileLayout(batch.layout);
    if (r.layout === undefined)
      throw new Error(
        `batch ${batch.id}: its stored layout does not compile: ${r.problems.map((p) => p.message).join('; ')}`,
      );
    return r.layout;
  }

  /**
   * What a frozen batch adds up to (counts, totals, principal), in one pass over its rows that
   * keeps no line: the files are then streamed from the rows (streamFile), so a seal's memory does
   * not grow with the size of the batch. A pure function of the rows, like the files' bytes.
   */
  async tally(batch: FileBatchRow): Promise<BatchTally> {
    const layout = this.layoutOf(batch);
    const files = layout.files.map((f) => ({
      f,
      records: 0,
      loans: new Set<string>(),
      totals: new Map<string, bigint>(),
    }));
    let loanCount = 0;
    let corrections = 0;
    let principal = 0n;
    for await (const row of this.store.loansOf(batch.id)) {
      if (row.kind === 'new') {
        loanCount += 1;
        if (row.principalCents !== null && /^-?\d+$/.test(row.principalCents))
          principal += BigInt(row.principalCents);
      } else corrections += 1;
      const stored = this.rowsOf(batch.id, row.rowsJson);
      for (const file of files) {
        const r = stored[file.f.name];
        if (r === undefined) continue;
        file.records += r.lines.length;
        file.loans.add(row.loanId);
        for (const [k, v] of Object.entries(r.amounts))
          file.totals.set(k, (file.totals.get(k) ?? 0n) + BigInt(v));
      }
    }
    const batchDate = batchDay(batch.cutoffAt, this.opts.rule.timeZone);
    return {
      files: files.map(({ f, records, loans, totals }) => ({
        f,
        summary: {
          batchId: batch.id,
          timeZone: this.opts.rule.timeZone,
          batchDate,
          records,
          loans: loans.size,
          totals,
        },
      })),
      loanCount,
      corrections,
      principalCents: principal.toString(),
    };
  }

  /**
   * Writes one data file of a frozen batch to `path` (header, the rows' lines in board order,
   * trailer), fsynced, hashing as it goes. The rows are read and written synchronously (buffered
   * 64 KiB writes): the state database's row iterator is never held open across an await, where
   * another statement on the same connection would find it busy.
   */
  async streamFile(
    batch: FileBatchRow,
    file: BatchTally['files'][number],
    path: string,
  ): Promise<{ bytes: number; sha256: string }> {
    const { f, summary } = file;
    const hash = createHash('sha256');
    let bytes = 0;
    const fd = openSync(path, 'w', FILE_MODE);
    try {
      const buffer: Uint8Array[] = [];
      let buffered = 0;
      const flush = (): void => {
        if (buffered === 0) return;
        const chunk = concatBytes(buffer);
        for (let at = 0; at < chunk.length;) at += writeSync(fd, chunk, at);
        buffer.length = 0;
        buffered = 0;
      };
      const put = (line: string | undefined): void => {
        if (line === undefined) return;
        const encoded = encodeLine(f, line);
        hash.update(encoded);
        bytes += encoded.length;
        buffer.push(encoded);
        buffered += encoded.length;
        if (buffered >= 1 << 16) flush();
      };
      put(headerRowLine(f));
      put(summaryLine(f, 'header', summary));
      for await (const row of this.store.loansOf(batch.id)) {
        const r = this.rowsOf(batch.id, row.rowsJson)[f.name];
        if (r !== undefined) for (const line of r.lines) put(line);
      }
      put(summaryLine(f, 'trailer', summary));
      flush();
    } finally {
      closeSync(fd);
    }
    await fsyncPath(path);
    return { bytes, sha256: hash.digest('hex') };
  }

  /**
   * The data files (each a temp file, fsynced, then renamed; the folder fsynced once) and the
   * text of control.csv. Each file is replaced atomically; the set is not atomic as a whole (the
   * trigger file, written after, is what the import job waits for).
   */
  private async writeDataFiles(batch: FileBatchRow, t: BatchTally, dir: string): Promise<string> {
    // Every field escaped (RFC 4180): a record type is any text the layout gives it.
    const controlRows: string[] = [
      csvRecord(['batch_id', 'file', 'record_type', 'record_count', 'loan_count', 'bytes', 'sha256']),
    ];
    await writeFilesAtomic(
      dir,
      t.files.map(
        (file) =>
          [
            file.f.name,
            async (tmp: string) => {
              const w = await this.streamFile(batch, file, tmp);
              controlRows.push(
                csvRecord([
                  batch.id,
                  file.f.name,
                  file.f.record,
                  file.summary.records,
                  file.summary.loans,
                  w.bytes,
                  w.sha256,
                ]),
              );
            },
          ] as const,
      ),
    );
    controlRows.push(csvRecord([batch.id, '*', 'loans', t.loanCount, t.loanCount, null, null]));
    controlRows.push(csvRecord([batch.id, '*', 'corrections', t.corrections, t.corrections, null, null]));
    controlRows.push(csvRecord([batch.id, '*', 'principal_total_cents', t.principalCents, null, null, null]));
    return `${controlRows.join('\n')}\n`;
  }
}

/** A frozen batch's counts and totals, per file and overall (FileBatches.tally). */
export interface BatchTally {
  files: Array<{ f: Layout['files'][number]; summary: FileSummary }>;
  loanCount: number;
  corrections: number;
  principalCents: string;
}
