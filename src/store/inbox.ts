import { redactPayload } from '../lib/redact.js';
import type { Db } from './db.js';
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
  /** The row's rowid: stable within a transaction (marking by it skips the id index). */
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
  insert(event: InboxDelivery, receivedAt: number): boolean;
  /** Pending rows in event-time order (so one loan's events come in the order they happened). */
  pending(limit: number): InboxRow[];
  get(webhookId: string): InboxRow | null;
  markProcessed(webhookId: string, at: number): void;
  /** markProcessed by `seq`, for rows read in the same transaction. */
  markProcessedSeq(seq: number, at: number): void;
  markFailed(webhookId: string, at: number, error: string): void;
  stats(): InboxStats;
  /** Rows of one event type, any status. */
  countOfType(eventType: string): number;
  /** When the loan was funded according to loan.funded deliveries, or null. */
  fundedAt(loanId: string): number | null;
  /** Every loan a loan.funded delivery named, with its earliest funded time (reconciliation aging). */
  fundedLoans(): FundedLoan[];
  /**
   * Deletes processed rows received before `beforeMs`, except loan.funded rows whose funded time
   * is not yet on a loans row (they are the only record of it). Returns how many were deleted.
   * With `limit`, at most that many, oldest first: a caller deletes in short transactions so the
   * receiver's writes are never held up for long (see the webhook service).
   */
  prune(beforeMs: number, limit?: number): number;
  /** Deletes the oldest processed loan.funded rows of loans the connector does not know, beyond `max`. */
  capUnknownFunded(max: number): number;
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
    seq: r.seq,
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
const INBOX_INSERT_SQL = `INSERT OR IGNORE INTO webhook_inbox (webhook_id, event_type, loan_id, occurred_at, received_at, payload, status)
     VALUES (?, ?, ?, ?, ?, ?, 'pending')`;

type InboxInsertParams = [webhookId: string, eventType: string, loanId: string | null, occurredAt: number, receivedAt: number, payload: string];

/**
 * The parameters of INBOX_INSERT_SQL for one delivery. The
 * payload is stored redacted (redactPayload): whatever the platform puts in a delivery — a full
 * EIN/SSN, a presigned URL, a key — is kept for 30 days, so it gets the same redaction as every
 * other stored value. The fields the connector reads (ids, type, times) pass unchanged.
 */
function inboxInsertParams(event: InboxDelivery, receivedAt: number): InboxInsertParams {
  return [event.webhookId, event.type, event.loanId, event.occurredAt, receivedAt, JSON.stringify(redactPayload(event.payload))];
}

