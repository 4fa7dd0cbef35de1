import { WEBHOOK_EVENTS } from '../contract/schemas.js';

/**
 * A loan's webhook history: one `loan_events` row (kind `webhook`, actor `platform`, reason = the
 * event type) per documented delivery that names the loan, written when the delivery is processed,
 * whether or not the connector has the loan yet (a loan is usually funded before it is released):
 * `loan_events` is ordered by seq, so that history comes before the loan's first transition.
 */

const DOCUMENTED: ReadonlySet<string> = new Set(WEBHOOK_EVENTS);

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
export function webhookHistoryEntry(
  row: HistoryRow,
  fundedAt: number | null,
): { at: number; detail: string } {
  const detail: Record<string, unknown> = { webhookId: row.webhookId, occurredAt: row.occurredAt };
  // extractFundedAt bounds the time to years 1970–9999, so it always formats.
  if (fundedAt !== null) detail['fundedAt'] = new Date(fundedAt).toISOString();
  const data = row.payload['data'];
  if (row.eventType === 'loan.status_changed' && data !== null && typeof data === 'object') {
    const d = data as Record<string, unknown>;
    for (const k of ['status', 'previousStatus', 'from', 'to'])
      if (typeof d[k] === 'string') detail[k] = d[k];
  }
  return { at: row.occurredAt ?? row.receivedAt, detail: JSON.stringify(detail) };
}

export const INSERT_WEBHOOK_HISTORY_SQL =
  "INSERT INTO loan_events (loan_id, at, kind, actor, reason, detail) VALUES (?, ?, 'webhook', 'platform', ?, ?)";
