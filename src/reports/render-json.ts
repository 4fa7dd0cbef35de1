import { REASON_ACTIONS, REASON_LABELS } from './reasons.js';
import { reviewItemsOf, type ExceptionReason, type ReconciliationSummary, type ReportException, type ReviewItemsLookup } from './types.js';

export const REPORT_SCHEMA = 'boarding-connector/reconciliation-report@1';

/**
 * report.json: the summary first (what a reviewer or a script reads), then every exception, one
 * per line, so a large report is built without one giant intermediate object.
 */
export function renderJson(s: ReconciliationSummary, exceptions: readonly ReportException[], opts: { reviewItems?: ReviewItemsLookup } = {}): string {
  const reasons = Object.fromEntries(
    (Object.keys(s.exceptionsByReason) as ExceptionReason[]).map((r) => [r, { label: REASON_LABELS[r], action: REASON_ACTIONS[r] }]),
  );
  const head = {
    schema: REPORT_SCHEMA,
    ...s,
    reasons,
    signOff: { preparedBy: null, preparedAt: null, reviewedBy: null, reviewedAt: null, comments: null },
  };
  const text = JSON.stringify(head, null, 2);
  const parts: string[] = [text.slice(0, text.lastIndexOf('}')).trimEnd(), ',\n  "exceptions": ['];
  exceptions.forEach((e, i) => {
    const items = e.reviewItems === undefined ? reviewItemsOf(e, opts.reviewItems) : undefined;
    // Same key order as an exception that carries its items: reviewItems, then reviewItemsMore.
    let row: ReportException = e;
    if (items !== undefined) {
      const { reviewItemsMore, ...rest } = e;
      row = { ...rest, reviewItems: items, reviewItemsMore: reviewItemsMore ?? 0 };
    }
    parts.push(`${i === 0 ? '' : ','}\n    ${JSON.stringify(row)}`);
  });
  parts.push(exceptions.length > 0 ? '\n  ]\n}\n' : ']\n}\n');
  return parts.join('');
}
