/**
 * `loans retry` and the console's retry request, one loan: back to queued with a fresh attempt
 * budget, audited. A loan the core already holds for its current release keeps that: its next
 * attempt only acknowledges, never writes again. A write for an earlier release (re-released
 * since) does not count: the new one is written. Bulk use goes through ops/bulk.ts.
 */
import { UsageError } from '../lib/errors.js';
import type { LoanStore, LoanRow } from '../store/loans.js';
import { RETRYABLE_STATES } from '../store/loan-states.js';
import { writtenForCurrentRelease } from '../pipeline/release.js';
import { loadAsPlanned, notFoundPlan, type OpPlan, type OpsOrigin } from './loan-plan.js';

const RETRYABLE_FROM = new Set<string>(RETRYABLE_STATES);
const notRetryable = (id: string, state: string): string =>
  `loan ${id} is ${state}; only quarantined, retry_wait or skipped loans can be retried`;

/** Whether `loans retry ID` would take this loan, and what its next attempt would do; changes nothing. */
export async function planRetry(loans: LoanStore, id: string): Promise<OpPlan> {
  const row = await loans.get(id);
  if (!row) return notFoundPlan(id);
  if (!RETRYABLE_FROM.has(row.state))
    return { loanId: id, ok: false, state: row.state, why: notRetryable(id, row.state) };
  const { quarantineReason, loanNumber } = row;
  return {
    loanId: id,
    ok: true,
    state: row.state,
    quarantineReason,
    loanNumber,
    ackOnly: writtenForCurrentRelease(row),
  };
}

export async function retryLoan(
  loans: LoanStore,
  id: string,
  actor: string,
  now: number,
  origin?: OpsOrigin,
): Promise<LoanRow> {
  const row = await loadAsPlanned(loans, id, origin);
  if (!RETRYABLE_FROM.has(row.state)) throw new UsageError(notRetryable(id, row.state));
  return loans.transition(
    id,
    {
      to: 'queued',
      expectedFrom: row.state,
      kind: 'ops',
      actor,
      reason: 'retry requested',
      detail: {
        previousState: row.state,
        quarantineReason: row.quarantineReason,
        lastErrorCode: row.lastErrorCode,
        ackOnly: writtenForCurrentRelease(row),
        ...(origin?.bulk ? { bulk: origin.bulk } : {}),
        ...(origin?.request ? { request: origin.request } : {}),
      },
      patch: { attempts: 0, nextAttemptAt: null, quarantineReason: null },
    },
    now,
  );
}
