import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'csv-stringify/sync';
import type { Logger } from '../../lib/logger.js';
import type { MappedRecord } from '../../mapping/types.js';
import { DIR_MODE, exists, writeFileAtomic, writeFileSynced, writeFilesAtomic } from '../durable-fs.js';
import { KeyedLock } from '../keyed-lock.js';
import { safeId } from '../safe-name.js';

/**
 * Daily CSV batch files for cores whose nightly import wants flat files:
 * `batches/<yyyy-mm-dd>/<type>.csv` plus `control.csv` (record count and principal total in cents
 * per file, and a total line).
 *
 * Idempotency: each loan of the day keeps one row file (`.rows/<loan>.json`) and the day's CSVs
 * are regenerated from those row files. Boarding the same loan again overwrites its row file, so
 * it can never appear twice. A loan stays in the day it was first boarded (the caller passes that
 * day), so a core that imports each day's batch once never receives a loan in two batches.
 * A `.rows/.dirty` marker written before the row file and removed after regeneration lets
 * `recover()` finish a regeneration a crash interrupted. Rows are read from disk once per day and
 * kept in memory, so a board costs a few fsyncs, not a re-read of the whole day.
 */

export interface BatchRow {
  loanId: string;
  /** Integer cents as a decimal string (BigInt-safe), or null when the platform gave none. */
  principalCents: string | null;
  records: MappedRecord[];
}

const ROWS = '.rows';
const DIRTY = '.dirty';
const DAY_RE = /^\d{4}-\d{2}-\d{2}$/;

export class CsvBatches {
  /** Regenerations of one day are serialised: a slower, older one must not overwrite a newer one. */
  private readonly lock = new KeyedLock();
  private readonly cache = new Map<string, Map<string, BatchRow>>();

  constructor(
    private readonly root: string,
    private readonly logger: Logger,
  ) {}

  dayDir(day: string): string {
    if (!DAY_RE.test(day)) throw new Error(`invalid batch day ${JSON.stringify(day)}`);
    return join(this.root, day);
  }

  async record(day: string, row: BatchRow): Promise<void> {
    const dir = this.dayDir(day);
    await this.lock.run(day, async () => {
      const rows = await this.rowsOf(day);
      await mkdir(join(dir, ROWS), { recursive: true, mode: DIR_MODE });
      // The marker sits next to the rows: the row's atomic write fsyncs that directory, making both durable.
      await writeFileSynced(join(dir, ROWS, DIRTY), '');
      await writeFileAtomic(join(dir, ROWS, `${safeId(row.loanId)}.json`), `${JSON.stringify(row)}\n`);
      rows.set(row.loanId, row);
      await this.regenerateUnlocked(day);
    });
  }

  /** Whether the loan's row for that day is recorded (its CSV lines follow from it on recovery). */
  has(day: string, loanId: string): Promise<boolean> {
    return exists(join(this.dayDir(day), ROWS, `${safeId(loanId)}.json`));
  }

  /** Regenerates every day a crash left dirty. */
  async recover(): Promise<void> {
    if (!(await exists(this.root))) return;
    for (const day of await readdir(this.root)) {
      if (!DAY_RE.test(day)) continue;
      if (await exists(join(this.root, day, ROWS, DIRTY))) {
        this.logger.warn({ day }, 'regenerating a CSV batch left incomplete by a crash');
        await this.regenerate(day);
      }
    }
  }

  regenerate(day: string): Promise<void> {
    return this.lock.run(day, () => this.regenerateUnlocked(day));
  }

  private async regenerateUnlocked(day: string): Promise<void> {
    const dir = this.dayDir(day);
    const rows = [...(await this.rowsOf(day)).values()];
    rows.sort((a, b) => (a.loanId < b.loanId ? -1 : a.loanId > b.loanId ? 1 : 0));

    const byType = new Map<string, Array<{ row: BatchRow; rec: MappedRecord }>>();
    for (const row of rows) {
      for (const rec of row.records) {
        const list = byType.get(rec.type) ?? [];
        list.push({ row, rec });
        byType.set(rec.type, list);
      }
    }

    const control: string[][] = [];
    const outputs: Array<[string, string]> = [];
    let totalRecords = 0;
    const allLoans = new Map<string, string | null>();
    for (const [type, items] of [...byType.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const file = `${safeId(type)}.csv`;
      const keys = [...new Set(items.flatMap((i) => Object.keys(i.rec.fields)))].sort();
      const header = ['loan_id', 'record_type', 'external_id', ...keys];
      const body = items.map(({ row, rec }) => [row.loanId, rec.type, rec.externalId, ...keys.map((k) => cell(rec.fields[k]))]);
      const text = stringify([header, ...body], { record_delimiter: 'unix' });
      outputs.push([file, text]);
      const loans = new Map(items.map((i) => [i.row.loanId, i.row.principalCents]));
      for (const [id, p] of loans) allLoans.set(id, p);
      totalRecords += items.length;
      control.push([day, file, type, String(items.length), String(loans.size), sumCents(loans.values()), sha256(text)]);
    }
    control.push([day, '*', '*', String(totalRecords), String(allLoans.size), sumCents(allLoans.values()), '']);
    const controlText = stringify(
      [['batch_date', 'file', 'record_type', 'record_count', 'loan_count', 'principal_total_cents', 'sha256'], ...control],
      { record_delimiter: 'unix' },
    );
    await writeFilesAtomic(dir, outputs);
    // A type no loan of the day has any more (a re-board changed the mapping): drop its stale file.
    const written = new Set(outputs.map(([f]) => f));
    for (const f of await readdir(dir)) {
      if (f.endsWith('.csv') && f !== 'control.csv' && !written.has(f)) await unlink(join(dir, f));
    }
    // The control file last: when it is there, the files it describes are.
    await writeFileAtomic(join(dir, 'control.csv'), controlText);
    // Not fsynced: if the removal is lost in a crash, recovery regenerates once more (harmless).
    await rm(join(dir, ROWS, DIRTY), { force: true });
  }

  /** The day's rows, read from `.rows/` once and then kept current in memory (a few recent days). */
  private async rowsOf(day: string): Promise<Map<string, BatchRow>> {
    let rows = this.cache.get(day);
    if (rows === undefined) {
      rows = new Map();
      const rowsDir = join(this.dayDir(day), ROWS);
      await mkdir(rowsDir, { recursive: true, mode: DIR_MODE });
      for (const f of await readdir(rowsDir)) {
        if (!f.endsWith('.json')) continue;
        const row = JSON.parse(await readFile(join(rowsDir, f), 'utf8')) as BatchRow;
        rows.set(row.loanId, row);
      }
      this.cache.set(day, rows);
      while (this.cache.size > 3) {
        const oldest = [...this.cache.keys()].sort()[0];
        if (oldest === undefined) break;
        this.cache.delete(oldest);
      }
    }
    return rows;
  }
}

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}

function sumCents(values: Iterable<string | null>): string {
  let total = 0n;
  for (const v of values) if (v !== null && /^-?\d+$/.test(v)) total += BigInt(v);
  return total.toString();
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
