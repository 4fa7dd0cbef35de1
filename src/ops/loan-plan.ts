import { UsageError } from '../lib/errors.js';
import { LoanNotFoundError, type LoanStore, type LoanRow } from '../store/loans.js';

/**
 * What a `loans retry` / `loans skip` would do to one loan (its --dry-run listing, and the check before any
 * change).
 */
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

/** Where an action comes from, kept in the loan's audit event. */
export interface OpsOrigin {
  /** `loans retry --all`: the filter it ran with. */
  bulk?: { reason: string | null; since: string | null };
  /** An ops console request: its id, the maker's reason and who approved it (null: exempt from four eyes). */
  request?: { id: string; reason: string; approvedBy: string | null };
  /**
   * The state the loan had when the action was planned (the CLI's plan, a console request's
   * creation): a loan that moved since (retried or boarded by someone else) is named, not acted on.
   */
  expectedState?: string | null;
}

export function notFoundPlan(id: string): OpPlan {
  return {
    loanId: id,
    ok: false,
    state: null,
    why: `no loan ${id} in the state database (see \`loans list\`)`,
  };
}

/** The loan as it is, and still as the action saw it (OpsOrigin.expectedState). */
export async function loadAsPlanned(
  loans: LoanStore,
  id: string,
  origin: OpsOrigin | undefined,
): Promise<LoanRow> {
  const expected = origin?.expectedState ?? null;
  if (expected === null) {
    try {
      return await loans.require(id);
    } catch (err) {
      if (err instanceof LoanNotFoundError) throw new UsageError(`${err.message} (see \`loans list\`)`);
      throw err;
    }
  }
  const row = await loans.get(id);
  if (row?.state !== expected)
    throw new Error(
      `loan ${id} is ${row?.state ?? 'gone'} now (${expected} when the request was made); not acted on`,
    );
  return row;
}
