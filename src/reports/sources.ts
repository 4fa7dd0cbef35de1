import type { CoreLoanRecord, CoreSystem } from '../core/port.js';
import type { PlatformApi } from '../platform/api.js';
import type { QueueItem } from '../platform/schemas.js';
import type { Db } from '../store/db.js';
import { createWebhookInbox } from '../webhooks/inbox.js';
import type { ReconcileSources } from './compute.js';
import type { CoreLoanRow, PlatformLoanRow, StoreLoanRow } from './types.js';

/** Adapters from the connector's real sources to the compact rows reconciliation works on. */

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
const int = (v: unknown): number | null => (typeof v === 'number' && Number.isSafeInteger(v) ? v : null);

export function platformRow(item: QueueItem): PlatformLoanRow {
  return {
    id: item.id,
    loanNumber: str(item.loanNumber),
    centsAmount: int(item.centsAmount),
    bpsRate: int(item.bpsRate),
    maturityDate: str(item.maturityDate),
    firstPaymentDate: str(item.firstPaymentDate),
    paymentFrequency: str(item.paymentFrequency),
    productId: str(item.product?.id),
    releasedAt: str(item.boarding?.releasedAt),
    boardedAt: str(item.boarding?.boardedAt),
  };
}

export function coreRow(rec: CoreLoanRecord): CoreLoanRow {
  const f = rec.fields;
  return {
    id: rec.loanExternalId,
    coreReference: rec.coreReference,
    mappingVersion: rec.mappingVersion,
    centsAmount: int(f.centsAmount),
    bpsRate: int(f.bpsRate),
    maturityDate: str(f.maturityDate),
    firstPaymentDate: str(f.firstPaymentDate),
    paymentFrequency: str(f.paymentFrequency),
    productId: str(f.productId),
  };
}

export interface PlatformWalkStats {
  pages: number;
  /** Boarded items the platform sent that failed validation (not reconciled). */
  invalid: number;
}

/** Walks boarded=true (cursor pages); only compact rows leave this function. */
export async function* platformBoardedRows(
  platform: PlatformApi,
  opts: { since: string | null; signal?: AbortSignal; stats?: PlatformWalkStats },
): AsyncGenerator<PlatformLoanRow> {
  const pages = platform.boardingQueue({
    boarded: true,
    ...(opts.since !== null ? { boardedSince: opts.since } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  for await (const page of pages) {
    if (opts.stats) {
      opts.stats.pages += 1;
      opts.stats.invalid += page.invalid.length;
    }
    for (const item of page.items) {
      // boarded=true should only return boarded loans; a platform that ignores the filter must not
      // make released-but-pending loans look acknowledged.
      if (item.boarding?.boarded === false) continue;
      yield platformRow(item);
    }
  }
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

function toStoreRow(r: RawStoreRow): StoreLoanRow {
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

export interface SourceDeps {
  platform: PlatformApi;
  db: Db;
  core: CoreSystem;
  since: string | null;
  signal?: AbortSignal;
  platformStats?: PlatformWalkStats;
}

/** Wires the platform client, the state database and the core into reconciliation sources. */
export function createReconcileSources(deps: SourceDeps): ReconcileSources {
  const { db, core, since } = deps;
  const filter = since === null ? '1 = 1' : SINCE_FILTER;
  const params = since === null ? {} : { sinceMs: Date.parse(since), sinceIso: since };
  const knows = db.prepare<[string], { one: number }>('SELECT 1 AS one FROM loans WHERE id = ?');
  const listLoans = core.listLoans?.bind(core);
  return {
    storeCount: () => (db.prepare(`SELECT COUNT(*) AS n FROM loans WHERE ${filter}`).get(params) as { n: number }).n,
    /**
     * Keyset pages, each read whole: the daemon shares this connection with the pipeline, and an
     * iterator held open across awaits would make its statements fail ("connection is busy").
     */
    *storeRows() {
      const page = db.prepare<Record<string, unknown>, RawStoreRow>(
        `SELECT ${STORE_COLUMNS} FROM loans WHERE ${filter} AND id > @after ORDER BY id LIMIT ${STORE_PAGE}`,
      );
      let after = '';
      for (;;) {
        const rows = page.all({ ...params, after });
        for (const r of rows) yield toStoreRow(r);
        if (rows.length < STORE_PAGE) return;
        after = (rows[rows.length - 1] as RawStoreRow).id;
      }
    },
    storeKnows: (id) => knows.get(id) !== undefined,
    platformBoarded: () =>
      platformBoardedRows(deps.platform, {
        since,
        ...(deps.signal ? { signal: deps.signal } : {}),
        ...(deps.platformStats ? { stats: deps.platformStats } : {}),
      }),
    ...(listLoans
      ? {
          async *coreList() {
            for await (const rec of listLoans()) yield coreRow(rec);
          },
        }
      : {}),
    coreFind: async (id) => {
      const rec = await core.findLoan(id);
      return rec === null ? null : coreRow(rec);
    },
    funded: () => {
      const rows = createWebhookInbox(db).fundedLoans();
      return rows.length === 0 ? null : rows;
    },
  };
}
