import { redactPayload } from '../lib/redact.js';
import type { StoreDb } from './sql.js';
import { extractFundedAt } from '../contract/webhook-payload.js';

/** What the inbox stores of a verified delivery (the receiver's parsed event has these fields). */
export interface InboxDelivery {
  webhookId: string;
  type: string;
  loanId: string | null;
  occurredAt: number;
  payload: Record<string, unknown>;
}

export type InboxStatus = 'pending' | 'processed' | 'failed';

export interface InboxRow {
  /**
   * The row's rowid (SQLite) or seq column (PostgreSQL): stable within a transaction (marking by it skips the
   * id index).
   */
  seq: number;
  webhookId: string;
  eventType: string;
  loanId: string | null;
  occurredAt: number | null;
  receivedAt: number;
  payload: Record<string, unknown>;
  status: InboxStatus;
  processedAt: number | null;
  error: string | null;
}

export interface InboxStats {
  pending: number;
  failed: number;
  processed: number;
  /** receipt time (epoch ms) of the oldest pending row, or null. */
  oldestPendingAt: number | null;
}

export interface FundedLoan {
  loanId: string;
  /** Epoch ms of the earliest funding seen for the loan. */
  fundedAt: number;
}

/**
 * The webhook inbox (table webhook_inbox): every verified delivery is stored here before the
 * platform gets its 2xx, keyed by webhook id so a redelivery is a no-op. Processing reads pending
 * rows back, so nothing accepted is lost across a crash or restart.
 */
export interface WebhookInbox {
  /** INSERT OR IGNORE: true when the row is new, false for a duplicate delivery. */
  insert(event: InboxDelivery, receivedAt: number): Promise<boolean>;
  /** Pending rows in event-time order (so one loan's events come in the order they happened). */
  pending(limit: number): Promise<InboxRow[]>;
  get(webhookId: string): Promise<InboxRow | null>;
  markProcessed(webhookId: string, at: number): Promise<void>;
  /** markProcessed by `seq`, for rows read in the same transaction. */
  markProcessedSeq(seq: number, at: number): Promise<void>;
  markFailed(webhookId: string, at: number, error: string): Promise<void>;
  stats(): Promise<InboxStats>;
  /** Rows of one event type, any status. */
  countOfType(eventType: string): Promise<number>;
  /** When the loan was funded according to loan.funded deliveries, or null. */
  fundedAt(loanId: string): Promise<number | null>;
  /** Every loan a loan.funded delivery named, with its earliest funded time (reconciliation aging). */
  fundedLoans(): Promise<FundedLoan[]>;
  /**
   * Deletes processed rows received before `beforeMs`, except loan.funded rows whose funded time
   * is not yet on a loans row (they are the only record of it). Returns how many were deleted.
   * With `limit`, at most that many, oldest first: a caller deletes in short transactions so the
   * receiver's writes are never held up for long (see the webhook service).
   */
  prune(beforeMs: number, limit?: number): Promise<number>;
  /** Deletes the oldest processed loan.funded rows of loans the connector does not know, beyond `max`. */
  capUnknownFunded(max: number): Promise<number>;
}

interface RawRow {
  seq: number;
  webhook_id: string;
  event_type: string;
  loan_id: string | null;
  occurred_at: number | null;
  received_at: number;
  payload: string;
  status: string;
  processed_at: number | null;
  error: string | null;
}

function toRow(r: RawRow): InboxRow {
  let payload: Record<string, unknown> = {};
  try {
    payload = JSON.parse(r.payload) as Record<string, unknown>;
  } catch {
    // Stored by us from verified JSON, so this means a hand-edited row: keep it processable.
  }
  return {
    seq: Number(r.seq),
    webhookId: r.webhook_id,
    eventType: r.event_type,
    loanId: r.loan_id,
    occurredAt: r.occurred_at,
    receivedAt: r.received_at,
    payload,
    status: r.status === 'processed' || r.status === 'failed' ? r.status : 'pending',
    processedAt: r.processed_at,
    error: r.error,
  };
}

