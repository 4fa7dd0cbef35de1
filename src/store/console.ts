/**
 * Every SQL statement of the ops console (src/console): the exception queue (keyset pages over
 * the partial indexes of migration 13), requests and the loans each covers, the append-only audit
 * log and reconciliation sign-offs. Async already (better-sqlite3 is synchronous; the PostgreSQL
 * store is not), so callers await.
 */
import { named, type StoreDb } from './sql.js';
import type { LoanState } from './loan-states.js';
import { type Dialect } from './dialect.js';

export type ExceptionSortKey = 'age' | 'amount' | 'released' | 'id';

/** The exception filter as SQL sees it: instants already resolved (ages → epoch ms bounds). */
export interface ExceptionSqlFilter {
  reason?: string;
  /** quarantined | review */
  state?: 'quarantined' | 'review';
  q?: string;
  /** q as a search key (lib/search-key.ts), matched inside borrower_key. */
  qKey?: string;
  product?: string;
  minAmountCents?: number;
  maxAmountCents?: number;
  mappingVersion?: string;
  releasedFrom?: string;
  releasedTo?: string;
  /** state_entered_at < this (older than). */
  enteredBefore?: number;
  /** state_entered_at >= this (younger than). */
  enteredSince?: number;
}

export interface ExceptionRow {
  id: string;
  loanNumber: string | null;
  state: LoanState;
  reason: string;
  reviewItems: number;
  borrowerName: string | null;
  productId: string | null;
  amountCents: number | null;
  mappingVersion: string | null;
  releasedAt: string | null;
  enteredAt: number;
  lastErrorCode: string | null;
  lastErrorMessage: string | null;
  attempts: number;
}

/** Where a page starts: after (sort value, id) of the previous page's last row. */
export interface ExceptionKey {
  v: number | string;
  id: string;
}

export interface RequestRow {
  id: string;
  action: string;
  filter: string | null;
  batch: string | null;
  previewCount: number;
  reason: string;
  maker: string;
  createdAt: number;
  status: string;
  decidedBy: string | null;
  decidedAt: number | null;
  decisionNote: string | null;
  claimedBy: string | null;
  claimedAt: number | null;
  executedAt: number | null;
  result: string | null;
}

export interface AuditRow {
  seq: number;
  at: number;
  actor: string;
  kind: string;
  action: string | null;
  requestId: string | null;
  loanId: string | null;
  reason: string | null;
  detail: string | null;
}

export interface SignOffRow {
  day: string;
  run: string;
  preparedBy: string | null;
  preparedAt: number | null;
  reviewedBy: string | null;
  reviewedAt: number | null;
  preparedNote: string | null;
  reviewedNote: string | null;
  /** JSON: the preparer's disposition per exception. */
  dispositions: string | null;
}

/** What a signature records besides who and when. */
export interface SignatureText {
  note: string | null;
  /** The preparer's dispositions (JSON), null for a reviewer. */
  dispositions: string | null;
}

