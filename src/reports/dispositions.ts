/**
 * A run's sign-off record and the dispositions a preparer gives exceptions (signoff.ts writes it; report.html
 * shows it).
 */

/** What the preparer says of one exception. */
export const DISPOSITIONS = ['resolved', 'accepted', 'follow_up', 'not_an_issue'] as const;
export type Disposition = (typeof DISPOSITIONS)[number];
export const DISPOSITION_LABELS: Record<Disposition, string> = {
  resolved: 'Resolved (fixed today)',
  accepted: 'Accepted as is',
  follow_up: 'Follow-up needed',
  not_an_issue: 'Not an issue',
};

export interface ExceptionDisposition {
  /** Position in report.json's exceptions. */
  index: number;
  loanId: string;
  reason: string;
  disposition: Disposition;
}

export interface SignOffRecord {
  day: string;
  run: string;
  preparedBy: string | null;
  /** ISO 8601 instants. */
  preparedAt: string | null;
  preparedComment: string | null;
  reviewedBy: string | null;
  reviewedAt: string | null;
  reviewedComment: string | null;
  dispositions: ExceptionDisposition[];
}
