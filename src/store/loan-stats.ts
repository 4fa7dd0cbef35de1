import type { StoreDb } from './sql.js';
import { UNACKNOWLEDGED_STATES } from './loan-states.js';

/** Counts over `loans` for /metrics: read at scrape time, never written. */
export interface LoanStats {
  countByState(): Promise<Array<{ state: string; n: number }>>;
  quarantinedByReason(): Promise<Array<{ reason: string | null; n: number }>>;
  /** Loans whose last mapping had review items (boarded with warnings), by state. */
  reviewedByState(): Promise<Array<{ state: string; n: number }>>;
  /** retry_wait loans whose next attempt is due at `now`. */
  dueRetries(now: number): Promise<number>;
  /** created_at of the oldest loan seen but not yet acknowledged, or null. */
  oldestUnacknowledgedAt(): Promise<number | null>;
}

export function createLoanStats(db: StoreDb): LoanStats {
  const OLDEST =
    `SELECT MIN(created_at) AS oldest FROM loans WHERE state IN ` +
    `(${UNACKNOWLEDGED_STATES.map((s) => `'${s}'`).join(',')})`;
  return {
    countByState: () =>
      db.all<{ state: string; n: number }>('SELECT state, COUNT(*) AS n FROM loans GROUP BY state'),
    quarantinedByReason: () =>
      db.all<{ reason: string | null; n: number }>(
        "SELECT quarantine_reason AS reason, COUNT(*) AS n FROM loans WHERE state = 'quarantined' GROUP BY " +
          'quarantine_reason',
      ),
    reviewedByState: () =>
      db.all<{ state: string; n: number }>(
        'SELECT state, COUNT(*) AS n FROM loans WHERE review_items > 0 GROUP BY state',
      ),
    dueRetries: async (now) =>
      (
        await db.get<{ n: number }>(
          "SELECT COUNT(*) AS n FROM loans WHERE state = 'retry_wait' AND (next_attempt_at IS NULL OR " +
            'next_attempt_at <= ?)',
          [now],
        )
      )?.n ?? 0,
    oldestUnacknowledgedAt: async () => (await db.get<{ oldest: number | null }>(OLDEST))?.oldest ?? null,
  };
}