export interface ConsoleStore {
  exceptionPage(
    filter: ExceptionSqlFilter,
    sort: ExceptionSortKey,
    dir: 'asc' | 'desc',
    after: ExceptionKey | null,
    limit: number,
  ): Promise<{ rows: ExceptionRow[]; last: ExceptionKey | null }>;
  /** Counts per exception reason in age bands: [0-1] entered at or after `t1`, [2-5] at or after `t5`, else >5. */
  exceptionCounts(
    filter: ExceptionSqlFilter,
    t1: number,
    t5: number,
  ): Promise<Array<{ reason: string; a: number; b: number; c: number }>>;
  /** Ids of the exceptions matching a filter (a bulk request), in id order, at most `max` (+1 to tell more). */
  exceptionIds(filter: ExceptionSqlFilter, max: number): Promise<string[]>;
  insertRequest(
    row: Omit<
      RequestRow,
      'decidedBy' | 'decidedAt' | 'decisionNote' | 'claimedBy' | 'claimedAt' | 'executedAt' | 'result'
    >,
    loans: ReadonlyArray<{ id: string; state: string | null }>,
    audit: NewAudit,
  ): Promise<void>;
  request(id: string): Promise<RequestRow | null>;
  requestLoans(id: string): Promise<string[]>;
  /** The loans of a request with their loan number and borrower (the request page), at most `limit`, by loan number. */
  requestLoanRows(
    id: string,
    limit: number,
  ): Promise<Array<{ id: string; loanNumber: string | null; borrowerName: string | null }>>;
  /** The loans of a request with the state each was in when it was made. */
  requestLoanStates(id: string): Promise<Array<{ id: string; fromState: string | null }>>;
  /** Newest first; keyset on (created_at, id). */
  requests(
    status: string | null,
    after: { createdAt: number; id: string } | null,
    limit: number,
  ): Promise<RequestRow[]>;
  requestsForLoan(loanId: string, limit: number): Promise<RequestRow[]>;
  countRequests(status: string): Promise<number>;
  /**
   * pending → approved/rejected/withdrawn when still pending; false when someone else decided first. With its
   * audit line, atomically.
   */
  decide(
    id: string,
    to: 'approved' | 'rejected' | 'withdrawn',
    by: string,
    at: number,
    note: string | null,
    audit: NewAudit,
  ): Promise<boolean>;
  /**
   * Requests still to run (pending or approved) that cover any of these loans: [request id, loan id] pairs,
   * at most `limit`.
   */
  openRequestsCovering(
    loanIds: readonly string[],
    limit: number,
  ): Promise<Array<{ requestId: string; loanId: string }>>;
  /** Requests still to run (pending or approved) of an action that takes no loans (seal, strike_clear). */
  openRequestsOf(action: string): Promise<string[]>;
  /** Claims an approved, unclaimed (or stale-claimed) request for execution; false when another executor has it. */
  claim(id: string, owner: string, at: number, staleBefore: number): Promise<boolean>;
  /** Approved requests waiting for execution, oldest first. */
  approvedIds(limit: number): Promise<string[]>;
  /** approved → executed/failed with its result and audit line, atomically. */
  finish(
    id: string,
    status: 'executed' | 'failed',
    at: number,
    result: string,
    audit: NewAudit,
  ): Promise<void>;
  appendAudit(entry: NewAudit): Promise<void>;
  /** Newest first, seq below `before`. */
  audit(
    filter: { loanId?: string; requestId?: string },
    before: number | null,
    limit: number,
  ): Promise<AuditRow[]>;
  /** Oldest first, seq above `after` (CSV export in chunks). */
  auditAscending(filter: { loanId?: string }, after: number, limit: number): Promise<AuditRow[]>;
  signOffs(): Promise<SignOffRow[]>;
  signOff(day: string, run: string): Promise<SignOffRow | null>;
  /**
   * Sets prepared_by (when unset) or reviewed_by (when prepared, unset, and by ≠ prepared_by); false when
   * refused by state.
   */
  sign(
    day: string,
    run: string,
    as: 'prepared' | 'reviewed',
    by: string,
    at: number,
    text: SignatureText,
    audit: NewAudit,
  ): Promise<boolean>;
  /** The re-hash of a user's password kept by the connector (null when none). */
  passwordHash(name: string): Promise<{ replaces: string; hash: string } | null>;
  putPasswordHash(name: string, replaces: string, hash: string, at: number): Promise<void>;
  /** When a login lock of this user (normalised name) was last lifted (an `unlock` audit line), null if never. */
  lastUnlock(nameKey: string): Promise<number | null>;
}

export interface NewAudit {
  at: number;
  actor: string;
  kind: string;
  action?: string | null;
  requestId?: string | null;
  loanId?: string | null;
  reason?: string | null;
  detail?: unknown;
}

/** No amount sorts below every amount: the partial index's (migration 13) stand-in for NULL. */
const NO_AMOUNT = -9007199254740992;

// The sort expressions are the partial indexes' (migration 13): IFNULL on SQLite, COALESCE on PostgreSQL.
const sortExpr = ({ ifnull }: Dialect): Record<ExceptionSortKey, string> => {
  return {
    age: 'state_entered_at',
    amount: `${ifnull}(cents_amount, ${NO_AMOUNT})`,
    released: `${ifnull}(released_at_iso, '')`,
    id: 'id',
  };
};

