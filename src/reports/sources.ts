import type { CoreLoanRecord, CoreSystem } from '../core/port.js';
import type { PlatformApi } from '../platform/api.js';
import type { QueueItem } from '../contract/schemas.js';
import type { ReportReads } from '../store/index.js';
import type { ReconcileSources } from './compute.js';
import type { CoreLoanRow, PlatformLoanRow } from './types.js';

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

export interface SourceDeps {
  platform: PlatformApi;
  reads: ReportReads;
  core: CoreSystem;
  since: string | null;
  signal?: AbortSignal;
  platformStats?: PlatformWalkStats;
}

/** Wires the platform client, the state database and the core into reconciliation sources. */
export function createReconcileSources(deps: SourceDeps): ReconcileSources {
  const { reads, core, since } = deps;
  const scan = reads.loanScan(since);
  const listLoans = core.listLoans?.bind(core);
  return {
    storeCount: () => scan.count(),
    storeRows: () => scan.rows(),
    storeKnows: (id) => scan.knows(id),
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
    reviewItems: (id, limit) => scan.reviewItems(id, limit),
    funded: async () => {
      const rows = await reads.fundedLoans();
      return rows.length === 0 ? null : rows;
    },
  };
}
