import { systemClock } from '../lib/clock.js';
import type { StoreDb } from './sql.js';

/** One row of `file_batches`. Times are epoch ms. */
export interface FileBatchRow {
  id: string;
  status: 'open' | 'sealing' | 'sealed';
  openedAt: number;
  cutoffAt: number;
  /** When the batch was frozen (open → sealing: boards went to the next batch from then on). */
  sealingAt: number | null;
  sealedAt: number | null;
  sealReason: string | null;
  sealedBy: string | null;
  /** Sum of the first boards' principal, fixed at the seal (null before). */
  principalCents: string | null;
  /** The layout.yaml text the batch is written in. */
  layout: string;
}

export type BatchRowKind = 'new' | 'correction';

export interface BatchLoanRow {
  batchId: string;
  loanId: string;
  kind: BatchRowKind;
  principalCents: string | null;
  digest: string;
  rowsJson: string;
  recordCount: number;
  boardedAt: number;
}

/** What a board puts into the open batch, rendered for the kind the store decided on. */
export interface RenderedLoan {
  digest: string;
  rowsJson: string;
  recordCount: number;
}

export interface AppendInput {
  loanId: string;
  principalCents: string | null;
  /** The caller's clock; the store judges the cut-off on the state database's (FileBatchStore.databaseTime). */
  now: number;
  /** The layout.yaml text the loan is rendered in: an open batch in another layout is frozen first. */
  layout: string;
  /** Cut-off and id of a batch opened now. */
  openBatch(now: number): { cutoffAt: number; day: string };
  /** Rendered once the batch is known: the rows are encrypted with that batch's key (core/file/batch-keys.ts). */
  render(kind: BatchRowKind, batchId: string): RenderedLoan;
}

export interface AppendResult {
  batchId: string;
  kind: BatchRowKind;
  outcome: 'appended' | 'replaced' | 'unchanged';
  /** Batches this call froze because their cut-off had passed: their files must now be written. */
  frozen: string[];
}

// Quoted aliases: PostgreSQL folds unquoted names to lower case.
const BATCH_COLS = `id, status, opened_at AS "openedAt", cutoff_at AS "cutoffAt", sealing_at AS "sealingAt",
  sealed_at AS "sealedAt", seal_reason AS "sealReason", sealed_by AS "sealedBy",
  principal_cents AS "principalCents", layout`;
const LOAN_COLS = `batch_id AS "batchId", loan_id AS "loanId", kind, principal_cents AS "principalCents",
  digest, rows_json AS "rowsJson", record_count AS "recordCount", boarded_at AS "boardedAt"`;
const LOANS_PAGE = 500;
/** A host this close to the database's clock is taken as agreeing with it (FileBatchStore.databaseTime). */
const AGREES_WITHIN_MS = 1000;

/**
 * Batches of the file core, in the state database. Every decision that must be atomic (is the open
 * batch past its cut-off, which batch a loan goes to, first board or correction) is one IMMEDIATE
 * transaction, so a second process (`batches seal` by hand) and a crash at any instant leave one
 * consistent answer: a batch is frozen exactly once, and a loan's rows are in exactly one place per batch.
 */
/** The rows the batch tie-out is computed from (FileBatchStore.tieOut). */
export interface BatchTieRows {
  sealedBatches: number;
  sealedCents: Array<{ cents: string | null }>;
  corrections: number;
  open: { id: string; cutoffAt: number } | null;
  openCents: Array<{ cents: string | null }>;
  acknowledgedCents: Array<{ cents: number | null }>;
  notSealedPastCutoff: Array<{ loanId: string; batchId: string | null; cutoffAt: number | null }>;
}

export class FileBatchStore {
  private readonly db: StoreDb;
  constructor(db: StoreDb) {
    this.db = db;
  }

  /**
   * The time a cut-off is judged at: the state database's clock (issue 43), as leadership's lease is
   * (store/leadership/), not the leader host's. With several replicas on PostgreSQL, whichever host
   * leads would otherwise seal early or late by its own clock's error. `hostNow` is the caller's
   * clock (the system clock in the product, a test's clock in tests); the host's measured error
   * against the database (its system clock against clock_timestamp(), at the midpoint of the round
   * trip) is removed from it, so a test's clock keeps its meaning and the product gets the
   * database's time. SQLite lives on this host: its clock is the host's, nothing to remove.
   */
  private async databaseTime(hostNow: number): Promise<number> {
    if (!this.db.dialect.hasServerClock) return hostNow;
    const before = systemClock.now();
    const row = await this.db.get<{ ms: number | string }>(
      'SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms',
    );
    const after = systemClock.now();
    if (row === undefined) throw new Error('the state database did not return its time');
    const offset = Math.round(Number(row.ms) - (before + after) / 2);
    // Within the reading's uncertainty (half the round trip) and a second: the host agrees with the
    // database as far as a cut-off can tell; the caller's own time is kept to the millisecond.
    return Math.abs(offset) <= (after - before) / 2 + AGREES_WITHIN_MS ? hostNow : hostNow + offset;
  }