function whereOf(f: ExceptionSqlFilter, dialect: Dialect): { sql: string; params: Record<string, unknown> } {
  const conds = ['exception_reason IS NOT NULL'];
  const params: Record<string, unknown> = {};
  if (f.reason !== undefined) {
    conds.push('exception_reason = @reason');
    params['reason'] = f.reason;
  }
  if (f.state === 'quarantined') conds.push("state = 'quarantined'");
  if (f.state === 'review') conds.push("exception_reason = 'review'");
  if (f.q !== undefined && f.q !== '') {
    const key = dialect.position(`${dialect.ifnull}(borrower_key, '')`, '@qKey');
    conds.push(`(id = @q OR loan_number = @q OR ${key} > 0)`);
    params['q'] = f.q;
    params['qKey'] = f.qKey ?? f.q;
  }
  if (f.product !== undefined) {
    conds.push('product_id = @product');
    params['product'] = f.product;
  }
  if (f.minAmountCents !== undefined) {
    conds.push('cents_amount >= @minAmount');
    params['minAmount'] = f.minAmountCents;
  }
  if (f.maxAmountCents !== undefined) {
    conds.push('cents_amount <= @maxAmount');
    params['maxAmount'] = f.maxAmountCents;
  }
  if (f.mappingVersion !== undefined) {
    conds.push('mapping_version = @mappingVersion');
    params['mappingVersion'] = f.mappingVersion;
  }
  // released_at_iso is an ISO date-time: a day's bounds compare as text.
  if (f.releasedFrom !== undefined) {
    conds.push('released_at_iso >= @releasedFrom');
    params['releasedFrom'] = f.releasedFrom;
  }
  if (f.releasedTo !== undefined) {
    conds.push('released_at_iso < @releasedTo');
    params['releasedTo'] = f.releasedTo;
  }
  if (f.enteredBefore !== undefined) {
    conds.push('state_entered_at < @enteredBefore');
    params['enteredBefore'] = f.enteredBefore;
  }
  if (f.enteredSince !== undefined) {
    conds.push('state_entered_at >= @enteredSince');
    params['enteredSince'] = f.enteredSince;
  }
  return { sql: conds.join(' AND '), params };
}

interface RawException {
  id: string;
  loan_number: string | null;
  state: LoanState;
  exception_reason: string;
  review_items: number;
  borrower_name: string | null;
  product_id: string | null;
  cents_amount: number | null;
  mapping_version: string | null;
  released_at_iso: string | null;
  state_entered_at: number;
  last_error_code: string | null;
  last_error_message: string | null;
  attempts: number;
}

/**
 * A row's sort value for the next page's keyset, the same value the index expression gives, taken
 * from the row in JS. Never selected from SQL: PostgreSQL answers the expression as int8, and its
 * NULL stand-in (−2^53) is beyond the safe integers the store's int8 parser accepts (it refused the
 * whole page: the amount sort failed on PostgreSQL as soon as one exception had no amount).
 */
const sortValue: Record<ExceptionSortKey, (r: RawException) => number | string> = {
  age: (r) => r.state_entered_at,
  amount: (r) => r.cents_amount ?? NO_AMOUNT,
  released: (r) => r.released_at_iso ?? '',
  id: (r) => r.id,
};

const EXCEPTION_COLUMNS =
  'id, loan_number, state, exception_reason, review_items, borrower_name, product_id, cents_amount, ' +
  'mapping_version, released_at_iso, state_entered_at, last_error_code, last_error_message, attempts';

const toRequest = (r: Record<string, unknown>): RequestRow => ({
  id: r['id'] as string,
  action: r['action'] as string,
  filter: (r['filter'] as string | null) ?? null,
  batch: (r['batch'] as string | null) ?? null,
  previewCount: r['preview_count'] as number,
  reason: r['reason'] as string,
  maker: r['maker'] as string,
  createdAt: r['created_at'] as number,
  status: r['status'] as string,
  decidedBy: (r['decided_by'] as string | null) ?? null,
  decidedAt: (r['decided_at'] as number | null) ?? null,
  decisionNote: (r['decision_note'] as string | null) ?? null,
  claimedBy: (r['claimed_by'] as string | null) ?? null,
  claimedAt: (r['claimed_at'] as number | null) ?? null,
  executedAt: (r['executed_at'] as number | null) ?? null,
  result: (r['result'] as string | null) ?? null,
});

