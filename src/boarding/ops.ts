import { UsageError } from '../lib/errors.js';
import type { LoanStore, LoanRow } from '../store/loans.js';
import { LoanNotFoundError } from '../store/loans.js';
import { RETRYABLE_STATES, SKIPPABLE_STATES } from '../store/loan-states.js';
import { writtenForCurrentRelease } from './release.js';

const RETRYABLE_FROM = new Set<string>(RETRYABLE_STATES);
const SKIPPABLE_FROM = new Set<string>(SKIPPABLE_STATES);

async function load(loans: LoanStore, id: string): Promise<LoanRow> {
  try {
    return await loans.require(id);
  } catch (err) {
    if (err instanceof LoanNotFoundError) throw new UsageError(`${err.message} (see \`loans list\`)`);
    throw err;
  }
}

/** What a bulk `loans retry` / `loans skip` would do to one loan (its --dry-run listing, and the check before any change). */
export type OpPlan =
  | {
      loanId: string;
      ok: true;
      state: string;
      quarantineReason: string | null;
      loanNumber: string | null;
      /** retry only: the core holds this release; the next cycle only acknowledges. */ ackOnly: boolean;
    }
  | { loanId: string; ok: false; state: string | null; why: string };

/** Whether `loans retry ID` would take this loan, and what its next attempt would do; changes nothing. */
export async function planRetry(loans: LoanStore, id: string): Promise<OpPlan> {
  const row = await loans.get(id);
  if (!row)
    return {
      loanId: id,
      ok: false,
      state: null,
      why: `no loan ${id} in the state database (see \`loans list\`)`,
    };
  if (!RETRYABLE_FROM.has(row.state))
    return {
      loanId: id,
      ok: false,
      state: row.state,
      why: `loan ${id} is ${row.state}; only quarantined, retry_wait or skipped loans can be retried`,
    };
  return {
    loanId: id,
    ok: true,
    state: row.state,
    quarantineReason: row.quarantineReason,
    loanNumber: row.loanNumber,
    ackOnly: writtenForCurrentRelease(row),
  };
}

/** Whether `loans skip ID` would take this loan; changes nothing. */
export async function planSkip(loans: LoanStore, id: string): Promise<OpPlan> {
  const row = await loans.get(id);
  if (!row)
    return {
      loanId: id,
      ok: false,
      state: null,
      why: `no loan ${id} in the state database (see \`loans list\`)`,
    };
  if (!SKIPPABLE_FROM.has(row.state))
    return {
      loanId: id,
      ok: false,
      state: row.state,
      why: `loan ${id} is ${row.state}; it cannot be skipped`,
    };
  return {
    loanId: id,
    ok: true,
    state: row.state,
    quarantineReason: row.quarantineReason,
    loanNumber: row.loanNumber,
    ackOnly: false,
  };
}

/**
 * `loans retry ID`: back to queued with a fresh attempt budget, audited. A loan the core already
 * holds for its current release keeps that: its next attempt only acknowledges, never writes
 * again. A write for an earlier release (re-released since) does not count: the new one is written.
 */
export interface OpsOrigin {
  /** `loans retry --all`: the filter it ran with. */
  bulk?: { reason: string | null; since: string | null };
  /** An ops console request: its id, the maker's reason and who approved it (null: exempt from four eyes). */
  request?: { id: string; reason: string; approvedBy: string | null };
  /**
   * The state the loan had when the request was made (a console request): a loan that moved since
   * (retried or boarded by someone else) is named, not acted on.
   */
  expectedState?: string | null;
}

/** The loan as it is, and still as the request saw it (OpsOrigin.expectedState). */
async function loadAsRequested(loans: LoanStore, id: string, extra: OpsOrigin | undefined): Promise<LoanRow> {
  const expected = extra?.expectedState ?? null;
  if (expected === null) return load(loans, id);
  const row = await loans.get(id);
  if (row?.state !== expected)
    throw new Error(
      `loan ${id} is ${row?.state ?? 'gone'} now (${expected} when the request was made); not acted on`,
    );
  return row;
}

export async function retryLoan(
  loans: LoanStore,
  id: string,
  actor: string,
  now: number,
  extra?: OpsOrigin,
): Promise<LoanRow> {
  const row = await loadAsRequested(loans, id, extra);
  if (!RETRYABLE_FROM.has(row.state)) {
    throw new UsageError(
      `loan ${id} is ${row.state}; only quarantined, retry_wait or skipped loans can be retried`,
    );
  }
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
        ...(extra?.bulk ? { bulk: extra.bulk } : {}),
        ...(extra?.request ? { request: extra.request } : {}),
      },
      patch: { attempts: 0, nextAttemptAt: null, quarantineReason: null },
    },
    now,
  );
}

/** `loans skip ID --reason TEXT`: never boarded by the connector unless retried; audited with who and why. */
export async function skipLoan(
  loans: LoanStore,
  id: string,
  reason: string,
  actor: string,
  now: number,
  extra?: OpsOrigin,
): Promise<LoanRow> {
  if (reason.trim() === '')
    throw new UsageError('loans skip: --reason must say why (it is kept in the audit log)');
  const row = await loadAsRequested(loans, id, extra);
  if (!SKIPPABLE_FROM.has(row.state)) {
    throw new UsageError(`loan ${id} is ${row.state}; it cannot be skipped`);
  }
  return loans.transition(
    id,
    {
      to: 'skipped',
      expectedFrom: row.state,
      kind: 'ops',
      actor,
      reason: reason.trim(),
      detail: { previousState: row.state, ...(extra?.request ? { request: extra.request } : {}) },
      patch: { nextAttemptAt: null },
    },
    now,
  );
}
