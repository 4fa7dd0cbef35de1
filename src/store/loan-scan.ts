import type { Db } from './db.js';
import { redactForStorage } from '../lib/redact.js';

/**
 * Reads the `loans` table for reconciliation: a count, the rows in keyset pages, and membership,
 * limited by `since` (ISO) when given.
 */
export interface LoanScanRow {
  id: string;
  loanNumber: string | null;
  state: string;
  quarantineReason: string | null;
  centsAmount: number | null;
  productId: string | null;
  coreReference: string | null;
  mappingVersion: string | null;
  fundedAtIso: string | null;
  releasedAtIso: string | null;
  boardedAtIso: string | null;
  writtenAt: number | null;
  acknowledgedAt: number | null;
  lastErrorCode: string | null;
  lastErrorMessage: string | null;
  reviewItems: number;
  createdAt: number;
  updatedAt: number;
}

/** One review item as the loan history keeps it (message already redacted for storage). */
export interface StoredReviewItem {
  code: string;
  field: string;
  message: string;
  /** Mapping file:line:column, or null when the event did not record it. */
  at: string | null;
}

export interface LoanScan {
  count(): number;
  rows(): Generator<LoanScanRow>;
  knows(id: string): boolean;
  /**
   * The review items of the loan's latest mapping (the newest event whose detail carries a
   * `warnings` list: a board's `warning` event or a reboard's `ops` event), at most `limit`.
   */
  reviewItems(id: string, limit: number): StoredReviewItem[];
}

const text = (v: unknown): string => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : '');

/** Review items from an event detail (JSON text); anything unreadable is left out. */
export function reviewItemsFromDetail(detail: string | null, limit: number): StoredReviewItem[] {
  if (detail === null) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(detail);
  } catch {
    return [];
  }
  const warnings = (parsed as { warnings?: unknown } | null)?.warnings;
  if (!Array.isArray(warnings)) return [];
  return warnings.slice(0, limit).map((w: unknown) => {
    const r = (w ?? {}) as Record<string, unknown>;
    // Stored redacted already; redacted again on the way out, as the loan history is shown.
    return { code: text(r['code']), field: redactForStorage(text(r['field'])), message: redactForStorage(text(r['message'])), at: typeof r['at'] === 'string' ? r['at'] : null };
  });
}

interface RawStoreRow {
  id: string;
  loan_number: string | null;
  state: string;
  quarantine_reason: string | null;
  cents_amount: number | null;
  product_id: string | null;
  core_reference: string | null;
  mapping_version: string | null;
  funded_at_iso: string | null;
  released_at_iso: string | null;
  boarded_at_iso: string | null;
  written_at: number | null;
  acknowledged_at: number | null;
  last_error_code: string | null;
  last_error_message: string | null;
  review_items: number | null;
  created_at: number;
  updated_at: number;
}

const STORE_COLUMNS = `id, loan_number, state, quarantine_reason, cents_amount, product_id, core_reference, mapping_version,
  funded_at_iso, released_at_iso, boarded_at_iso, written_at, acknowledged_at, last_error_code, last_error_message,
  review_items, created_at, updated_at`;

/** Open items are always in scope; acknowledged ones only when acknowledged since the bound. */
const SINCE_FILTER = `(state != 'acknowledged' OR acknowledged_at >= @sinceMs OR boarded_at_iso >= @sinceIso)`;

/** Rows per keyset page of the store walk. */
const STORE_PAGE = 2000;

function toScanRow(r: RawStoreRow): LoanScanRow {
  return {
    id: r.id,
    loanNumber: r.loan_number,
    state: r.state,
    quarantineReason: r.quarantine_reason,
    centsAmount: r.cents_amount,
    productId: r.product_id,
    coreReference: r.core_reference,
    mappingVersion: r.mapping_version,
    fundedAtIso: r.funded_at_iso,
    releasedAtIso: r.released_at_iso,
    boardedAtIso: r.boarded_at_iso,
    writtenAt: r.written_at,
    acknowledgedAt: r.acknowledged_at,
    lastErrorCode: r.last_error_code,
    lastErrorMessage: r.last_error_message,
    reviewItems: r.review_items ?? 0,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export function createLoanScan(db: Db, since: string | null): LoanScan {
  const filter = since === null ? '1 = 1' : SINCE_FILTER;
  const params = since === null ? {} : { sinceMs: Date.parse(since), sinceIso: since };
  const knows = db.prepare<[string], { one: number }>('SELECT 1 AS one FROM loans WHERE id = ?');
  // Only loans boarded with review items are asked about: one indexed look-up each.
  const lastWarnings = db.prepare<[string], { detail: string | null }>(
    `SELECT detail FROM loan_events WHERE loan_id = ? AND detail LIKE '%"warnings":[%' ORDER BY seq DESC LIMIT 1`,
  );
  return {
    count: () => (db.prepare(`SELECT COUNT(*) AS n FROM loans WHERE ${filter}`).get(params) as { n: number }).n,
    /**
     * Keyset pages, each read whole: the daemon shares this connection with the pipeline, and an
     * iterator held open across awaits would make its statements fail ("connection is busy").
     */
    *rows() {
      const page = db.prepare<Record<string, unknown>, RawStoreRow>(
        `SELECT ${STORE_COLUMNS} FROM loans WHERE ${filter} AND id > @after ORDER BY id LIMIT ${STORE_PAGE}`,
      );
      let after = '';
      for (;;) {
        const rows = page.all({ ...params, after });
        for (const r of rows) yield toScanRow(r);
        if (rows.length < STORE_PAGE) return;
        after = (rows[rows.length - 1] as RawStoreRow).id;
      }
    },
    knows: (id) => knows.get(id) !== undefined,
    reviewItems: (id, limit) => reviewItemsFromDetail(lastWarnings.get(id)?.detail ?? null, limit),
  };
}
