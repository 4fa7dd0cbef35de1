/**
 * The loans an operator looks at: `loans list` (a state, review items, newest first) and the
 * `--all` selection of `loans retry|skip` (a state, a quarantine reason, an age).
 */
import { UsageError } from '../lib/errors.js';
import { localDateTime } from '../lib/calendar.js';
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

/**
 * Widest an id or reference column is shown in `loans list` (platform ids are opaque strings of any
 * length): a longer one is cut in the middle with "…", so both ends stay recognisable; `--json`
 * and `loans show` print it whole.
 */
export const LIST_ID_MAX = 40;

/** `text` shortened to `max` characters, keeping its start and end ("ln_7f3a…9c21"). */
export function middleEllipsis(text: string, max = LIST_ID_MAX): string {
  const chars = [...text];
  if (chars.length <= max) return text;
  const tail = Math.floor((max - 1) / 2);
  return `${chars.slice(0, max - 1 - tail).join('')}…${chars.slice(chars.length - tail).join('')}`;
}

/**
 * `loans list` as a table: one loan a row, each column as wide as its widest cell (ids and
 * references capped at LIST_ID_MAX), the last one not padded; times in `timeZone` (bank.timeZone)
 * with its abbreviation.
 */
export function loanTableText(rows: readonly LoanRow[], timeZone: string): string {
  const when = (ms: number | null): string => (ms === null ? '' : localDateTime(ms, timeZone));
  const head = ['ID', 'LOAN NUMBER', 'STATE', 'REASON', 'REVIEW', 'ATTEMPTS', 'NEXT ATTEMPT', 'CORE REF'];
  const cells = [[...head, 'LAST ERROR']];
  for (const r of rows) {
    const review = r.reviewItems > 0 ? String(r.reviewItems) : '';
    const error = (r.lastErrorMessage ?? '').replace(/\s+/g, ' ').slice(0, 80);
    const id = middleEllipsis(r.id);
    const state = [id, middleEllipsis(r.loanNumber ?? ''), r.state, r.quarantineReason ?? '', review];
    cells.push([
      ...state,
      String(r.attempts),
      when(r.nextAttemptAt),
      middleEllipsis(r.coreReference ?? ''),
      error,
    ]);
  }
  const widths = cells[0]?.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length))) ?? [];
  return cells
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  '))
    .join('\n');
}