export function createWebhookInbox(db: Db): WebhookInbox {
  const insert = db.prepare(INBOX_INSERT_SQL);
  const pending = db.prepare<[number], RawRow>(
    `SELECT rowid AS seq, * FROM webhook_inbox WHERE status = 'pending'
     ORDER BY COALESCE(occurred_at, received_at) ASC, received_at ASC, webhook_id ASC LIMIT ?`,
  );
  const get = db.prepare<[string], RawRow>('SELECT rowid AS seq, * FROM webhook_inbox WHERE webhook_id = ?');
  const mark = db.prepare('UPDATE webhook_inbox SET status = ?, processed_at = ?, error = ? WHERE webhook_id = ?');
  const markSeq = db.prepare("UPDATE webhook_inbox SET status = 'processed', processed_at = ?, error = NULL WHERE rowid = ?");
  // Counted without reading the table: pending and failed rows from their partial indexes, all
  // rows from the smallest full index (processed = the rest). A GROUP BY status scanned every row
  // of the 30-day inbox on each /metrics scrape, on the receiver's event loop.
  const pendingStats = db.prepare<[], { n: number; oldest: number | null }>(
    "SELECT COUNT(*) AS n, MIN(received_at) AS oldest FROM webhook_inbox WHERE status = 'pending'",
  );
  const failedCount = db.prepare<[], { n: number }>("SELECT COUNT(*) AS n FROM webhook_inbox WHERE status = 'failed'");
  const typeCount = db.prepare<[string], { n: number }>('SELECT COUNT(*) AS n FROM webhook_inbox WHERE event_type = ?');
  const totalCount = db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM webhook_inbox');
  const funded = db.prepare<[string], RawRow>(
    // event_type = 'loan.funded' lets the partial webhook_inbox_funded index serve the lookup.
    "SELECT rowid AS seq, * FROM webhook_inbox WHERE status IN ('pending', 'processed') AND loan_id = ? AND event_type = 'loan.funded'",
  );
  const allFunded = db.prepare<[], RawRow>(
    "SELECT rowid AS seq, * FROM webhook_inbox WHERE event_type = 'loan.funded' AND loan_id IS NOT NULL AND status != 'failed'",
  );
  // A loan.funded row waits for its loan to be released (its funded time goes onto the loan row),
  // but not for ever: past UNKNOWN_LOAN_RETENTION_MS it goes like any other row.
  const prunable = `status = 'processed' AND received_at < ?
       AND (event_type != 'loan.funded' OR loan_id IS NULL
            OR loan_id IN (SELECT id FROM loans WHERE funded_at_iso IS NOT NULL)
            OR received_at < ?)`;
  const prune = db.prepare(`DELETE FROM webhook_inbox WHERE ${prunable}`);
  // Rows are stored in arrival order, so the oldest prunable rows are found near the start.
  const pruneSome = db.prepare(`DELETE FROM webhook_inbox WHERE rowid IN (SELECT rowid FROM webhook_inbox WHERE ${prunable} ORDER BY rowid LIMIT ?)`);
  // Count bound on processed loan.funded rows whose loan the connector does not know: the oldest
  // beyond `max` go (a flood of signed deliveries for invented loans cannot grow the inbox for ever).
  const capUnknown = db.prepare(`DELETE FROM webhook_inbox WHERE rowid IN (
       SELECT rowid FROM webhook_inbox
        WHERE status = 'processed' AND event_type = 'loan.funded' AND loan_id IS NOT NULL
          AND loan_id NOT IN (SELECT id FROM loans)
        ORDER BY rowid DESC LIMIT -1 OFFSET ?)`);
  const fundedTime = (r: RawRow): number => {
    const row = toRow(r);
    return extractFundedAt({ payload: row.payload, occurredAt: row.occurredAt ?? row.receivedAt });
  };
  const insertOne = (event: InboxDelivery, receivedAt: number): boolean => insert.run(...inboxInsertParams(event, receivedAt)).changes === 1;
  return {
    insert: insertOne,
    pending: (limit) => pending.all(limit).map(toRow),
    get: (id) => {
      const r = get.get(id);
      return r ? toRow(r) : null;
    },
    markProcessed(id, at) {
      mark.run('processed', at, null, id);
    },
    markProcessedSeq(seq, at) {
      markSeq.run(at, seq);
    },
    markFailed(id, at, error) {
      mark.run('failed', at, error.slice(0, 2000), id);
    },
    stats() {
      const pendingRow = pendingStats.get() ?? { n: 0, oldest: null };
      const failed = failedCount.get()?.n ?? 0;
      const total = totalCount.get()?.n ?? 0;
      return { pending: pendingRow.n, failed, processed: Math.max(0, total - pendingRow.n - failed), oldestPendingAt: pendingRow.oldest };
    },
    countOfType: (eventType) => typeCount.get(eventType)?.n ?? 0,
    fundedAt(loanId) {
      const times = funded.all(loanId).map(fundedTime);
      return times.length === 0 ? null : Math.min(...times);
    },
    fundedLoans() {
      const byLoan = new Map<string, number>();
      for (const r of allFunded.all()) {
        if (r.loan_id === null) continue;
        const t = fundedTime(r);
        byLoan.set(r.loan_id, Math.min(byLoan.get(r.loan_id) ?? t, t));
      }
      return [...byLoan].map(([loanId, fundedAt]) => ({ loanId, fundedAt })).sort((a, b) => a.fundedAt - b.fundedAt);
    },
    prune: (beforeMs, limit) => {
      // Rows of loans never released: kept as much longer than others as their retention says.
      const unknownBefore = beforeMs - (UNKNOWN_LOAN_RETENTION_MS - INBOX_PRUNE_AFTER_MS);
      return (limit === undefined ? prune.run(beforeMs, unknownBefore) : pruneSome.run(beforeMs, unknownBefore, limit)).changes;
    },
    capUnknownFunded: (max) => capUnknown.run(max).changes,
  };
}
