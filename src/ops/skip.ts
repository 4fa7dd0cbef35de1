/**
 * `loans skip` and the console's skip request, one loan: never boarded by the connector unless
 * retried; audited with who and why. Bulk use goes through ops/bulk.ts.
 */
import { UsageError } from '../lib/errors.js';
import type { LoanStore, LoanRow } from '../store/loans.js';
import { SKIPPABLE_STATES } from '../store/loan-states.js';
import { loadAsPlanned, notFoundPlan, type OpPlan, type OpsOrigin } from './loan-plan.js';

const SKIPPABLE_FROM = new Set<string>(SKIPPABLE_STATES);

/** Whether `loans skip ID` would take this loan; changes nothing. */
export async function planSkip(loans: LoanStore, id: string): Promise<OpPlan> {
  const row = await loans.get(id);
  if (!row) return notFoundPlan(id);
  if (!SKIPPABLE_FROM.has(row.state))
    return {
      loanId: id,
      ok: false,
      state: row.state,
      why: `loan ${id} is ${row.state}; it cannot be skipped`,
    };
  const { quarantineReason, loanNumber } = row;
  return { loanId: id, ok: true, state: row.state, quarantineReason, loanNumber, ackOnly: false };
}

export async function skipLoan(
  loans: LoanStore,
  id: string,
  reason: string,
  actor: string,
  now: number,
  origin?: OpsOrigin,
): Promise<LoanRow> {
  if (reason.trim() === '')
    throw new UsageError('loans skip: --reason must say why (it is kept in the audit log)');
  const row = await loadAsPlanned(loans, id, origin);
  if (!SKIPPABLE_FROM.has(row.state))
    throw new UsageError(`loan ${id} is ${row.state}; it cannot be skipped`);
  return loans.transition(
    id,
    {
      to: 'skipped',
      expectedFrom: row.state,
      kind: 'ops',
      actor,
      reason: reason.trim(),
      detail: { previousState: row.state, ...(origin?.request ? { request: origin.request } : {}) },
      patch: { nextAttemptAt: null },
    },
    now,
  );
}
