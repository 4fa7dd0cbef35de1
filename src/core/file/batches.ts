import { createHash } from 'node:crypto';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { BatchSummary } from '../port.js';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { compileLayout, CONTROL_FILE, type Layout } from '../../mapping/layout.js';
import { concatBytes, encodeLine, headerRowLine, renderRows, summaryLine, type RenderedRows } from '../../mapping/layout-render.js';
import type { MappedRecord } from '../../mapping/types.js';
import type { FileBatchStore, AppendResult, FileBatchRow } from '../../store/file-batches.js';
import { DIR_MODE, exists, writeFileAtomic, writeFilesAtomic } from '../durable-fs.js';
import { batchDay, nextCutoff, type CutoffRule } from './cutoff.js';

/**
 * Sealed batches for a core's import job: `batches/<id>/` holds one file per declared layout file,
 * `control.csv` (counts, totals, sha256 per file) and, last, the trigger file the job waits for.
 *
 * Why rows live in SQLite and files are written once at the seal: a board then costs one
 * transaction whatever the batch already holds (no file is re-read or regenerated), the open
 * batch is invisible to the import job (it has no trigger file yet), and a sealed batch's bytes are
 * a pure function of its frozen rows, so a seal a crash interrupted is simply written again.
 *
 * Steps of a seal: (1) open → sealing in one transaction (from then on boards go to a new batch,
 * so the frozen rows never change); (2) data files, each temp + fsync + rename; (3) control.csv;
 * (4) the trigger file; (5) sealing → sealed. A crash before (4) redoes (2)–(4) with identical
 * bytes; after (4) only (5) is left, and the files are not touched again.
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

interface StoredRows {
  [file: string]: { lines: string[]; amounts: Record<string, string> };
}

export interface SealedBatchSummary {
  id: string;
  loanCount: number;
  corrections: number;
  recordCount: number;
  principalCents: string;
  files: Array<{ name: string; records: number; bytes: number; sha256: string }>;
}

export class FileBatches {
  readonly store: FileBatchStore;
  private sealing: Promise<unknown> = Promise.resolve();
  /** A seal whose WAL truncation a reader blocked: retried by the next sealDue. */
  private scrubPending = false;

  constructor(private readonly opts: FileBatchesOptions) {
    this.store = opts.store;
  }

  batchDir(id: string): string {
    if (!/^\d{4}-\d{2}-\d{2}-\d{3,}$/.test(id)) throw new Error(`invalid batch id ${JSON.stringify(id)}`);
    return join(this.opts.root, id);
  }

  /** Batches newest first with their counts, totals and (sealed) files: the ops console's batches page. */
  async summaries(limit: number): Promise<BatchSummary[]> {
    const out: BatchSummary[] = [];
    for (const b of this.store.list(limit)) {
      const counts = this.store.counts(b.id);
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
        loanCount: b.loanCount ?? counts.loans,
        corrections: counts.corrections,
        recordCount: b.recordCount ?? counts.records,
        principalCents: b.principalCents ?? this.store.principalOf(b.id),
        files,
      });
    }
    return out;
  }

  /** Throws LayoutRenderError when a record does not fit the layout (a value too wide, a character the encoding lacks). */
  check(loanId: string, records: readonly MappedRecord[]): void {
    for (const f of this.opts.layout().files) renderRows(f, records, { loanId, kind: 'correction' });
  }

  /**
   * Renders the loan's records (a layout error throws before anything is stored) and puts them into
   * the open batch; seals a batch this board found past its cut-off.
   */
  async append(loanId: string, records: readonly MappedRecord[], principalCents: string | null): Promise<AppendResult> {
    const now = this.opts.clock.now();
    const layout = this.opts.layout();
    const render = (kind: 'new' | 'correction'): { digest: string; rowsJson: string; recordCount: number } => {
      const rows: Record<string, RenderedRows> = {};
      let recordCount = 0;
      for (const f of layout.files) {
        const r = renderRows(f, records, { loanId, kind });
        if (r.lines.length > 0) rows[f.name] = r;
        recordCount += r.lines.length;
      }
      const rowsJson = JSON.stringify(rows);
      return { digest: createHash('sha256').update(`${principalCents ?? ''}\u0000${rowsJson}`).digest('hex'), rowsJson, recordCount };
    };
    const result = this.store.append({
      loanId,
      principalCents,
      now,
      layout: layout.source,
      openBatch: (at) => {
        const cutoffAt = nextCutoff(at, this.opts.rule);
        return { cutoffAt, day: batchDay(cutoffAt, this.opts.rule.timeZone) };
      },
      render,
    });
    // The loan's rows are committed: a seal that fails here is finished by the cut-off job or the
    // next start (recover), never held against this loan.
    for (const id of result.frozen) {
      await this.writeSealed(id).catch((err: unknown) => {
        this.opts.logger.error({ err, batchId: id }, 'sealing a batch past its cut-off failed; the seal job retries it');
      });
    }
    return result;
  }

  /** Truncates the WAL after a seal; retried by the next seal job run when a reader held it. */
  private scrub(batchId: string | null): void {
    const r = this.store.scrubAfterSeal();
    this.scrubPending = !r.done;
    if (!r.done) {
      this.opts.logger.warn({ batchId }, 'the state database WAL could not be truncated after the seal (a reader held it); retried at the next seal job run');
    }
  }

  /** Seals the open batch when its cut-off has passed, and finishes seals a crash interrupted. */
  async sealDue(): Promise<string[]> {
    if (this.scrubPending) this.scrub(null);
    const id = this.store.freezeDue(this.opts.clock.now());
    const done: string[] = [];
    for (const b of this.store.sealing()) {
      await this.writeSealed(b.id);
      done.push(b.id);
    }
    if (id !== undefined && !done.includes(id)) done.push(id);
    return done;
  }

  /** An early seal by ops (audited: who and why are kept on the batch). */
  async sealNow(reason: string, by: string, id?: string): Promise<string | undefined> {
    const frozen = this.store.freezeOpen(this.opts.clock.now(), `ops: ${reason}`, by, id);
    if (frozen !== undefined) {
      this.opts.logger.warn({ batchId: frozen, by, reason }, 'batch sealed early by ops');
      await this.writeSealed(frozen);
    }
    return frozen;
  }

  /** Completes every frozen batch whose files a crash may have left incomplete. */
  async recover(): Promise<void> {
    for (const b of this.store.sealing()) {
      this.opts.logger.warn({ batchId: b.id }, 'finishing the seal of a batch a crash interrupted');
      await this.writeSealed(b.id);
    }
  }

  hasLoan(loanId: string): boolean {
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
    const batch = this.store.get(id);
    if (batch === undefined || batch.status === 'sealed') return;
    const dir = this.batchDir(id);
    const summary = this.build(batch);
    if (!(await exists(join(dir, this.opts.triggerFile)))) {
      await mkdir(dir, { recursive: true, mode: DIR_MODE });
      // Temp files of a write a crash cut short: never renamed, never read by the job.
      for (const f of await readdir(dir)) if (f.startsWith('.tmp-') && !ownedByLiveProcess(f)) await rm(join(dir, f), { force: true });
      await writeFilesAtomic(dir, summary.outputs);
      await writeFileAtomic(join(dir, CONTROL_FILE), summary.control);
      await writeFileAtomic(join(dir, this.opts.triggerFile), `${id}\n`);
    }
    const s = summary.summary;
    if (this.store.markSealed(id, this.opts.clock.now(), { loanCount: s.loanCount, recordCount: s.recordCount, principalCents: s.principalCents })) {
      this.opts.logger.info({ batchId: id, loans: s.loanCount, corrections: s.corrections, records: s.recordCount, principalCents: s.principalCents }, 'batch sealed');
      this.scrub(id);
    }
  }

  /** The layout a batch was opened in (compiled again when the set in use has another one). */
  private layoutOf(batch: FileBatchRow): Layout {
    const current = this.opts.layout();
    if (batch.layout === current.source) return current;
    const r = compileLayout(batch.layout);
    if (r.layout === undefined) throw new Error(`batch ${batch.id}: its stored layout does not compile: ${r.problems.map((p) => p.message).join('; ')}`);
    return r.layout;
  }

  /** The bytes of a frozen batch: a pure function of its rows, so a redo writes the same files. */
  build(batch: FileBatchRow): { outputs: Array<[string, Uint8Array]>; control: string; summary: SealedBatchSummary } {
    const files = this.layoutOf(batch).files.map((f) => ({ f, lines: [] as string[], loans: new Set<string>(), totals: new Map<string, bigint>() }));
    let loanCount = 0;
    let corrections = 0;
    let principal = 0n;
    for (const row of this.store.loansOf(batch.id)) {
      if (row.kind === 'new') {
        loanCount += 1;
        if (row.principalCents !== null && /^-?\d+$/.test(row.principalCents)) principal += BigInt(row.principalCents);
      } else corrections += 1;
      const stored = JSON.parse(row.rowsJson) as StoredRows;
      for (const file of files) {
        const r = stored[file.f.name];
        if (r === undefined) continue;
        file.lines.push(...r.lines);
        file.loans.add(row.loanId);
        for (const [k, v] of Object.entries(r.amounts)) file.totals.set(k, (file.totals.get(k) ?? 0n) + BigInt(v));
      }
    }
    const batchDate = batchDay(batch.cutoffAt, this.opts.rule.timeZone);
    const outputs: Array<[string, Uint8Array]> = [];
    const controlRows: string[] = ['batch_id,file,record_type,record_count,loan_count,bytes,sha256'];
    const fileSummaries: SealedBatchSummary['files'] = [];
    let recordCount = 0;
    for (const { f, lines, loans, totals } of files) {
      const s = { batchId: batch.id, batchDate, records: lines.length, loans: loans.size, totals };
      const all = [headerRowLine(f), summaryLine(f, 'header', s), ...lines, summaryLine(f, 'trailer', s)].filter((l): l is string => l !== undefined);
      const bytes = concatBytes(all.map((l) => encodeLine(f, l)));
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      outputs.push([f.name, bytes]);
      controlRows.push([batch.id, f.name, f.record, lines.length, loans.size, bytes.length, sha256].join(','));
      fileSummaries.push({ name: f.name, records: lines.length, bytes: bytes.length, sha256 });
      recordCount += lines.length;
    }
    controlRows.push(`${batch.id},*,loans,${loanCount},${loanCount},,`);
    controlRows.push(`${batch.id},*,corrections,${corrections},${corrections},,`);
    controlRows.push(`${batch.id},*,principal_total_cents,${principal.toString()},,,`);
    return {
      outputs,
      control: `${controlRows.join('\n')}\n`,
      summary: { id: batch.id, loanCount, corrections, recordCount, principalCents: principal.toString(), files: fileSummaries },
    };
  }
}


/** `.tmp-<pid>-…` of another process still running (a `batches seal` beside the daemon): not a leftover. */
function ownedByLiveProcess(tmpName: string): boolean {
  const pid = Number(/^\.tmp-(\d+)-/.exec(tmpName)?.[1]);
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === 'EPERM';
  }
}
