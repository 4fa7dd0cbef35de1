import { comparableDate, parseInstant } from '../lib/calendar.js';
import type { ScratchRow } from '../store/reconcile-scratch.js';
import type { ComparedField, CoreLoanRow, PlatformLoanRow, StoreLoanRow } from './types.js';

/**
 * The compact record each source leaves of a loan, as the reconciliation's working table keeps it
 * (store/reconcile-scratch.ts, one JSON text per side): times are numbers, compared fields are
 * normalised once, on the way in, and only what the classification reads is kept.
 */
export interface StoreRec {
  loanNumber: string | null;
  state: string;
  quarantineReason: string | null;
  centsAmount: number | null;
  wrote: boolean;
  mappingVersion: string | null;
  releasedAt: number | null;
  boardedAt: number | null;
  writtenAt: number | null;
  acknowledgedAt: number | null;
  lastErrorMessage: string | null;
  reviewItems: number;
  createdAt: number;
  updatedAt: number;
}

export type Compared = Record<ComparedField, string | number | null>;

export interface PlatformRec {
  loanNumber: string | null;
  boardedAt: number | null;
  values: Compared;
}

export interface CoreRec {
  coreReference: string;
  mappingVersion: string | null;
  values: Compared;
}

/** One loan as the three sources describe it (a side is absent when that source does not know it). */
export interface Merged {
  s?: StoreRec;
  p?: PlatformRec;
  c?: CoreRec;
}

/** Whether the connector has written the loan to the core (at some point in its life). */
export function connectorWrote(s: StoreLoanRow): boolean {
  return (
    s.state === 'written' || s.state === 'acknowledged' || s.writtenAt !== null || s.coreReference !== null
  );
}

export function storeRec(s: StoreLoanRow): StoreRec {
  return {
    loanNumber: s.loanNumber,
    state: s.state,
    quarantineReason: s.quarantineReason,
    centsAmount: s.centsAmount,
    wrote: connectorWrote(s),
    mappingVersion: s.mappingVersion,
    releasedAt: parseInstant(s.releasedAtIso),
    boardedAt: parseInstant(s.boardedAtIso),
    writtenAt: s.writtenAt,
    acknowledgedAt: s.acknowledgedAt,
    // Only open items need their error text.
    lastErrorMessage: s.state === 'acknowledged' ? null : s.lastErrorMessage,
    reviewItems: s.reviewItems ?? 0,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

/**
 * Normalises compared values (dates in the bank zone, codes trimmed, frequency lower-case); caches date
 * conversions.
 */
export class ValueNormaliser {
  /** Bounded: past this many distinct raw dates, conversions are no longer cached. */
  private static readonly MAX_CACHED = 50_000;
  private readonly dates = new Map<string, string>();

  constructor(private readonly timeZone: string) {}

  values(r: PlatformLoanRow | CoreLoanRow): Compared {
    return {
      centsAmount: r.centsAmount,
      bpsRate: r.bpsRate,
      maturityDate: this.date(r.maturityDate),
      firstPaymentDate: this.date(r.firstPaymentDate),
      paymentFrequency: r.paymentFrequency === null ? null : r.paymentFrequency.trim().toLowerCase(),
      productId: r.productId === null ? null : r.productId.trim(),
    };
  }

  private date(raw: string | null): string | null {
    if (raw === null) return null;
    let d = this.dates.get(raw);
    if (d === undefined) {
      d = comparableDate(raw, this.timeZone);
      if (this.dates.size < ValueNormaliser.MAX_CACHED) this.dates.set(raw, d);
    }
    return d;
  }

  platformRec(p: PlatformLoanRow): PlatformRec {
    return { loanNumber: p.loanNumber, boardedAt: parseInstant(p.boardedAt), values: this.values(p) };
  }

  coreRec(c: CoreLoanRow): CoreRec {
    return { coreReference: c.coreReference, mappingVersion: c.mappingVersion, values: this.values(c) };
  }
}

/** A working-table row back into its three sides. */
export function mergedOf(row: Pick<ScratchRow, 's' | 'p' | 'c'>): Merged {
  const m: Merged = {};
  if (row.s !== null) m.s = JSON.parse(row.s) as StoreRec;
  if (row.p !== null) m.p = JSON.parse(row.p) as PlatformRec;
  if (row.c !== null) m.c = JSON.parse(row.c) as CoreRec;
  return m;
}

/** The loan's amount on a platform or core side, when it is known. */
export function centsOf(r: PlatformRec | CoreRec | undefined): number | null {
  const v = r?.values.centsAmount;
  return typeof v === 'number' ? v : null;
}
