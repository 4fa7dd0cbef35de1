import type { LoanScanRow } from '../store/loan-scan.js';
import type { BatchTieSection } from './batches.js';
import type { ImagingTieSection } from './imaging.js';
import type { CustomerSection } from './customers.js';
import type { CanonicalLoanFields } from '../core/port.js';

/**
 * Compact per-loan rows that reconciliation works on. Sources are reduced to these as they stream
 * in, so 100k loans cost a few tens of MB instead of full platform payloads.
 */

/**
 * The fields compared platform vs core: the core port's canonical fields, every one present
 * (null when unknown), so a field added there is compared on both sides.
 */
export type ComparedLoanFields = {
  [K in keyof CanonicalLoanFields]-?: Exclude<CanonicalLoanFields[K], undefined>;
};

/** Platform side: one boarded loan (boarding-queue item with boarded=true). */
export interface PlatformLoanRow extends ComparedLoanFields {
  id: string;
  loanNumber: string | null;
  releasedAt: string | null;
  boardedAt: string | null;
}

/**
 * Connector side: one row of the `loans` table as the store's scan reads it. Review items may be
 * absent (sources a test or benchmark builds by hand): absent = 0.
 */
export type StoreLoanRow = Omit<LoanScanRow, 'reviewItems'> & { reviewItems?: number };

/** Core side: what the core holds for one loan, in platform units (see CoreLoanRecord). */
export interface CoreLoanRow extends ComparedLoanFields {
  id: string;
  coreReference: string;
  mappingVersion: string | null;
}

/** A loan.funded webhook as recorded by the receiver. */
export interface FundedRow {
  loanId: string;
  /** Epoch ms. */
  fundedAt: number;
}

export const EXCEPTION_REASONS = [
  'acknowledged_missing_in_core',
  'in_core_not_acknowledged',
  'quarantined',
  'funded_not_released',
  'field_mismatch',
  'acknowledged_unknown_to_connector',
  'in_core_unknown_to_connector',
  'state_mismatch',
  'stuck_pending',
  'written_missing_in_core',
  'boarded_with_review_items',
] as const;
export type ExceptionReason = (typeof EXCEPTION_REASONS)[number];

export type AgeBucket = '0-1' | '2-5' | '>5';
export const AGE_BUCKETS: readonly AgeBucket[] = ['0-1', '2-5', '>5'];

export const COMPARED_FIELDS = [
  'centsAmount',
  'bpsRate',
  'maturityDate',
  'firstPaymentDate',
  'paymentFrequency',
  'productId',
] as const;
export type ComparedField = (typeof COMPARED_FIELDS)[number];

/** A review item of a loan boarded with review items (code, field, message, mapping file:line). */
export interface ReportReviewItem {
  code: string;
  field: string;
  message: string;
  /** Mapping file:line:column, or null when not recorded. */
  at: string | null;
}

export interface ReportException {
  reason: ExceptionReason;
  loanId: string;
  loanNumber: string | null;
  /** Only for field_mismatch. */
  field: ComparedField | null;
  platformValue: string | null;
  coreValue: string | null;
  /** The connector's state for the loan, or null when the connector never saw it. */
  connectorState: string | null;
  centsAmount: number | null;
  /** ISO time the exception's clock started (boarded, written, quarantined, funded…). */
  since: string | null;
  ageBusinessDays: number;
  ageBucket: AgeBucket;
  detail: string;
  /**
   * Only for boarded_with_review_items: the first items (bounded per loan) … Given to the CSV as
   * the exception is found; the exceptions kept for report.json and report.html leave them out
   * (memory per exception stays small) and the renderers look them up again (ReviewItemsLookup).
   */
  reviewItems?: ReportReviewItem[];
  /** … and how many more the loan has. */
  reviewItemsMore?: number;
}

/** A loan's review items as printed (bounded per loan), looked up when a report file is rendered. */
export type ReviewItemsLookup = (loanId: string) => ReportReviewItem[];

/** The review items to print for an exception: its own, or looked up; undefined when it has none. */
export function reviewItemsOf(
  e: ReportException,
  lookup?: ReviewItemsLookup,
): ReportReviewItem[] | undefined {
  if (e.reviewItems !== undefined) return e.reviewItems;
  if (e.reviewItemsMore === undefined || lookup === undefined) return undefined;
  return lookup(e.loanId);
}

export interface Amount {
  count: number;
  cents: number;
  /** Loans counted whose amount is unknown (counted, contributing 0 cents). */
  unknownAmount: number;
}

export interface ControlTotals {
  /** Connector ledger: every loan taken from the boarding queue, by state. */
  released: Amount;
  pending: Amount;
  writtenAwaitingAck: Amount;
  acknowledged: Amount;
  quarantined: Amount;
  skipped: Amount;
  /** States this report does not know (a newer connector wrote them). */
  otherState: Amount;
  /** Connector rows whose core write happened (written, acknowledged, or retry after a write). */
  connectorWritten: Amount;
  /** Loans the core holds from the connector. */
  writtenToCore: Amount;
  /** Loans the platform lists as boarded (acknowledged). */
  acknowledgedOnPlatform: Amount;
}

export interface TieOutCheck {
  id: 'ledger' | 'core' | 'platform';
  title: string;
  /** Human-readable equation, e.g. "released = pending + written + acknowledged + quarantined + skipped". */
  equation: string;
  left: { label: string; count: number; cents: number };
  right: { label: string; count: number; cents: number };
  differenceCount: number;
  differenceCents: number;
  ties: boolean;
  /** Exception reasons that explain a difference on this line. */
  explainedBy: ExceptionReason[];
}

export interface ReportHeader {
  runId: string;
  /** ISO UTC. */
  asOf: string;
  /** As-of time rendered in the bank's time zone. */
  asOfLocal: string;
  timeZone: string;
  connectorVersion: string;
  /** Mapping versions seen in the store and core, with loan counts. */
  mappingVersions: Array<{ version: string; loans: number }>;
  environment: string;
  platformOrigin: string | null;
  coreAdapter: string;
  /** --since lower bound, or null for a full reconciliation. */
  since: string | null;
  fundedNotReleasedDays: number;
  ageBasis: string;
}

export interface AgingSummary {
  /** reason → bucket → count. */
  byReason: Partial<Record<ExceptionReason, Record<AgeBucket, number>>>;
  totals: Record<AgeBucket, number>;
}

export interface ReconciliationSummary {
  header: ReportHeader;
  totals: ControlTotals;
  tieOut: TieOutCheck[];
  aging: AgingSummary;
  exceptionCount: number;
  exceptionsByReason: Partial<Record<ExceptionReason, number>>;
  /** Notes on checks that could not run (e.g. no funded events recorded). */
  notes: string[];
  /** File core batches tied to the boarded loans (batches.ts); absent without batches. */
  batches?: BatchTieSection;
  /** Documents listed = written to the core = exported to imaging (imaging.ts); absent without the export. */
  imaging?: ImagingTieSection;
  /** New and matched customers per day (customer match, customers.ts); absent with injected sources. */
  customers?: CustomerSection;
}

export interface ReconcileProgress {
  phase: 'store' | 'platform' | 'core' | 'compare' | 'write';
  done: number;
  /** Known for phases whose size is known up front. */
  total: number | null;
}
