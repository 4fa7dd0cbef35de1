import type { StoreDb } from './sql.js';
import { redactForStorage, redactPayload } from '../lib/redact.js';
import {
  LOAN_STATES,
  assertTransition,
  isLoanState,
  type LoanState,
  type QuarantineReason,
} from './loan-states.js';

/** One row of `loans`, in camelCase. Times are epoch ms unless the name ends in Iso. */
export interface LoanRow {
  id: string;
  loanNumber: string | null;
  state: LoanState;
  quarantineReason: QuarantineReason | null;
  attempts: number;
  nextAttemptAt: number | null;
  lastErrorCode: string | null;
  lastErrorMessage: string | null;
  coreReference: string | null;
  mappingVersion: string | null;
  payloadHash: string | null;
  releaseMarker: string | null;
  centsAmount: number | null;
  productId: string | null;
  fundedAtIso: string | null;
  releasedAtIso: string | null;
  boardedAtIso: string | null;
  writtenAt: number | null;
  acknowledgedAt: number | null;
  coreWriteStartedAt: number | null;
  /** The release marker the core write (writtenAt/coreReference) was made for. */
  writtenReleaseMarker: string | null;
  lastSeenAt: number | null;
  /** JSON of the queue item as last seen (loan + boarding object; carries no tax ids). */
  queueItem: string | null;
  /** Review items of the last mapping (board with warnings); 0 when it mapped clean. */
  reviewItems: number;
  /** JSON of the records last written to the core, tax ids masked: what preview and dry run diff against. */
  boardedRecords: string | null;
  /** The loan's account number in the core: from the bank's pool, or read back from the core. */
  accountNumber: string | null;
  /** The borrower's name as last fetched (the console's search), null before the first fetch. */
  borrowerName: string | null;
  /** borrowerName as searched (lib/search-key.ts: no case, no accents). */
  borrowerKey: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface LoanEvent {
  seq: number;
  loanId: string;
  at: number;
  /** transition | attempt | ops | webhook | release */
  kind: string;
  fromState: string | null;
  toState: string | null;
  actor: string;
  reason: string | null;
  detail: unknown;
}

/** Columns a transition may set along with the state. */
export type LoanPatch = Partial<
  Pick<
    LoanRow,
    | 'loanNumber'
    | 'quarantineReason'
    | 'attempts'
    | 'nextAttemptAt'
    | 'lastErrorCode'
    | 'lastErrorMessage'
    | 'coreReference'
    | 'mappingVersion'
    | 'payloadHash'
    | 'releaseMarker'
    | 'centsAmount'
    | 'productId'
    | 'fundedAtIso'
    | 'releasedAtIso'
    | 'boardedAtIso'
    | 'writtenAt'
    | 'acknowledgedAt'
    | 'coreWriteStartedAt'
    | 'writtenReleaseMarker'
    | 'lastSeenAt'
    | 'queueItem'
    | 'reviewItems'
    | 'boardedRecords'
    | 'accountNumber'
    | 'borrowerName'
    | 'borrowerKey'
  >
>;

const COLUMN: Record<keyof LoanPatch, string> = {
  loanNumber: 'loan_number',
  quarantineReason: 'quarantine_reason',
  attempts: 'attempts',
  nextAttemptAt: 'next_attempt_at',
  lastErrorCode: 'last_error_code',
  lastErrorMessage: 'last_error_message',
  coreReference: 'core_reference',
  mappingVersion: 'mapping_version',
  payloadHash: 'payload_hash',
  releaseMarker: 'release_marker',
  centsAmount: 'cents_amount',
  productId: 'product_id',
  fundedAtIso: 'funded_at_iso',
  releasedAtIso: 'released_at_iso',
  boardedAtIso: 'boarded_at_iso',
  writtenAt: 'written_at',
  acknowledgedAt: 'acknowledged_at',
  coreWriteStartedAt: 'core_write_started_at',
  writtenReleaseMarker: 'written_release_marker',
  lastSeenAt: 'last_seen_at',
  queueItem: 'queue_item',
  reviewItems: 'review_items',
  boardedRecords: 'boarded_records',
  accountNumber: 'account_number',
  borrowerName: 'borrower_name',
  borrowerKey: 'borrower_key',
};

export interface TransitionInput {
  to: LoanState;
  /** The state the caller believes the loan is in; a mismatch throws StaleStateError. */
  expectedFrom?: LoanState | readonly LoanState[];
  patch?: LoanPatch;
  reason?: string | null;
  detail?: unknown;
  actor?: string;
  kind?: 'transition' | 'ops' | 'release';
  /** More writes that must commit with this transition (e.g. an idempotency key row). */
  also?: () => Promise<void>;
  /**
   * The caller's copy of the row, as its last transition returned it: the transition then reads
   * nothing (the state it expects is the copy's, checked in the UPDATE's WHERE, with the fence) and
   * returns the copy with the change applied. Without it the state is read first and the row after.
   */
  row?: LoanRow;
}

/** Someone else moved the loan first (an operator, another cycle): the caller drops its step. */
export class StaleStateError extends Error {
  override readonly name = 'StaleStateError';
  constructor(
    readonly loanId: string,
    readonly actual: LoanState | null,
    readonly expected: readonly LoanState[],
  ) {
    super(`loan ${loanId} is ${actual ?? 'unknown'}, expected ${expected.join(' or ')}`);
  }
}

export class LoanNotFoundError extends Error {
  override readonly name = 'LoanNotFoundError';
  constructor(readonly loanId: string) {
    super(`no loan ${loanId} in the state database`);
  }
}

interface RawLoan {
  id: string;
  loan_number: string | null;
  state: string;
  quarantine_reason: string | null;
  attempts: number;
  next_attempt_at: number | null;
  last_error_code: string | null;
  last_error_message: string | null;
  core_reference: string | null;
  mapping_version: string | null;
  payload_hash: string | null;
  release_marker: string | null;
  cents_amount: number | null;
  product_id: string | null;
  funded_at_iso: string | null;
  released_at_iso: string | null;
  boarded_at_iso: string | null;
  written_at: number | null;
  acknowledged_at: number | null;
  core_write_started_at: number | null;
  written_release_marker: string | null;
  last_seen_at: number | null;
  queue_item: string | null;
  review_items: number;
  boarded_records: string | null;
  account_number?: string | null;
  borrower_name?: string | null;
  borrower_key?: string | null;
  created_at: number;
  updated_at: number;
}

function toRow(r: RawLoan): LoanRow {
  if (!isLoanState(r.state))
    throw new Error(`loan ${r.id} has unknown state ${r.state} in the state database`);
  return {
    id: r.id,
    loanNumber: r.loan_number,
    state: r.state,
    quarantineReason: r.quarantine_reason as QuarantineReason | null,
    attempts: r.attempts,
    nextAttemptAt: r.next_attempt_at,
    lastErrorCode: r.last_error_code,
    lastErrorMessage: r.last_error_message,
    coreReference: r.core_reference,
    mappingVersion: r.mapping_version,
    payloadHash: r.payload_hash,
    releaseMarker: r.release_marker,
    centsAmount: r.cents_amount,
    productId: r.product_id,
    fundedAtIso: r.funded_at_iso,
    releasedAtIso: r.released_at_iso,
    boardedAtIso: r.boarded_at_iso,
    writtenAt: r.written_at,
    acknowledgedAt: r.acknowledged_at,
    coreWriteStartedAt: r.core_write_started_at,
    writtenReleaseMarker: r.written_release_marker,
    lastSeenAt: r.last_seen_at,
    queueItem: r.queue_item,
    reviewItems: r.review_items ?? 0,
    boardedRecords: r.boarded_records ?? null,
    accountNumber: r.account_number ?? null,
    borrowerName: r.borrower_name ?? null,
    borrowerKey: r.borrower_key ?? null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** A new loan as first seen (in the queue, or as a malformed queue item). */
export interface NewLoan {
  id: string;
  state: 'queued' | 'quarantined';
  patch?: LoanPatch;
  reason?: string | null;
  detail?: unknown;
}

export interface LoanListFilter {
  state?: LoanState;
  limit?: number;
  /** Only loans whose last mapping had review items (boarded with warnings). */
  withReviewItems?: boolean;
  /** With `state`: only loans that entered it at or after this time (epoch ms), from their history. */
  enteredSince?: number;
  quarantineReason?: QuarantineReason;
}

/** Repository over `loans` + `loan_events`. Each state change is one transaction with its event. */
export interface LoanStore {
  get(id: string): Promise<LoanRow | null>;
  /** Throws LoanNotFoundError. */
  require(id: string): Promise<LoanRow>;
  insert(loan: NewLoan, now: number): Promise<LoanRow>;
  transition(id: string, input: TransitionInput, now: number): Promise<LoanRow>;
  /** Updates columns without a state change (e.g. refreshing the stored queue item). */
  update(id: string, patch: LoanPatch, now: number): Promise<LoanRow>;
  recordEvent(
    id: string,
    event: { kind: LoanEvent['kind']; reason?: string | null; detail?: unknown; actor?: string },
    now: number,
  ): Promise<void>;
  /**
   * Columns and an audit event in one transaction, without a state change, while the loan is still
   * in `expected` (else StaleStateError): what a re-board of an acknowledged loan records.
   */
  amend(
    id: string,
    input: {
      expected: LoanState;
      expectedReleaseMarker?: string | null;
      patch: LoanPatch;
      kind: LoanEvent['kind'];
      reason: string;
      detail?: unknown;
      actor: string;
    },
    now: number,
  ): Promise<LoanRow>;
  events(id: string): Promise<LoanEvent[]>;
  list(filter?: LoanListFilter): Promise<LoanRow[]>;
  /** Loans a cycle should work on now: working states, plus retry_wait whose time has come. */
  due(now: number): Promise<LoanRow[]>;
  /**
   * The ids of `due(now)`, in the same order, one page at a time (keyset after `after`): a pass
   * over a 30,000-loan backlog holds one page of ids, not every due row with its queue item.
   */
  duePage(
    now: number,
    after: DueCursor | null,
    limit: number,
  ): Promise<{ ids: string[]; next: DueCursor | null }>;
  /** How many loans `due(now)` would return (a progress line's total), without reading them. */
  dueCount(now: number): Promise<number>;
  /** The earliest persisted next attempt (retry_wait), or null. */
  nextDueAt(): Promise<number | null>;
  /**
   * Loans a board started and did not finish (fetched, mapped, written: a process stopped or died
   * mid-board), in due order, at most `limit`: a new leader finishes them before it walks the queue.
   */
  inFlightIds(limit: number): Promise<string[]>;
  countByState(): Promise<Record<LoanState, number>>;
  /** Loans whose platform loan number or core account number is `number` (a person's lookup; at most 10). */
  idsByNumber(number: string): Promise<string[]>;
}

/** Position in the due order (released_at_iso, NULLs last; created_at; id). */
export interface DueCursor {
  unreleased: number;
  releasedAt: string;
  createdAt: number;
  id: string;
}

const DUE_WHERE = `(state IN ('queued','fetched','mapped','written')
         OR (state = 'retry_wait' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)))`;
// CASE, not a bare (x IS NULL): a boolean on PostgreSQL, an integer on SQLite.
const UNRELEASED = '(CASE WHEN released_at_iso IS NULL THEN 1 ELSE 0 END)';
const DUE_KEY = `${UNRELEASED}, COALESCE(released_at_iso, ''), created_at, id`;

type RawEvent = {
  seq: number;
  loan_id: string;
  at: number;
  kind: string;
  from_state: string | null;
  to_state: string | null;
  actor: string;
  reason: string | null;
  detail: string | null;
};

/** A patch's value as stored (an error message redacted, undefined as NULL). */
function storedValue(k: string, v: unknown): unknown {
  return k === 'lastErrorMessage' && typeof v === 'string' ? redactForStorage(v) : (v ?? null);
}

/** The caller's copy of a row with a transition applied, as the UPDATE stored it. */
function patched(row: LoanRow, patch: LoanPatch, to: LoanState, now: number): LoanRow {
  const out: Record<string, unknown> = { ...row };
  for (const [k, v] of Object.entries(patch)) out[k] = storedValue(k, v);
  return { ...(out as unknown as LoanRow), state: to, updatedAt: now };
}

/** A row as INSERT stores it before its patch (the table's defaults). */
function newRow(id: string, now: number): LoanRow {
  return {
    id,
    loanNumber: null,
    state: 'queued',
    quarantineReason: null,
    attempts: 0,
    nextAttemptAt: null,
    lastErrorCode: null,
    lastErrorMessage: null,
    coreReference: null,
    mappingVersion: null,
    payloadHash: null,
    releaseMarker: null,
    centsAmount: null,
    productId: null,
    fundedAtIso: null,
    releasedAtIso: null,
    boardedAtIso: null,
    writtenAt: null,
    acknowledgedAt: null,
    coreWriteStartedAt: null,
    writtenReleaseMarker: null,
    lastSeenAt: null,
    queueItem: null,
    reviewItems: 0,
    boardedRecords: null,
    accountNumber: null,
    borrowerName: null,
    borrowerKey: null,
    createdAt: now,
    updatedAt: now,
  };
}

/** What the loan store's parts share: one row by id, the event log, a patch of columns. */
function loanParts(db: StoreDb) {
  const SELECT_ONE = 'SELECT * FROM loans WHERE id = ?';
  // The check before a write reads the state alone: a full row carries the queue item and the
  // boarded records (kilobytes of JSON), read again once, after the write, for the caller.
  const SELECT_STATE = 'SELECT state FROM loans WHERE id = ?';
  const INSERT_EVENT =
    'INSERT INTO loan_events (loan_id, at, kind, from_state, ' +
    'to_state, actor, reason, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)';
  const get = async (id: string): Promise<LoanRow | null> => {
    const r = await db.get<RawLoan>(SELECT_ONE, [id]);
    return r ? toRow(r) : null;
  };
  const require = async (id: string): Promise<LoanRow> => {
    const r = await get(id);
    if (!r) throw new LoanNotFoundError(id);
    return r;
  };
  const event = async (
    id: string,
    at: number,
    kind: string,
    from: string | null,
    to: string | null,
    actor: string | undefined,
    reason: string | null | undefined,
    detail: unknown,
  ): Promise<void> => {
    // Details carry error bodies and mapping issues, which may echo data: never a full tax id.
    await db.run(INSERT_EVENT, [
      id,
      at,
      kind,
      from,
      to,
      actor ?? 'connector',
      reason ?? null,
      detail === undefined ? null : JSON.stringify(redactPayload(detail)),
    ]);
  };
  const applyPatch = async (
    id: string,
    patch: LoanPatch,
    extra: Record<string, unknown>,
    now: number,
    where: { sql: string; params: readonly unknown[] } = { sql: '', params: [] },
  ): Promise<number> => {
    const sets: string[] = [];
    const values: unknown[] = [];
    for (const [k, v] of Object.entries(patch)) {
      const col = COLUMN[k as keyof LoanPatch];
      if (col === undefined) throw new Error(`unknown loan column ${k}`);
      sets.push(`${col} = ?`);
      values.push(storedValue(k, v));
    }
    for (const [col, v] of Object.entries(extra)) {
      sets.push(`${col} = ?`);
      values.push(v);
    }
    sets.push('updated_at = ?');
    values.push(now);
    // A handful of column sets recur (one per kind of transition): the statement cache compiles each once.
    const r = await db.run(`UPDATE loans SET ${sets.join(', ')} WHERE id = ?${where.sql}`, [
      ...values,
      id,
      ...where.params,
    ]);
    return r.changes;
  };

  return { SELECT_ONE, SELECT_STATE, get, require, event, applyPatch };
}

type LoanParts = ReturnType<typeof loanParts>;

/** The state machine's writes: each one write transaction (IMMEDIATE on SQLite) that reads before it writes. */
function loanWrites(
  db: StoreDb,
  { SELECT_ONE, SELECT_STATE, require, event, applyPatch }: LoanParts,
): Pick<LoanStore, 'insert' | 'transition' | 'amend' | 'update' | 'recordEvent'> {
  return {
    // Write transactions (IMMEDIATE on SQLite): each reads before it writes (see sqlite/db.ts).
    // One INSERT with its columns (no look-up first: the key refuses a second row), and the row
    // returned as stored, not read back.
    insert: (loan, now) =>
      db.write(async () => {
        assertTransition(loan.id, null, loan.state);
        const cols = ['id', 'state', 'created_at', 'updated_at'];
        const values: unknown[] = [loan.id, loan.state, now, now];
        for (const [k, v] of Object.entries(loan.patch ?? {})) {
          const col = COLUMN[k as keyof LoanPatch];
          if (col === undefined) throw new Error(`unknown loan column ${k}`);
          cols.push(col);
          values.push(storedValue(k, v));
        }
        const r = await db.run(
          `INSERT INTO loans (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')}) ` +
            'ON CONFLICT (id) DO NOTHING',
          values,
        );
        if (r.changes !== 1) throw new Error(`loan ${loan.id} already exists`);
        await event(loan.id, now, 'transition', null, loan.state, undefined, loan.reason, loan.detail);
        return patched(newRow(loan.id, now), loan.patch ?? {}, loan.state, now);
      }),
    transition: (id, input, now) =>
      db.write(async () => {
        let from: LoanState;
        if (input.row !== undefined) from = input.row.state;
        else {
          const cur = await db.get<{ state: string }>(SELECT_STATE, [id]);
          if (!cur) throw new LoanNotFoundError(id);
          from = cur.state as LoanState;
        }
        const expected: readonly LoanState[] =
          input.expectedFrom === undefined
            ? [from]
            : typeof input.expectedFrom === 'string'
              ? [input.expectedFrom]
              : input.expectedFrom;
        if (!expected.includes(from)) throw new StaleStateError(id, from, expected);
        assertTransition(id, from, input.to);
        // The state it was read in (or the caller's copy says) and the fence, in the WHERE: a row
        // someone moved meanwhile, or a lease this replica lost, changes nothing (issue 44 item 5).
        const fence = db.fenceCondition();
        const where = {
          sql: ` AND state = ?${fence === null ? '' : ` AND ${fence.sql}`}`,
          params: [from, ...(fence?.params ?? [])],
        };
        const changed = await applyPatch(id, input.patch ?? {}, { state: input.to }, now, where);
        if (changed !== 1) {
          await db.checkFenceNow();
          const cur = await db.get<{ state: string }>(SELECT_STATE, [id]);
          if (!cur) throw new LoanNotFoundError(id);
          throw new StaleStateError(id, cur.state as LoanState, expected);
        }
        if (fence !== null) db.fenceHeld();
        await event(
          id,
          now,
          input.kind ?? 'transition',
          from,
          input.to,
          input.actor,
          input.reason,
          input.detail,
        );
        await input.also?.();
        return input.row !== undefined ? patched(input.row, input.patch ?? {}, input.to, now) : require(id);
      }),
    amend: (id, input, now) =>
      db.write(async () => {
        const cur = await db.get<RawLoan>(SELECT_ONE, [id]);
        if (!cur) throw new LoanNotFoundError(id);
        if (cur.state !== input.expected)
          throw new StaleStateError(id, cur.state as LoanState, [input.expected]);
        if (input.expectedReleaseMarker !== undefined && cur.release_marker !== input.expectedReleaseMarker) {
          throw new Error(
            `loan ${id} was released again meanwhile (release ${cur.release_marker ?? 'none'}): its newer records stay`,
          );
        }
        await applyPatch(id, input.patch, {}, now);
        await event(id, now, input.kind, null, null, input.actor, input.reason, input.detail);
        return require(id);
      }),
    update: async (id, patch, now) => {
      await require(id);
      await applyPatch(id, patch, {}, now);
      return require(id);
    },
    recordEvent: (id, e, now) => event(id, now, e.kind, null, null, e.actor, e.reason, e.detail),
  };
}

/** A loan's history and the lists operators and reports read. */
function loanQueries(db: StoreDb): Pick<LoanStore, 'events' | 'list' | 'idsByNumber' | 'countByState'> {
  const SELECT_EVENTS = 'SELECT * FROM loan_events WHERE loan_id = ? ORDER BY seq ASC';
  const SELECT_COUNTS = 'SELECT state, COUNT(*) AS n FROM loans GROUP BY state';
  return {
    events: async (id) =>
      (await db.all<RawEvent>(SELECT_EVENTS, [id])).map((e) => ({
        seq: Number(e.seq),
        loanId: e.loan_id,
        at: e.at,
        kind: e.kind,
        fromState: e.from_state,
        toState: e.to_state,
        actor: e.actor,
        reason: e.reason,
        detail: e.detail === null ? null : (JSON.parse(e.detail) as unknown),
      })),
    list: async (filter = {}) => {
      const conds: string[] = [];
      const params: unknown[] = [];
      if (filter.state) {
        conds.push('state = ?');
        params.push(filter.state);
        // updated_at moves with every queue sighting; the history says when the loan entered the state.
        if (filter.enteredSince !== undefined) {
          conds.push(
            '(SELECT MAX(at) FROM loan_events e WHERE e.loan_id = loans.id AND e.to_state = loans.state) >= ?',
          );
          params.push(filter.enteredSince);
        }
      }
      if (filter.quarantineReason) {
        conds.push('quarantine_reason = ?');
        params.push(filter.quarantineReason);
      }
      if (filter.withReviewItems) conds.push('review_items > 0');
      const where = conds.length > 0 ? `WHERE ${conds.join(' AND ')}` : '';
      const limit = filter.limit ? `LIMIT ${Math.max(1, Math.floor(filter.limit))}` : '';
      return (
        await db.all<RawLoan>(
          `SELECT * FROM loans ${where} ORDER BY updated_at DESC, id ASC ${limit}`,
          params,
        )
      ).map(toRow);
    },
    idsByNumber: async (number) =>
      (
        await db.all<{ id: string }>(
          'SELECT id FROM loans WHERE loan_number = ? OR account_number = ? ORDER BY id LIMIT 10',
          [number, number],
        )
      ).map((r) => r.id),
    countByState: async () => {
      const counts = Object.fromEntries(LOAN_STATES.map((s) => [s, 0])) as Record<LoanState, number>;
      for (const r of await db.all<{ state: string; n: number }>(SELECT_COUNTS))
        if (isLoanState(r.state)) counts[r.state] = r.n;
      return counts;
    },
  };
}

/** The due queue: what the cycle boards next, in release order, paged by a keyset cursor. */
function dueQueue(
  db: StoreDb,
): Pick<LoanStore, 'due' | 'duePage' | 'dueCount' | 'nextDueAt' | 'inFlightIds'> {
  const SELECT_DUE = `SELECT * FROM loans WHERE ${DUE_WHERE} ORDER BY ${DUE_KEY}`;
  const SELECT_DUE_COUNT = `SELECT COUNT(*) AS n FROM loans WHERE ${DUE_WHERE}`;
  const SELECT_DUE_FIRST = `SELECT id, ${UNRELEASED} AS unreleased,
      COALESCE(released_at_iso, '') AS released_at, created_at FROM loans
      WHERE ${DUE_WHERE} ORDER BY ${DUE_KEY} LIMIT ?`;
  const SELECT_DUE_AFTER = `SELECT id, ${UNRELEASED} AS unreleased,
      COALESCE(released_at_iso, '') AS released_at, created_at FROM loans
      WHERE ${DUE_WHERE} AND (${DUE_KEY}) > (?, ?, ?, ?)
      ORDER BY ${DUE_KEY} LIMIT ?`;
  const SELECT_NEXT_DUE = "SELECT MIN(next_attempt_at) AS at FROM loans WHERE state = 'retry_wait'";
  const SELECT_IN_FLIGHT = `SELECT id FROM loans WHERE state IN ('fetched','mapped','written')
      ORDER BY ${DUE_KEY} LIMIT ?`;
  return {
    due: async (now) => (await db.all<RawLoan>(SELECT_DUE, [now])).map(toRow),
    duePage: async (now, after, limit) => {
      const rows = await db.all<{ id: string; unreleased: number; released_at: string; created_at: number }>(
        after === null ? SELECT_DUE_FIRST : SELECT_DUE_AFTER,
        after === null
          ? [now, limit]
          : [now, after.unreleased, after.releasedAt, after.createdAt, after.id, limit],
      );
      const last = rows[rows.length - 1];
      return {
        ids: rows.map((r) => r.id),
        next:
          last === undefined
            ? null
            : {
                unreleased: Number(last.unreleased),
                releasedAt: last.released_at,
                createdAt: last.created_at,
                id: last.id,
              },
      };
    },
    dueCount: async (now) => (await db.get<{ n: number }>(SELECT_DUE_COUNT, [now]))?.n ?? 0,
    nextDueAt: async () => (await db.get<{ at: number | null }>(SELECT_NEXT_DUE))?.at ?? null,
    inFlightIds: async (limit) => (await db.all<{ id: string }>(SELECT_IN_FLIGHT, [limit])).map((r) => r.id),
  };
}

export function createLoanStore(db: StoreDb): LoanStore {
  const parts = loanParts(db);
  return {
    get: parts.get,
    require: parts.require,
    ...loanWrites(db, parts),
    ...loanQueries(db),
    ...dueQueue(db),
  };
}
