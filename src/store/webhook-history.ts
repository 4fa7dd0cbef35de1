import { WEBHOOK_EVENTS } from '../platform/schemas.js';
import type { Db } from './db.js';
import { extractFundedAt } from '../platform/webhook-payload.js';

/**
 * A loan's webhook history: one `loan_events` row (kind `webhook`, actor `platform`, reason = the
 * event type) per documented delivery that names the loan, written when the delivery is processed.
 *
 * One exception: a `loan.funded` delivery for a loan the connector has no row for yet. That is the
 * usual order (a loan is funded before a banker releases it), and such a delivery has no other
 * effect, so writing its history at once was, per delivery, a random insert into loan_events and
 * its loan index: about a quarter of the inbox thread's CPU when loan.funded deliveries arrive at
 * high rates, for loans that may never reach this bank's queue. The inbox keeps the delivery (and
 * its loan.funded rows are indexed by loan for the funded time anyway), so when the pipeline
 * creates the loan's row (store/loans.ts), `copyTo` writes the history of its processed
 * loan.funded deliveries in the same transaction, before the loan's first transition. Pending ones
 * are left to the processing pass, which then sees the loan. Deliveries pruned from the inbox
 * before the loan arrived are not in its history (and their funded time was not needed: pruning
 * keeps loan.funded rows until their time is on a loans row).
 */

const DOCUMENTED: ReadonlySet<string> = new Set(WEBHOOK_EVENTS);
/** The largest epoch ms a JS Date holds (NaN also fails the comparison). */
const MAX_DATE_MS = 8.64e15;

export interface HistoryRow {
  webhookId: string;
  eventType: string;
  occurredAt: number | null;
  receivedAt: number;
  payload: Record<string, unknown>;
}

/** Whether a delivery of this type goes into a loan's history (documented types only). */
export const isHistoryEvent = (eventType: string): boolean => DOCUMENTED.has(eventType);

/** The history entry's `at` and JSON `detail` for a delivery (`fundedAt`: loan.funded only). */
export function webhookHistoryEntry(row: HistoryRow, fundedAt: number | null): { at: number; detail: string } {
  const detail: Record<string, unknown> = { webhookId: row.webhookId, occurredAt: row.occurredAt };
  // parseTime now bounds every time to years 1970–9999, but inbox rows stored before that bound
  // may hold an event time no Date can format, and a history entry must never fail to build: it
  // is written inside the transaction that creates the loan's row.
  if (fundedAt !== null && Math.abs(fundedAt) <= MAX_DATE_MS) detail['fundedAt'] = new Date(fundedAt).toISOString();
  const data = row.payload['data'];
  if (row.eventType === 'loan.status_changed' && data !== null && typeof data === 'object') {
    const d = data as Record<string, unknown>;
    for (const k of ['status', 'previousStatus', 'from', 'to']) if (typeof d[k] === 'string') detail[k] = d[k];
  }
  return { at: row.occurredAt ?? row.receivedAt, detail: JSON.stringify(detail) };
}

export const INSERT_WEBHOOK_HISTORY_SQL = "INSERT INTO loan_events (loan_id, at, kind, actor, reason, detail) VALUES (?, ?, 'webhook', 'platform', ?, ?)";

export interface WebhookHistory {
  /**
   * Writes the history of the loan's processed loan.funded deliveries that it does not have yet
   * (in event-time order). Call inside the transaction that creates the loan's row. Returns the
   * rows written.
   */
  copyTo(loanId: string): number;
}

export function createWebhookHistory(db: Db): WebhookHistory {
  // The partial webhook_inbox_funded index serves the lookup.
  const processed = db.prepare<[string], { webhook_id: string; event_type: string; occurred_at: number | null; received_at: number; payload: string }>(
    `SELECT webhook_id, event_type, occurred_at, received_at, payload FROM webhook_inbox
      WHERE loan_id = ? AND event_type = 'loan.funded' AND status = 'processed'
      ORDER BY COALESCE(occurred_at, received_at) ASC, received_at ASC, webhook_id ASC`,
  );
  // Rows written at processing time (before this scheme every delivery got its row at once) are not written twice.
  const existing = db.prepare<[string], string>("SELECT json_extract(detail, '$.webhookId') FROM loan_events WHERE loan_id = ? AND kind = 'webhook'").pluck();
  const insert = db.prepare(INSERT_WEBHOOK_HISTORY_SQL);
  return {
    copyTo(loanId) {
      const rows = processed.all(loanId);
      if (rows.length === 0) return 0;
      const seen = new Set(existing.all(loanId));
      let written = 0;
      for (const r of rows) {
        if (seen.has(r.webhook_id)) continue;
        let payload: Record<string, unknown> = {};
        try {
          payload = JSON.parse(r.payload) as Record<string, unknown>;
        } catch {
          // Stored by the receiver from verified JSON: only a hand-edited row gets here.
        }
        const row: HistoryRow = { webhookId: r.webhook_id, eventType: r.event_type, occurredAt: r.occurred_at, receivedAt: r.received_at, payload };
        const fundedAt = extractFundedAt({ payload, occurredAt: r.occurred_at ?? r.received_at });
        const entry = webhookHistoryEntry(row, fundedAt);
        insert.run(loanId, entry.at, r.event_type, entry.detail);
        written += 1;
      }
      return written;
    },
  };
}