/** Processed rows are kept this long (the daily prune's horizon). */
export const INBOX_PRUNE_AFTER_MS = 30 * 24 * 60 * 60 * 1000;
/** A loan.funded row for a loan never released is kept at most this long. */
export const UNKNOWN_LOAN_RETENTION_MS = 180 * 24 * 60 * 60 * 1000;
/** And at most this many of them. */
export const UNKNOWN_LOAN_MAX_ROWS = 50_000;

/** The inbox insert: a redelivered webhook id changes nothing (0 changes = duplicate). */
const INBOX_INSERT_SQL = `INSERT INTO webhook_inbox (webhook_id, event_type, loan_id, occurred_at, received_at,
     payload, status)
     VALUES (?, ?, ?, ?, ?, ?, 'pending') ON CONFLICT DO NOTHING`;

type InboxInsertParams = [
  webhookId: string,
  eventType: string,
  loanId: string | null,
  occurredAt: number,
  receivedAt: number,
  payload: string,
];

/**
 * The parameters of INBOX_INSERT_SQL for one delivery. The
 * payload is stored redacted (redactPayload): whatever the platform puts in a delivery — a full
 * EIN/SSN, a presigned URL, a key — is kept for 30 days, so it gets the same redaction as every
 * other stored value. The fields the connector reads (ids, type, times) pass unchanged.
 */
function inboxInsertParams(event: InboxDelivery, receivedAt: number): InboxInsertParams {
  return [
    event.webhookId,
    event.type,
    event.loanId,
    event.occurredAt,
    receivedAt,
    JSON.stringify(redactPayload(event.payload)),
  ];
}

/** The inbox's row number: SQLite's rowid; a column of that name (bigserial) on PostgreSQL (migrations.ts). */
const SEQ = 'rowid';