const toAudit = (r: Record<string, unknown>): AuditRow => ({
  seq: r['seq'] as number,
  at: r['at'] as number,
  actor: r['actor'] as string,
  kind: r['kind'] as string,
  action: (r['action'] as string | null) ?? null,
  requestId: (r['request_id'] as string | null) ?? null,
  loanId: (r['loan_id'] as string | null) ?? null,
  reason: (r['reason'] as string | null) ?? null,
  detail: (r['detail'] as string | null) ?? null,
});

const toSignOff = (r: Record<string, unknown>): SignOffRow => ({
  day: r['day'] as string,
  run: r['run'] as string,
  preparedBy: (r['prepared_by'] as string | null) ?? null,
  preparedAt: (r['prepared_at'] as number | null) ?? null,
  reviewedBy: (r['reviewed_by'] as string | null) ?? null,
  reviewedAt: (r['reviewed_at'] as number | null) ?? null,
  preparedNote: (r['prepared_note'] as string | null) ?? null,
  reviewedNote: (r['reviewed_note'] as string | null) ?? null,
  dispositions: (r['dispositions'] as string | null) ?? null,
});

/** What the console store's parts share: the database and its statement helpers. */
function storeParts(db: StoreDb) {
  const SORT_EXPR = sortExpr(db.dialect);
  const all = <R>(text: string, params: Record<string, unknown>): Promise<R[]> =>
    db.all<R>(...named(text, params));
  const audit = async (e: NewAudit): Promise<void> => {
    await db.run(
      ...named(
        'INSERT INTO console_audit (at, actor, kind, action, request_id, loan_id, reason, detail) VALUES (@at, ' +
          '@actor, @kind, @action, @requestId, @loanId, @reason, @detail)',
        {
          at: e.at,
          actor: e.actor,
          kind: e.kind,
          action: e.action ?? null,
          requestId: e.requestId ?? null,
          loanId: e.loanId ?? null,
          reason: e.reason ?? null,
          detail: e.detail === undefined || e.detail === null ? null : JSON.stringify(e.detail),
        },
      ),
    );
  };
  // Write transactions (IMMEDIATE on SQLite; one at a time on PostgreSQL): see sql.ts.
  const immediate = <T>(fn: () => Promise<T>): Promise<T> => db.write(fn);

  return { db, SORT_EXPR, all, audit, immediate };
}
type StoreParts = ReturnType<typeof storeParts>;

/** The exception queue: keyset pages, counts by age, ids of a filter. */
function exceptionQueries({
  db,
  SORT_EXPR,
  all,
}: StoreParts): Pick<ConsoleStore, 'exceptionPage' | 'exceptionCounts' | 'exceptionIds'> {
  return {
    async exceptionPage(filter, sort, dir, after, limit) {
      const w = whereOf(filter, db.dialect);
      const expr = SORT_EXPR[sort];
      const cmp = dir === 'asc' ? '>' : '<';
      const params: Record<string, unknown> = { ...w.params, limit };
      let keyset = '';
      if (after !== null) {
        keyset =
          sort === 'id'
            ? ` AND id ${cmp} @afterId`
            : ` AND (${expr} ${cmp} @afterV OR (${expr} = @afterV AND id ${cmp} @afterId))`;
        params['afterV'] = after.v;
        params['afterId'] = after.id;
      }
      const order = sort === 'id' ? `id ${dir}` : `${expr} ${dir}, id ${dir}`;
      const rows = await all<RawException>(
        `SELECT ${EXCEPTION_COLUMNS} FROM loans WHERE ${w.sql}${keyset} ORDER BY ${order} LIMIT @limit`,
        params,
      );
      const lastRaw = rows[rows.length - 1];
      return {
        rows: rows.map((r) => ({
          id: r.id,
          loanNumber: r.loan_number,
          state: r.state,
          reason: r.exception_reason,
          reviewItems: r.review_items,
          borrowerName: r.borrower_name,
          productId: r.product_id,
          amountCents: r.cents_amount,
          mappingVersion: r.mapping_version,
          releasedAt: r.released_at_iso,
          enteredAt: r.state_entered_at,
          lastErrorCode: r.last_error_code,
          lastErrorMessage: r.last_error_message,
          attempts: r.attempts,
        })),
        last: lastRaw === undefined ? null : { v: sortValue[sort](lastRaw), id: lastRaw.id },
      };
    },
    async exceptionCounts(filter, t1, t5) {
      const w = whereOf(filter, db.dialect);
      return all<{ reason: string; a: number; b: number; c: number }>(
        `SELECT exception_reason AS reason,
                  SUM(CASE WHEN state_entered_at >= @t1 THEN 1 ELSE 0 END) AS a,
                  SUM(CASE WHEN state_entered_at < @t1 AND state_entered_at >= @t5 THEN 1 ELSE 0 END) AS b,
                  SUM(CASE WHEN state_entered_at < @t5 THEN 1 ELSE 0 END) AS c
             FROM loans WHERE ${w.sql} GROUP BY exception_reason ORDER BY exception_reason`,
        { ...w.params, t1, t5 },
      );
    },
    async exceptionIds(filter, max) {
      const w = whereOf(filter, db.dialect);
      return (
        await all<{ id: string }>(`SELECT id FROM loans WHERE ${w.sql} ORDER BY id LIMIT @max`, {
          ...w.params,
          max,
        })
      ).map((r) => r.id);
    },
  };
}

