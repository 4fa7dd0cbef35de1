/**
 * The per-loan state machine, in one place. Every write to `loans.state` goes through
 * `assertTransition`; a transition not listed here is a bug in the connector, never a runtime
 * condition to work around, so it throws.
 *
 *   queued → fetched → mapped → written → acknowledged
 *   any working state → retry_wait (next attempt persisted) | quarantined (typed reason) | skipped (ops)
 */
export const LOAN_STATES = [
  'queued',
  'fetched',
  'mapped',
  'written',
  'acknowledged',
  'retry_wait',
  'quarantined',
  'skipped',
] as const;
export type LoanState = (typeof LOAN_STATES)[number];

export const QUARANTINE_REASONS = [
  /** A mapping expression failed or produced a value of the wrong shape. */
  'mapping',
  /** The data broke a rule (mapping output schema, or a queue item the platform sent malformed). */
  'validation',
  /** The data contradicts itself (no borrower, interest-only beyond the term…): a person decides. */
  'contradictory',
  /** The core refused the records (4xx): its own message is kept. */
  'core_rejected',
  /** A full tax id is required and only the last 4 digits are known. */
  'tin_incomplete',
  /** The core's answer stayed unknown (timeouts) through every attempt. */
  'ambiguous',
  /** Transient failures (platform 5xx, network) used up boarding.maxAttempts. */
  'retries_exhausted',
  /** The platform refused the acknowledgement (4xx other than auth/rate limit). */
  'ack_rejected',
  /** One tax id matched two or more customers (CIFs) of the core: a person picks (customers.onAmbiguous). */
  'customer_match_ambiguous',
  /**
   * A document's presigned address leads to a host the bank's network policy refuses (loopback,
   * private, metadata…): not bad data. The message names the host and the keys to change
   * (boarding.documentHosts.allow, or platform.environment: development for a local sandbox).
   */
  'download_refused',
] as const;
export type QuarantineReason = (typeof QUARANTINE_REASONS)[number];

/** States a cycle may pick a loan up from (retry_wait only once its time has come). */
export const WORKING_STATES: readonly LoanState[] = ['queued', 'fetched', 'mapped', 'written'];
/** Seen and still owed to the core or the platform: a cycle works them, now or at their retry time. */
export const UNACKNOWLEDGED_STATES: readonly LoanState[] = [...WORKING_STATES, 'retry_wait'];
/** States only an operator (`loans retry`) or a new release moves a loan out of. */
export const PARKED_STATES: readonly LoanState[] = ['quarantined', 'skipped'];
/** Not yet in the core: working on it or waiting for a retry (the report's "pending"). */
export const PENDING_STATES: readonly LoanState[] = WORKING_STATES.filter((s) => s !== 'written').concat(
  'retry_wait',
);
/** What `loans retry` takes a loan out of. */
export const RETRYABLE_STATES: readonly LoanState[] = [...PARKED_STATES, 'retry_wait'];
/** What `loans skip` takes a loan out of: anything still owed, and a quarantined loan. */
export const SKIPPABLE_STATES: readonly LoanState[] = [...UNACKNOWLEDGED_STATES, 'quarantined'];

const ALLOWED: Record<LoanState | 'new', readonly LoanState[]> = {
  // First sight of a loan: from the queue, or straight to quarantine when its item is malformed.
  new: ['queued', 'quarantined'],
  // fetched/mapped → fetched: a restart after a crash fetches again (nothing fetched is stored).
  // queued/fetched → written: after a possibly-committed core write, the core already had the loan.
  // queued → acknowledged: an operator retried a loan the core already holds (acknowledge only).
  queued: ['fetched', 'written', 'acknowledged', 'retry_wait', 'quarantined', 'skipped', 'queued'],
  fetched: ['mapped', 'fetched', 'retry_wait', 'quarantined', 'skipped', 'queued', 'written'],
  mapped: ['written', 'fetched', 'retry_wait', 'quarantined', 'skipped', 'queued'],
  // written → queued: the platform re-released the loan (new release marker): board again.
  written: ['acknowledged', 'retry_wait', 'quarantined', 'skipped', 'queued'],
  // acknowledged → queued only on a new release of the same loan.
  acknowledged: ['queued'],
  // retry_wait → acknowledged: a retried acknowledgement (the core already holds the loan).
  retry_wait: ['fetched', 'written', 'acknowledged', 'retry_wait', 'quarantined', 'skipped', 'queued'],
  quarantined: ['queued', 'skipped'],
  skipped: ['queued'],
};

export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
  constructor(
    readonly loanId: string,
    readonly from: LoanState | null,
    readonly to: LoanState,
  ) {
    super(`illegal loan state transition for ${loanId}: ${from ?? '(new)'} → ${to}`);
  }
}

export function isAllowedTransition(from: LoanState | null, to: LoanState): boolean {
  return ALLOWED[from ?? 'new'].includes(to);
}

export function assertTransition(loanId: string, from: LoanState | null, to: LoanState): void {
  if (!isAllowedTransition(from, to)) throw new IllegalTransitionError(loanId, from, to);
}

export function isLoanState(v: string): v is LoanState {
  return (LOAN_STATES as readonly string[]).includes(v);
}