  get(id: string): Promise<FileBatchRow | undefined> {
    return this.db.get<FileBatchRow>(`SELECT ${BATCH_COLS} FROM file_batches WHERE id = ?`, [id]);
  }

  open(): Promise<FileBatchRow | undefined> {
    return this.db.get<FileBatchRow>(`SELECT ${BATCH_COLS} FROM file_batches WHERE status = 'open'`);
  }

  /** Newest first. */
  list(limit = 100): Promise<FileBatchRow[]> {
    return this.db.all<FileBatchRow>(
      `SELECT ${BATCH_COLS} FROM file_batches ORDER BY opened_at DESC, id DESC LIMIT ?`,
      [limit],
    );
  }

  /** Frozen batches whose files are not known to be complete (a crash, or a seal in progress). */
  sealing(): Promise<FileBatchRow[]> {
    return this.db.all<FileBatchRow>(
      `SELECT ${BATCH_COLS} FROM file_batches WHERE status = 'sealing' ORDER BY opened_at, id`,
    );
  }

  /** A batch's loans in the order they were (last) boarded, one page at a time. */
  async *loansOf(batchId: string): AsyncGenerator<BatchLoanRow> {
    let after = -1;
    for (;;) {
      const rows = await this.db.all<BatchLoanRow & { seq: number }>(
        `SELECT rowid AS seq, ${LOAN_COLS} FROM file_batch_loans WHERE ` +
          `batch_id = ? AND rowid > ? ORDER BY rowid LIMIT ${LOANS_PAGE}`,
        [batchId, after],
      );
      for (const { seq: _seq, ...r } of rows) yield r;
      if (rows.length < LOANS_PAGE) return;
      after = Number((rows[rows.length - 1] as { seq: number }).seq);
    }
  }

  async counts(batchId: string): Promise<{ loans: number; corrections: number; records: number }> {
    const r = (await this.db.get<{ loans: number; corrections: number; records: number }>(
      `SELECT COALESCE(SUM(CASE WHEN kind = 'new' THEN 1 ELSE 0 END), 0) AS loans,
              COALESCE(SUM(CASE WHEN kind = 'correction' THEN 1 ELSE 0 END), 0) AS corrections,
              COALESCE(SUM(record_count), 0) AS records
         FROM file_batch_loans WHERE batch_id = ?`,
      [batchId],
    )) as { loans: number; corrections: number; records: number };
    return { loans: Number(r.loans), corrections: Number(r.corrections), records: Number(r.records) };
  }

  /** Sum of the first boards' principal in a batch, exact (the text cents of every row, as BigInt). */
  async principalOf(batchId: string): Promise<string> {
    let total = 0n;
    for (const r of await this.db.all<{ p: string | null }>(
      `SELECT principal_cents AS p FROM file_batch_loans WHERE batch_id = ? AND kind = 'new'`,
      [batchId],
    )) {
      if (r.p !== null && /^-?\d+$/.test(r.p)) total += BigInt(r.p);
    }
    return total.toString();
  }

  batchesOfLoan(
    loanId: string,
  ): Promise<Array<{ batchId: string; status: FileBatchRow['status']; kind: BatchRowKind }>> {
    return this.db.all(
      `SELECT l.batch_id AS "batchId", b.status, l.kind FROM file_batch_loans l JOIN file_batches b ON b.id = ` +
        `l.batch_id WHERE l.loan_id = ? ORDER BY b.opened_at, b.id`,
      [loanId],
    );
  }

