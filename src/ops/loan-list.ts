/**
 * The loans an operator looks at: `loans list` (a state, review items, newest first) and the
 * `--all` selection of `loans retry|skip` (a state, a quarantine reason, an age).
 */
import { UsageError } from '../lib/errors.js';
import type { BoardingStore } from '../store/index.js';
import type { LoanRow } from '../store/loans.js';
import {
  LOAN_STATES,
  QUARANTINE_REASONS,
  RETRYABLE_STATES,
  SKIPPABLE_STATES,
  isLoanState,
  type LoanState,
  type QuarantineReason,
} from '../store/loan-states.js';

export { LOAN_STATES, QUARANTINE_REASONS, RETRYABLE_STATES, SKIPPABLE_STATES, type LoanState };
export type { LoanRow };

export interface LoanListInput {
  state?: string | undefined;
  limit?: string | undefined;
  warnings?: boolean | undefined;
}

export async function listLoans(
  store: Pick<BoardingStore, 'loans'>,
  input: LoanListInput,
): Promise<{ rows: LoanRow[]; counts: Record<LoanState, number> }> {
  if (input.state !== undefined && !isLoanState(input.state))
    throw new UsageError(
      `--state: expected one of ${LOAN_STATES.join(', ')}, got ${JSON.stringify(input.state)}`,
    );
  const limit = input.limit === undefined ? undefined : Number(input.limit);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1))
    throw new UsageError(`--limit: expected a whole number ≥ 1, got ${JSON.stringify(input.limit)}`);
  const rows = await store.loans.list({
    ...(input.state !== undefined && isLoanState(input.state) ? { state: input.state } : {}),
    ...(limit ? { limit } : {}),
    ...(input.warnings === true ? { withReviewItems: true } : {}),
  });
  return { rows, counts: await store.loans.countByState() };
}

/** --since: an ISO date-time, or how long ago (30m, 2h, 1d). */
export function parseSince(v: string, now: number): number {
  const rel = /^(\d+)\s*(m|h|d)$/.exec(v.trim());
  if (rel)
    return now - Number(rel[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[rel[2] as 'm' | 'h' | 'd'];
  const t = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v.trim()) || Number.isNaN(t))
    throw new UsageError(
      `--since: expected an ISO date-time (2026-11-25T09:00:00Z) or a duration (30m, 2h, 1d), got ${JSON.stringify(v)}`,
    );
  return t;
}

export interface LoanSelection {
  state?: string | undefined;
  quarantineReason?: string | undefined;
  since?: string | undefined;
  /** The flag that carried the quarantine reason, for the message. */
  reasonFlag: string;
}

/**
 * --all of `loans retry` / `loans skip`: the loans in a state (default quarantined), narrowed by quarantine
 * reason and age.
 */
export async function selectLoans(
  store: Pick<BoardingStore, 'loans'>,
  action: 'retry' | 'skip',
  f: LoanSelection,
  now: number,
): Promise<string[]> {
  const allowed: readonly LoanState[] = action === 'retry' ? RETRYABLE_STATES : SKIPPABLE_STATES;
  const state = f.state ?? 'quarantined';
  if (!(allowed as readonly string[]).includes(state))
    throw new UsageError(`--state: expected ${allowed.join(', ')}, got ${JSON.stringify(state)}`);
  const reason = f.quarantineReason;
  if (reason !== undefined && !(QUARANTINE_REASONS as readonly string[]).includes(reason))
    throw new UsageError(
      `${f.reasonFlag}: expected one of ${QUARANTINE_REASONS.join(', ')}, got ${JSON.stringify(reason)}`,
    );
  const since = f.since === undefined ? null : parseSince(f.since, now);
  const rows = await store.loans.list({
    state: state as LoanState,
    ...(since !== null ? { enteredSince: since } : {}),
    ...(reason !== undefined ? { quarantineReason: reason as QuarantineReason } : {}),
  });
  return rows.map((r) => r.id);
}