/** A request's writes: its insertion with its loans, the decision, the execution claim and the result. */
function requestWrites({
  db,
  audit,
  immediate,
}: StoreParts): Pick<ConsoleStore, 'insertRequest' | 'decide' | 'claim' | 'finish'> {
  return {
    async insertRequest(row, loans, entry) {
      await immediate(async () => {
        await db.run(
          ...named(
            'INSERT INTO console_requests (id, action, filter, batch, preview_count, reason, maker, created_at, ' +
              'status) VALUES (@id, @action, @filter, @batch, ' +
              '@previewCount, @reason, @maker, @createdAt, @status)',
            row,
          ),
        );
        for (const l of loans)
          await db.run(
            'INSERT INTO console_request_loans (request_id, loan_id, ' +
              'from_state) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
            [row.id, l.id, l.state],
          );
        await audit(entry);
      });
    },
    async decide(id, to, by, at, note, entry) {
      return immediate(async () => {
        const r = await db.run(
          'UPDATE console_requests SET status = ?, decided_by = ?, decided_at = ?, decision_note = ? WHERE id = ' +
            "? AND status = 'pending'",
          [to, by, at, note, id],
        );
        if (r.changes === 0) return false;
        await audit(entry);
        return true;
      });
    },
    async claim(id, owner, at, staleBefore) {
      return (
        (
          await db.run(
            "UPDATE console_requests SET claimed_by = ?, claimed_at = ? WHERE id = ? AND status = 'approved' AND " +
              '(claimed_at IS NULL OR claimed_at < ?)',
            [owner, at, id, staleBefore],
          )
        ).changes > 0
      );
    },
    async finish(id, status, at, result, entry) {
      await immediate(async () => {
        if (
          (
            await db.run(
              'UPDATE console_requests SET status = ?, executed_at = ?, result = ? WHERE id = ? AND status = ' +
                "'approved'",
              [status, at, result, id],
            )
          ).changes > 0
        )
          await audit(entry);
      });
    },
  };
}

/** Requests as the console lists them, and the loans each one covers. */
function requestReads({
  db,
  all,
}: StoreParts): Pick<
  ConsoleStore,
  | 'request'
  | 'requestLoans'
  | 'requestLoanRows'
  | 'requestLoanStates'
  | 'requests'
  | 'requestsForLoan'
  | 'countRequests'
  | 'openRequestsCovering'
  | 'openRequestsOf'
  | 'approvedIds'
