import type { Db } from './db.js';
import { UNACKNOWLEDGED_STATES } from './loan-states.js';

/** Counts over `loans` for /metrics: read at scrape time, never written. */
export interface LoanStats {
  countByState(): Array<{ state: string; n: number }>;
  quarantinedByReason(): Array<{ reason: string | null; n: number }>;
  /** Loans whose last mapping had review items (boarded with warnings), by state. */
  reviewedByState(): Array<{ state: string; n: number }>;
  /** retry_wait loans whose next attempt is due at `now`. */
  dueRetries(now: number): number;
  /** created_at of the oldest loan seen but not yet acknowledged, or null. */
  oldestUnacknowledgedAt(): number | null;
}

export function createLoanStats(db: Db): LoanStats {
  const byState = db.prepare<[], { state: string; n: number }>('SELECT state, COUNT(*) AS n FROM loans GROUP BY state');
  const quarantined = db.prepare<[], { reason: string | null; n: number }>(
    "SELECT quarantine_reason AS reason, COUNT(*) AS n FROM loans WHERE state = 'quarantined' GROUP BY quarantine_reason",
  );
  const oldest = db.prepare<[], { oldest: number | null }>(
    `SELECT MIN(created_at) AS oldest FROM loans WHERE state IN (${UNACKNOWLEDGED_STATES.map((s) => `'${s}'`).join(',')})`,
  );
  const due = db.prepare<[number], { n: number }>(
    "SELECT COUNT(*) AS n FROM loans WHERE state = 'retry_wait' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)",
  );
  const reviewed = db.prepare<[], { state: string; n: number }>('SELECT state, COUNT(*) AS n FROM loans WHERE review_items > 0 GROUP BY state');
  return {
    countByState: () => byState.all(),
    quarantinedByReason: () => quarantined.all(),
    reviewedByState: () => reviewed.all(),
    dueRetries: (now) => due.get(now)?.n ?? 0,
    oldestUnacknowledgedAt: () => oldest.get()?.oldest ?? null,
  };
}
