import type { CanonicalLoanFields } from '../port.js';
import { decimalToCents, percentToBps } from '../units.js';

type Json = Record<string, unknown>;

const FREQUENCIES: Record<string, string> = {
  '1:WEEKS': 'weekly',
  '2:WEEKS': 'biweekly',
  '1:MONTHS': 'monthly',
  '3:MONTHS': 'quarterly',
  '6:MONTHS': 'semi-annual',
  '1:YEARS': 'annual',
};

function dateOf(v: unknown): string | null {
  return typeof v === 'string' && /^\d{4}-\d{2}-\d{2}/.test(v) ? v.slice(0, 10) : null;
}

/**
 * A Mambu loan account (GET /loans/{id}) in platform units, for reconciliation. Products are core codes: not
 * compared.
 */
export function canonicalFromMambuLoan(loan: Json): CanonicalLoanFields {
  const schedule = (loan['scheduleSettings'] ?? {}) as Json;
  const interest = (loan['interestSettings'] ?? {}) as Json;
  const disbursement = (loan['disbursementDetails'] ?? {}) as Json;
  const installments = schedule['repaymentInstallments'];
  const known =
    FREQUENCIES[`${String(schedule['repaymentPeriodCount'])}:${String(schedule['repaymentPeriodUnit'])}`];
  return {
    centsAmount: decimalToCents(loan['loanAmount']),
    bpsRate: percentToBps(interest['interestRate']),
    firstPaymentDate: dateOf(disbursement['firstRepaymentDate']),
    // One installment after a period of a known frequency is that frequency or a lump sum: cannot tell (not compared).
    paymentFrequency: installments === 1 ? (known === undefined ? 'lump sum' : null) : (known ?? null),
  };
}
