import type { StoreDb } from './sql.js';
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
  count(): Promise<number>;
  rows(): AsyncGenerator<LoanScanRow>;
  knows(id: string): Promise<boolean>;
  /**
   * The review items of the loan's latest mapping (the newest event whose detail carries a
   * `warnings` list: a board's `warning` event or a reboard's `ops` event), at most `limit`.
   */
  reviewItems(id: string, limit: number): Promise<StoredReviewItem[]>;
}

const text = (v: unknown): string =>
  typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : '';

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
    return {
      code: text(r['code']),
      field: redactForStorage(text(r['field'])),
      message: redactForStorage(text(r['message'])),
      at: typeof r['at'] === 'string' ? r['at'] : null,
    };
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

const STORE_COLUMNS = `id, loan_number, state, quarantine_reason, cents_amount, product_id, core_reference,
  mapping_version, funded_at_iso, released_at_iso, boarded_at_iso, written_at, acknowledged_at,
  last_error_code, last_error_message, review_items, created_at, updated_at`;

/** Open items are always in scope; acknowledged ones only when acknowledged since the bound. */
const SINCE_FILTER = `(state != 'acknowledged' OR acknowledged_at >= ? OR boarded_at_iso >= ?)`;

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

export function createLoanScan(db: StoreDb, since: string | null): LoanScan {
  const filter = since === null ? '1 = 1' : SINCE_FILTER;
  const params: unknown[] = since === null ? [] : [Date.parse(since), since];
  return {
    count: async () =>
      Number(
        (await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM loans WHERE ${filter}`, params))?.n ?? 0,
      ),
    // Keyset pages: memory is one page whatever the store holds, and no read transaction is held
    // open between pages (the daemon keeps boarding while a report streams).
    rows: async function* () {
      const page = `SELECT ${STORE_COLUMNS} FROM loans WHERE ${filter} AND id > ? ORDER BY id LIMIT ${STORE_PAGE}`;
      let after = '';
      for (;;) {
        const rows = await db.all<RawStoreRow>(page, [...params, after]);
        for (const r of rows) yield toScanRow(r);
        if (rows.length < STORE_PAGE) return;
        after = (rows[rows.length - 1] as RawStoreRow).id;
      }
    },
    knows: async (id) =>
      (await db.get<{ one: number }>('SELECT 1 AS one FROM loans WHERE id = ?', [id])) !== undefined,
    reviewItems: async (id, limit) =>
      reviewItemsFromDetail(
        (
          await db.get<{ detail: string | null }>(
            `SELECT detail FROM loan_events WHERE loan_id = ? AND ` +
              `detail LIKE '%"warnings":[%' ORDER BY seq DESC LIMIT 1`,
            [id],
          )
        )?.detail ?? null,
        limit,
      ),
  };
}