export function createWebhookInbox(db: StoreDb): WebhookInbox {
  const COLS =
    `${SEQ} AS seq, webhook_id, event_type, loan_id, ` +
    `occurred_at, received_at, payload, status, processed_at, error`;
  const PENDING = `SELECT ${COLS} FROM webhook_inbox WHERE status = 'pending'
     ORDER BY COALESCE(occurred_at, received_at) ASC, received_at ASC, webhook_id ASC LIMIT ?`;
  const GET = `SELECT ${COLS} FROM webhook_inbox WHERE webhook_id = ?`;
  const MARK = 'UPDATE webhook_inbox SET status = ?, processed_at = ?, error = ? WHERE webhook_id = ?';
  const MARK_SEQ = `UPDATE webhook_inbox SET status = 'processed', processed_at = ?, error = NULL WHERE ${SEQ} = ?`;
  // Counted without reading the table: pending and failed rows from their partial indexes, all
  // rows from the smallest full index (processed = the rest). A GROUP BY status scanned every row
  // of the 30-day inbox on each /metrics scrape, on the receiver's event loop.
  const PENDING_STATS =
    "SELECT COUNT(*) AS n, MIN(received_at) AS oldest FROM webhook_inbox WHERE status = 'pending'";
  const FAILED_COUNT = "SELECT COUNT(*) AS n FROM webhook_inbox WHERE status = 'failed'";
  // event_type = 'loan.funded' lets the partial webhook_inbox_funded index serve the lookup.
  const FUNDED =
    `SELECT ${COLS} FROM webhook_inbox WHERE status IN ('pending', 'processed') AND loan_id = ? AND ` +
    `event_type = 'loan.funded'`;
  const ALL_FUNDED =
    `SELECT ${COLS} FROM webhook_inbox WHERE event_type = ` +
    `'loan.funded' AND loan_id IS NOT NULL AND status != 'failed'`;
  // A loan.funded row waits for its loan to be released (its funded time goes onto the loan row),
  // but not for ever: past UNKNOWN_LOAN_RETENTION_MS it goes like any other row.
  const prunable = `status = 'processed' AND received_at < ?
       AND (event_type != 'loan.funded' OR loan_id IS NULL
            OR loan_id IN (SELECT id FROM loans WHERE funded_at_iso IS NOT NULL)
            OR received_at < ?)`;
  const PRUNE = `DELETE FROM webhook_inbox WHERE ${prunable}`;
  // Rows are stored in arrival order, so the oldest prunable rows are found near the start.
  const PRUNE_SOME =
    `DELETE FROM webhook_inbox WHERE ${SEQ} IN (SELECT ${SEQ} FROM webhook_inbox WHERE ` +
    `${prunable} ORDER BY ${SEQ} LIMIT ?)`;
  // Count bound on processed loan.funded rows whose loan the connector does not know: the oldest
  // beyond `max` go (a flood of signed deliveries for invented loans cannot grow the inbox for ever).
  const CAP_UNKNOWN = `DELETE FROM webhook_inbox WHERE ${SEQ} IN (
       SELECT ${SEQ} FROM webhook_inbox
        WHERE status = 'processed' AND event_type = 'loan.funded' AND loan_id IS NOT NULL
          AND loan_id NOT IN (SELECT id FROM loans)
        ORDER BY ${SEQ} DESC ${db.dialect.limitAll} OFFSET ?)`;
  const fundedTime = (r: RawRow): number => {
    const row = toRow(r);
    return extractFundedAt({ payload: row.payload, occurredAt: row.occurredAt ?? row.receivedAt });
  };
  const count = async (text: string, params: unknown[] = []): Promise<number> =>
    Number((await db.get<{ n: number }>(text, params))?.n ?? 0);
  return {
    insert: async (event, receivedAt) =>
      (await db.run(INBOX_INSERT_SQL, inboxInsertParams(event, receivedAt))).changes === 1,
    pending: async (limit) => (await db.all<RawRow>(PENDING, [limit])).map(toRow),
    get: async (id) => {
      const r = await db.get<RawRow>(GET, [id]);
      return r ? toRow(r) : null;
    },
    async markProcessed(id, at) {
      await db.run(MARK, ['processed', at, null, id]);
    },
    async markProcessedSeq(seq, at) {
      await db.run(MARK_SEQ, [at, seq]);
    },
    async markFailed(id, at, error) {
      await db.run(MARK, ['failed', at, error.slice(0, 2000), id]);
    },
    async stats() {
      const pendingRow = (await db.get<{ n: number; oldest: number | null }>(PENDING_STATS)) ?? {
        n: 0,
        oldest: null,
      };
      const failed = await count(FAILED_COUNT);
      const total = await count('SELECT COUNT(*) AS n FROM webhook_inbox');
      return {
        pending: pendingRow.n,
        failed,
        processed: Math.max(0, total - pendingRow.n - failed),
        oldestPendingAt: pendingRow.oldest,
      };
    },
    countOfType: (eventType) =>
      count('SELECT COUNT(*) AS n FROM webhook_inbox WHERE event_type = ?', [eventType]),
    async fundedAt(loanId) {
      const times = (await db.all<RawRow>(FUNDED, [loanId])).map(fundedTime);
      return times.length === 0 ? null : Math.min(...times);
    },
    async fundedLoans() {
      const byLoan = new Map<string, number>();
      for (const r of await db.all<RawRow>(ALL_FUNDED)) {
        if (r.loan_id === null) continue;
        const t = fundedTime(r);
        byLoan.set(r.loan_id, Math.min(byLoan.get(r.loan_id) ?? t, t));
      }
      return [...byLoan]
        .map(([loanId, fundedAt]) => ({ loanId, fundedAt }))
        .sort((a, b) => a.fundedAt - b.fundedAt);
    },
    prune: async (beforeMs, limit) => {
      // Rows of loans never released: kept as much longer than others as their retention says.
      const unknownBefore = beforeMs - (UNKNOWN_LOAN_RETENTION_MS - INBOX_PRUNE_AFTER_MS);
      return (
        limit === undefined
          ? await db.run(PRUNE, [beforeMs, unknownBefore])
          : await db.run(PRUNE_SOME, [beforeMs, unknownBefore, limit])
      ).changes;
    },
    capUnknownFunded: async (max) => (await db.run(CAP_UNKNOWN, [max])).changes,
  };
}