> {
  return {
    async request(id) {
      const r = await db.get<Record<string, unknown>>('SELECT * FROM console_requests WHERE id = ?', [id]);
      return r ? toRequest(r) : null;
    },
    async requestLoans(id) {
      return (
        await db.all<{ loan_id: string }>(
          'SELECT loan_id FROM console_request_loans WHERE request_id = ? ORDER BY loan_id',
          [id],
        )
      ).map((r) => r.loan_id);
    },
    async requestLoanRows(id, limit) {
      return (
        await db.all<{ loan_id: string; loan_number: string | null; borrower_name: string | null }>(
          'SELECT l.loan_id, n.loan_number, n.borrower_name FROM console_request_loans l LEFT JOIN loans n ON ' +
            'n.id = l.loan_id WHERE l.request_id = ? ORDER BY n.loan_number, l.loan_id LIMIT ?',
          [id, limit],
        )
      ).map((r) => ({ id: r.loan_id, loanNumber: r.loan_number, borrowerName: r.borrower_name }));
    },
    async requestLoanStates(id) {
      return (
        await db.all<{ loan_id: string; from_state: string | null }>(
          'SELECT loan_id, from_state FROM console_request_loans WHERE request_id = ? ORDER BY loan_id',
          [id],
        )
      ).map((r) => ({
        id: r.loan_id,
        fromState: r.from_state,
      }));
    },
    async requests(status, after, limit) {
      const conds: string[] = [];
      const params: Record<string, unknown> = { limit };
      if (status !== null) {
        conds.push('status = @status');
        params['status'] = status;
      }
      if (after !== null) {
        conds.push('(created_at < @at OR (created_at = @at AND id < @id))');
        params['at'] = after.createdAt;
        params['id'] = after.id;
      }
      const where = conds.length > 0 ? `WHERE ${conds.join(' AND ')}` : '';
      return (
        await all<Record<string, unknown>>(
          `SELECT * FROM console_requests ${where} ORDER BY created_at DESC, id DESC LIMIT @limit`,
          params,
        )
      ).map(toRequest);
    },
    async requestsForLoan(loanId, limit) {
      return (
        await db.all<Record<string, unknown>>(
          'SELECT r.* FROM console_requests r JOIN console_request_loans l ON l.request_id = r.id WHERE ' +
            'l.loan_id = ? ORDER BY r.created_at DESC, r.id DESC LIMIT ?',
          [loanId, limit],
        )
      ).map(toRequest);
    },
    async countRequests(status) {
      return Number(
        (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM console_requests WHERE status = ?', [status]))
          ?.n ?? 0,
      );
    },
    async openRequestsCovering(loanIds, limit) {
      const out: Array<{ requestId: string; loanId: string }> = [];
      for (let i = 0; i < loanIds.length && out.length < limit; i += 500) {
        const chunk = loanIds.slice(i, i + 500);
        const marks = chunk.map(() => '?').join(', ');
        const rows = await db.all<{ request_id: string; loan_id: string }>(
          `SELECT l.request_id, l.loan_id FROM console_request_loans l JOIN console_requests r ON r.id = ` +
            `l.request_id WHERE r.status IN ('pending', 'approved') AND l.loan_id IN (${marks}) ORDER BY ` +
            `r.created_at, l.loan_id LIMIT ?`,
          [...chunk, limit - out.length],
        );
        out.push(...rows.map((r) => ({ requestId: r.request_id, loanId: r.loan_id })));
      }
      return out;
    },
    async openRequestsOf(action) {
      return (
        await db.all<{ id: string }>(
          "SELECT id FROM console_requests WHERE action = ? AND status IN ('pending', 'approved') ORDER BY created_at",
          [action],
        )
      ).map((r) => r.id);
    },
    async approvedIds(limit) {
      return (
        await db.all<{ id: string }>(
          "SELECT id FROM console_requests WHERE status = 'approved' ORDER BY created_at, id LIMIT ?",
          [limit],
        )
      ).map((r) => r.id);
    },
  };
}

/** The audit log, sign-offs, kept password re-hashes and unlocks. */
function auditQueries({
  db,
  all,
  audit,
  immediate,
}: StoreParts): Pick<
  ConsoleStore,
  | 'appendAudit'
  | 'audit'
  | 'auditAscending'
  | 'signOffs'
  | 'signOff'
  | 'sign'
  | 'passwordHash'
  | 'putPasswordHash'
  | 'lastUnlock'
> {
  return {
    async appendAudit(entry) {
      await audit(entry);
    },
    async audit(filter, before, limit) {
      const conds: string[] = [];
      const params: Record<string, unknown> = { limit };
      if (filter.loanId !== undefined) {
        conds.push(
          '(loan_id = @loan OR request_id IN (SELECT request_id FROM console_request_loans WHERE loan_id = @loan))',
        );
        params['loan'] = filter.loanId;
      }
      if (filter.requestId !== undefined) {
        conds.push('request_id = @request');
        params['request'] = filter.requestId;
      }
      if (before !== null) {
        conds.push('seq < @before');
        params['before'] = before;
      }
      const where = conds.length > 0 ? `WHERE ${conds.join(' AND ')}` : '';
      return (
        await all<Record<string, unknown>>(
          `SELECT * FROM console_audit ${where} ORDER BY seq DESC LIMIT @limit`,
          params,
        )
      ).map(toAudit);
    },
    async auditAscending(filter, after, limit) {
      const loan =
        filter.loanId !== undefined
          ? ' AND (loan_id = @loan OR request_id IN (SELECT request_id ' +
            'FROM console_request_loans WHERE loan_id = @loan))'
          : '';
      return (
        await all<Record<string, unknown>>(
          `SELECT * FROM console_audit WHERE seq > @after${loan} ORDER BY seq LIMIT @limit`,
          {
            after,
            limit,
            ...(filter.loanId !== undefined ? { loan: filter.loanId } : {}),
          },
        )
      ).map(toAudit);
    },
    async signOffs() {
      return (await db.all<Record<string, unknown>>('SELECT * FROM report_signoffs')).map(toSignOff);
    },
    async signOff(day, run) {
      const r = await db.get<Record<string, unknown>>(
        'SELECT * FROM report_signoffs WHERE day = ? AND run = ?',
        [day, run],
      );
      return r ? toSignOff(r) : null;
    },
    async sign(day, run, as, by, at, text, entry) {
      return immediate(async () => {
        await db.run('INSERT INTO report_signoffs (day, run) VALUES (?, ?) ON CONFLICT DO NOTHING', [
          day,
          run,
        ]);
        const changed =
          as === 'prepared'
            ? (
                await db.run(
                  'UPDATE report_signoffs SET prepared_by = ?, prepared_at = ?, prepared_note = ?, dispositions ' +
                    '= ? WHERE day = ? AND run = ? AND prepared_by IS NULL',
                  [by, at, text.note, text.dispositions, day, run],
                )
              ).changes
            : (
                await db.run(
                  'UPDATE report_signoffs SET reviewed_by = ?, reviewed_at = ?, reviewed_note = ? WHERE day = ? ' +
                    'AND run = ? AND reviewed_by IS NULL AND prepared_by IS NOT NULL AND prepared_by <> ?',
                  [by, at, text.note, day, run, by],
                )
              ).changes;
        if (changed === 0) return false;
        await audit(entry);
        return true;
      });
    },
    async passwordHash(name) {
      const r = await db.get<{ replaces: string; hash: string }>(
        'SELECT replaces, hash FROM console_password_hashes WHERE name = ?',
        [name],
      );
      return r ? { replaces: r.replaces, hash: r.hash } : null;
    },
    async putPasswordHash(name, replaces, hash, at) {
      await db.run(
        'INSERT INTO console_password_hashes (name, replaces, hash, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT ' +
          '(name) DO UPDATE SET replaces = excluded.replaces, ' +
          'hash = excluded.hash, updated_at = excluded.updated_at',
        [name, replaces, hash, at],
      );
    },
    async lastUnlock(nameKey) {
      const r = await db.get<{ at: number | null }>(
        "SELECT MAX(at) AS at FROM console_audit WHERE kind = 'unlock' AND reason = ?",
        [nameKey],
      );
      return r?.at === null || r?.at === undefined ? null : Number(r.at);
    },
  };
}

export function createConsoleStore(db: StoreDb): ConsoleStore {
  const parts = storeParts(db);
  return {
    ...exceptionQueries(parts),
    ...requestWrites(parts),
    ...requestReads(parts),
    ...auditQueries(parts),
  };
}
