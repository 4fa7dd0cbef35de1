import { openReconcileScratch, type ReconcileScratch } from '../store/reconcile-scratch.js';
import { classifyFunded, classifyLoan } from './classify.js';
import { checkAborted, gatherCore, gatherPlatform, gatherStore, type GatherContext } from './gather.js';
import { ValueNormaliser, mergedOf } from './merged.js';
import { ReconcileTally, buildTieOut } from './tally.js';
import type {
  AgingSummary,
  ControlTotals,
  CoreLoanRow,
  ExceptionReason,
  FundedRow,
  PlatformLoanRow,
  ReconcileProgress,
  ReportException,
  ReportReviewItem,
  StoreLoanRow,
  TieOutCheck,
} from './types.js';

export { REVIEW_ITEMS_PER_LOAN } from './classify.js';
export { connectorWrote } from './merged.js';
export { ageBucket, buildTieOut } from './tally.js';

/**
 * Reconciliation logic, free of I/O but for a private working table: sources come in as (async)
 * iterables of compact rows, results go out through callbacks and the returned totals. Phases:
 * gather (connector, platform, core: gather.ts) into the working table, classify each loan
 * (classify.ts) while the tally (tally.ts) adds up totals and exceptions, then the loans only a
 * loan.funded event knows. Memory stays flat in the number of loans: the merged records live in
 * the working table (store/reconcile-scratch.ts), exceptions are streamed to `onException`.
 */
export interface ReconcileSources {
  /** Connector rows in scope (all rows, or with --since only those open or acknowledged since). */
  storeRows(): Iterable<StoreLoanRow> | AsyncIterable<StoreLoanRow>;
  /** Count of storeRows (for progress), if cheap to know. */
  storeCount?(): number | Promise<number>;
  /** Whether the connector knows a loan at all (rows outside the --since scope included). */
  storeKnows(id: string): boolean | Promise<boolean>;
  /** Boarded loans on the platform (boarded=true, boardedSince when --since). */
  platformBoarded(): AsyncIterable<PlatformLoanRow>;
  /** Every loan in the core, when the core can list; otherwise the loans are looked up one by one. */
  coreList?(): AsyncIterable<CoreLoanRow>;
  coreFind(id: string): Promise<CoreLoanRow | null>;
  /** loan.funded events as recorded; null when the store has no record of them (check skipped). */
  funded(): Iterable<FundedRow> | null | Promise<Iterable<FundedRow> | null>;
  /** The review items of a loan boarded with review items, at most `limit` (absent: not listed). */
  reviewItems?(id: string, limit: number): ReportReviewItem[] | Promise<ReportReviewItem[]>;
}

export interface ReconcileOptions {
  asOfMs: number;
  timeZone: string;
  fundedNotReleasedDays: number;
  /** ISO lower bound of a partial run (platform boardedSince), or null. */
  since: string | null;
  signal?: AbortSignal;
  onProgress?: (p: ReconcileProgress) => void;
  /** Called for each exception as it is found (stream it to the report files). */
  onException?: (e: ReportException) => void | Promise<void>;
  /** Exceptions kept in the outcome, in report order (the rest go to onException only). Default: all. */
  keepExceptions?: number;
  /** Parallel core look-ups when the core cannot list. */
  coreLookupConcurrency?: number;
}

export interface ReconcileOutcome {
  totals: ControlTotals;
  tieOut: TieOutCheck[];
  aging: AgingSummary;
  /** The first `keepExceptions` exceptions (all by default), without their review items. */
  exceptions: ReportException[];
  exceptionCount: number;
  exceptionsByReason: Partial<Record<ExceptionReason, number>>;
  mappingVersions: Array<{ version: string; loans: number }>;
  notes: string[];
  loansSeen: number;
}

/** Working-table rows per page of the classification walk. */
const CLASSIFY_PAGE = 1000;

export async function computeReconciliation(
  sources: ReconcileSources,
  opts: ReconcileOptions,
): Promise<ReconcileOutcome> {
  const scratch = openReconcileScratch();
  try {
    const ctx: GatherContext = {
      scratch,
      normaliser: new ValueNormaliser(opts.timeZone),
      progress: opts.onProgress ?? (() => undefined),
      signal: opts.signal,
    };
    await gatherStore(sources, ctx);
    await gatherPlatform(sources, ctx);
    const notes = await gatherCore(sources, ctx, {
      since: opts.since,
      ...(opts.coreLookupConcurrency !== undefined ? { concurrency: opts.coreLookupConcurrency } : {}),
    });
    const tally = new ReconcileTally({
      asOfMs: opts.asOfMs,
      timeZone: opts.timeZone,
      ...(opts.onException ? { onException: opts.onException } : {}),
      ...(opts.keepExceptions !== undefined ? { keepExceptions: opts.keepExceptions } : {}),
    });
    const loansSeen = scratch.size();
    await classifyAll(scratch, sources, tally, ctx, loansSeen);
    if (!(await classifyFundedOnly(scratch, sources, tally, opts.fundedNotReleasedDays))) {
      notes.push(
        'No loan.funded events are recorded in the store: the "funded but not released" check did not run.',
      );
    }
    ctx.progress({ phase: 'compare', done: loansSeen, total: loansSeen });
    return {
      totals: tally.totals,
      tieOut: buildTieOut(tally.totals),
      aging: tally.agingSummary(),
      exceptions: tally.exceptions,
      exceptionCount: tally.exceptionCount,
      exceptionsByReason: tally.byReason,
      mappingVersions: tally.mappingVersions(),
      notes,
      loansSeen,
    };
  } finally {
    scratch.close();
  }
}

/** Phase 4: every loan any source named, in the order they first appeared: totals and exceptions. */
async function classifyAll(
  scratch: ReconcileScratch,
  sources: ReconcileSources,
  tally: ReconcileTally,
  ctx: GatherContext,
  total: number,
): Promise<void> {
  const reviewItems = sources.reviewItems?.bind(sources);
  let afterSeq = 0;
  let n = 0;
  for (;;) {
    const rows = scratch.page(afterSeq, CLASSIFY_PAGE);
    for (const row of rows) {
      const m = mergedOf(row);
      tally.count(m);
      await classifyLoan(row.id, m, tally, reviewItems);
      if (++n % 5000 === 0) {
        checkAborted(ctx.signal);
        ctx.progress({ phase: 'compare', done: n, total });
      }
    }
    const last = rows[rows.length - 1];
    if (last === undefined || rows.length < CLASSIFY_PAGE) return;
    afterSeq = last.seq;
  }
}

/**
 * Phase 5: funded but never released: loans only loan.funded webhooks know about. False when the
 * store has no record of loan.funded events (the check could not run).
 */
async function classifyFundedOnly(
  scratch: ReconcileScratch,
  sources: ReconcileSources,
  tally: ReconcileTally,
  fundedNotReleasedDays: number,
): Promise<boolean> {
  const funded = await sources.funded();
  if (funded === null) return false;
  for (const f of funded) {
    const row = scratch.get(f.loanId);
    // Any connector row means the loan came through the boarding queue, i.e. it was released.
    if (row?.s != null || row?.p != null || (await sources.storeKnows(f.loanId))) continue;
    await classifyFunded(
      f.loanId,
      f.fundedAt,
      row === undefined ? {} : mergedOf(row),
      fundedNotReleasedDays,
      tally,
    );
  }
  return true;
}
