import type { CanonicalLoanFields } from '../port.js';
import { decimalToCents, percentToBps } from '../units.js';

/** Fineract values back to platform units, for reconciliation (integer/string math: ../units.ts). */

/** Fineract's `[2025, 3, 14]` (or an ISO string) → `2025-03-14`. */
export function fineractDate(value: unknown): string | null {
  if (Array.isArray(value) && value.length >= 3 && value.slice(0, 3).every((v) => Number.isInteger(v))) {
    const [y, m, d] = value as number[];
    return `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
  }
  if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}/.test(value)) return value.slice(0, 10);
  return null;
}

const FREQUENCIES: Record<string, string> = {
  '1:1': 'weekly',
  '2:1': 'biweekly',
  '1:2': 'monthly',
  '3:2': 'quarterly',
  '6:2': 'semi-annual',
  '1:3': 'annual',
};

/** repaymentEvery + repaymentFrequencyType (0 days, 1 weeks, 2 months, 3 years) → platform frequency. */
export function platformFrequency(
  repaymentEvery: unknown,
  frequencyType: unknown,
  numberOfRepayments: unknown,
): string | null {
  const type =
    typeof frequencyType === 'object' && frequencyType !== null
      ? (frequencyType as { id?: unknown }).id
      : frequencyType;
  if (numberOfRepayments === 1) return 'lump sum';
  return FREQUENCIES[`${String(repaymentEvery)}:${String(type)}`] ?? null;
}

/** A Fineract loan (GET /loans/{id}) in platform units. Product ids are core codes: not compared. */
export function canonicalFromFineractLoan(loan: Record<string, unknown>): CanonicalLoanFields {
  const timeline = (loan['timeline'] ?? {}) as Record<string, unknown>;
  return {
    centsAmount: decimalToCents(loan['principal'] ?? loan['approvedPrincipal'] ?? loan['proposedPrincipal']),
    bpsRate: percentToBps(loan['annualInterestRate'] ?? loan['interestRatePerPeriod']),
    maturityDate: fineractDate(timeline['expectedMaturityDate'] ?? loan['expectedMaturityDate']),
    firstPaymentDate: fineractDate(
      loan['repaymentsStartingFromDate'] ?? loan['expectedFirstRepaymentOnDate'],
    ),
    paymentFrequency: platformFrequency(
      loan['repaymentEvery'],
      loan['repaymentFrequencyType'],
      loan['numberOfRepayments'],
    ),
  };
}