  /**
   * Puts a loan into the open batch (opening one when there is none, freezing the open one first
   * when its cut-off has passed). A loan already in a frozen batch becomes a correction; a loan
   * already in the open batch is replaced, or left alone when its rows are identical.
   */
  append(input: AppendInput): Promise<AppendResult> {
    return this.db.write(async (): Promise<AppendResult> => {
      const now = await this.databaseTime(input.now);
      const frozen: string[] = [];
      let open = await this.open();
      // Past its cut-off, or in another layout (the set was reloaded or the connector restarted with
      // a changed layout.yaml): the open batch is sealed as it is, in its own layout.
      const reason =
        open === undefined
          ? null
          : open.cutoffAt <= now
            ? 'cutoff'
            : open.layout !== input.layout
              ? 'layout changed'
              : null;
      if (open !== undefined && reason !== null) {
        await this.freeze(open.id, now, reason, 'connector');
        frozen.push(open.id);
        open = undefined;
      }
      open ??= await this.create(now, input.openBatch(now), input.layout);
      // Every batch the loan is in, with its row in the open one (one statement: a first board's
      // two look-ups were a tenth of its statements).
      const placed = await this.db.all<{ batchId: string; status: string; kind: string; digest: string }>(
        `SELECT l.batch_id AS "batchId", b.status, l.kind, l.digest FROM file_batch_loans l ` +
          `JOIN file_batches b ON b.id = l.batch_id WHERE l.loan_id = ?`,
        [input.loanId],
      );
      const kind: BatchRowKind = placed.some((p) => p.status !== 'open') ? 'correction' : 'new';
      const rendered = input.render(kind, open.id);
      const existing = placed.find((p) => p.batchId === open.id);
      if (existing !== undefined && existing.digest === rendered.digest && existing.kind === kind) {
        return { batchId: open.id, kind, outcome: 'unchanged', frozen };
      }
      // Replace = delete + insert: the loan's rows move to the end, in the order of its last board.
      if (existing !== undefined)
        await this.db.run(`DELETE FROM file_batch_loans WHERE batch_id = ? AND loan_id = ?`, [
          open.id,
          input.loanId,
        ]);
      await this.db.run(
        `INSERT INTO file_batch_loans (batch_id, loan_id, kind, principal_cents, digest, rows_json,
           record_count, boarded_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          open.id,
          input.loanId,
          kind,
          input.principalCents,
          rendered.digest,
          rendered.rowsJson,
          rendered.recordCount,
          now,
        ],
      );
      return { batchId: open.id, kind, outcome: existing === undefined ? 'appended' : 'replaced', frozen };
    });
  }

  /** Freezes the open batch when its cut-off has passed; returns its id. */
  freezeDue(hostNow: number): Promise<string | undefined> {
    return this.db.write(async () => {
      const now = await this.databaseTime(hostNow);
      const open = await this.open();
      if (open === undefined || open.cutoffAt > now) return undefined;
      await this.freeze(open.id, now, 'cutoff', 'connector');
      return open.id;
    });
  }

  /** Freezes the open batch now (an early seal by ops); undefined when no batch is open or `id` is not the open one. */
  freezeOpen(hostNow: number, reason: string, by: string, id?: string): Promise<string | undefined> {
    return this.db.write(async () => {
      const now = await this.databaseTime(hostNow);
      const open = await this.open();
      if (open === undefined || (id !== undefined && open.id !== id)) return undefined;
      await this.freeze(open.id, now, reason, by);
      return open.id;
    });
  }

  /**
   * sealing → sealed, once: false when another process got there first. The rendered lines (stored
   * encrypted: their key is deleted after this) are never read again once the files exist, so they
   * leave the state database in the same transaction (the sealed files in the core's directory are the record).
   */
  markSealed(id: string, hostNow: number, totals: { principalCents: string }): Promise<boolean> {
    return this.db.write(async () => {
      const now = await this.databaseTime(hostNow);
      const r = await this.db.run(
        `UPDATE file_batches SET status = 'sealed', sealed_at = ` +
          `?, principal_cents = ? WHERE id = ? AND status = 'sealing'`,
        [now, totals.principalCents, id],
      );
      if (r.changes !== 1) return false;
      await this.db.run(`UPDATE file_batch_loans SET rows_json = '{}' WHERE batch_id = ?`, [id]);
      return true;
    });
  }

  /**
   * After a seal: the cleared lines are zeroed in the database file (secure_delete, sqlite/db.ts), and
   * the WAL frames that still hold them are checkpointed and truncated away. (PostgreSQL: vacuum
   * reclaims the old row versions but erases nothing, and WAL archives and base backups keep them:
   * what protects the tax ids there is that the lines were only ever stored encrypted, with a key
   * outside the database that the seal deletes.)
   */
  scrubAfterSeal(): { done: boolean; frames: number } {
    return this.db.dialect.scrubLog();
  }

  /**
   * What the reconciliation report ties the batches with (reports/batches.ts): principal cents of
   * the first boards sealed (or frozen for their seal) and in the open batch before its cut-off,
   * the acknowledged loans, and the acknowledged loans past a cut-off without a seal or in no batch.
   * null when the file core never wrote a batch.
   */
  tieOut(asOfMs: number): Promise<BatchTieRows | null> {
    return this.db.read(async () => {
      const count = async (text: string): Promise<number> =>
        Number((await this.db.get<{ n: number }>(text))?.n ?? 0);
      if ((await count(`SELECT COUNT(*) AS n FROM file_batches`)) === 0) return null;
      const sealedCents = await this.db.all<{ cents: string | null }>(
        `SELECT l.principal_cents AS cents FROM file_batch_loans l JOIN file_batches b ON b.id = l.batch_id ` +
          `WHERE b.status IN ('sealed', 'sealing') AND l.kind = 'new'`,
      );
      const corrections = await count(
        `SELECT COUNT(*) AS n FROM file_batch_loans l JOIN file_batches b ON b.id = l.batch_id WHERE b.status IN ` +
          `('sealed', 'sealing') AND l.kind = 'correction'`,
      );
      const open = await this.db.get<{ id: string; cutoffAt: number }>(
        `SELECT id, cutoff_at AS "cutoffAt" FROM file_batches WHERE status = 'open'`,
      );
      const openCents =
        open && open.cutoffAt > asOfMs
          ? await this.db.all<{ cents: string | null }>(
              `SELECT principal_cents AS cents FROM file_batch_loans WHERE batch_id = ? AND kind = 'new'`,
              [open.id],
            )
          : [];
      const acknowledgedCents = await this.db.all<{ cents: number | null }>(
        `SELECT cents_amount AS cents FROM loans WHERE state = 'acknowledged'`,
      );
      // A loan's first board sits in one batch; past the cut-off without a seal, or in none at all.
      const notSealedPastCutoff = await this.db.all<{
        loanId: string;
        batchId: string | null;
        cutoffAt: number | null;
      }>(
        `SELECT lo.id AS "loanId", b.id AS "batchId", b.cutoff_at AS "cutoffAt"
           FROM loans lo
           LEFT JOIN file_batch_loans l ON l.loan_id = lo.id AND l.kind = 'new'
           LEFT JOIN file_batches b ON b.id = l.batch_id
          WHERE lo.state = 'acknowledged'
            AND (l.loan_id IS NULL OR (b.status <> 'sealed' AND b.cutoff_at <= ?))
          ORDER BY lo.id`,
        [asOfMs],
      );
      const sealedBatches = await count(`SELECT COUNT(*) AS n FROM file_batches WHERE status = 'sealed'`);
      return {
        sealedBatches,
        sealedCents,
        corrections,
        open: open ?? null,
        openCents,
        acknowledgedCents,
        notSealedPastCutoff,
      };
    });
  }

  afterCommit(then: () => Promise<void>): Promise<void> {
    return this.db.afterCommit(then);
  }

  outside<T>(fn: () => Promise<T>): Promise<T> {
    return this.db.outside(fn);
  }

  async hasLoan(loanId: string): Promise<boolean> {
    return (
      (await this.db.get(`SELECT 1 AS one FROM file_batch_loans WHERE loan_id = ? LIMIT 1`, [loanId])) !==
      undefined
    );
  }

  private async freeze(id: string, now: number, reason: string, by: string): Promise<void> {
    await this.db.run(
      `UPDATE file_batches SET status = 'sealing', sealing_at = ?, ` +
        `seal_reason = ?, sealed_by = ? WHERE id = ? AND status = 'open'`,
      [now, reason, by, id],
    );
  }

  private async create(
    now: number,
    b: { cutoffAt: number; day: string },
    layout: string,
  ): Promise<FileBatchRow> {
    const n = Number(
      (
        await this.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM file_batches WHERE id LIKE ? || '-%'`, [
          b.day,
        ])
      )?.n ?? 0,
    );
    const id = `${b.day}-${String(n + 1).padStart(3, '0')}`;
    await this.db.run(
      `INSERT INTO file_batches (id, status, opened_at, cutoff_at, layout) VALUES (?, 'open', ?, ?, ?)`,
      [id, now, b.cutoffAt, layout],
    );
    return (await this.get(id)) as FileBatchRow;
  }
}
