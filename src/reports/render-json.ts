import { REASON_ACTIONS, REASON_LABELS } from './reasons.js';
import {
  reviewItemsOf,
  type ExceptionReason,
  type ReconciliationSummary,
  type ReportException,
  type ReviewItemsLookup,
} from './types.js';

export const REPORT_SCHEMA = 'boarding-connector/reconciliation-report@1';

/**
 * report.json: the summary first (what a reviewer or a script reads), then every exception, one
 * per line, so a large report is built without one giant intermediate object. The parts below let
 * a run stream the exception lines to a file as they are found and put the summary before them
 * at the end (run.ts); renderJson is the same bytes in one string.
 */

/** Everything before the first exception line: the summary and the opening of `exceptions`. */
export function jsonReportHead(s: ReconciliationSummary): string {
  const reasons = Object.fromEntries(
    (Object.keys(s.exceptionsByReason) as ExceptionReason[]).map((r) => [
      r,
      { label: REASON_LABELS[r], action: REASON_ACTIONS[r] },
    ]),
  );
  const head = {
    schema: REPORT_SCHEMA,
    ...s,
    reasons,
    signOff: { preparedBy: null, preparedAt: null, reviewedBy: null, reviewedAt: null, comments: null },
  };
  const text = JSON.stringify(head, null, 2);
  return `${text.slice(0, text.lastIndexOf('}')).trimEnd()},\n  "exceptions": [`;
}

/** The `index`-th exception's line (with its review items, looked up when it was kept without them). */
export function jsonExceptionLine(
  e: ReportException,
  index: number,
  reviewItems?: ReviewItemsLookup,
): string {
  const items = e.reviewItems === undefined ? reviewItemsOf(e, reviewItems) : undefined;
  // Same key order as an exception that carries its items: reviewItems, then reviewItemsMore.
  let row: ReportException = e;
  if (items !== undefined) {
    const { reviewItemsMore, ...rest } = e;
    row = { ...rest, reviewItems: items, reviewItemsMore: reviewItemsMore ?? 0 };
  }
  return `${index === 0 ? '' : ','}\n    ${JSON.stringify(row)}`;
}

/** What closes the file after `count` exception lines. */
export function jsonReportTail(count: number): string {
  return count > 0 ? '\n  ]\n}\n' : ']\n}\n';
}

export function renderJson(
  s: ReconciliationSummary,
  exceptions: readonly ReportException[],
  opts: { reviewItems?: ReviewItemsLookup } = {},
): string {
  const parts: string[] = [jsonReportHead(s)];
  exceptions.forEach((e, i) => parts.push(jsonExceptionLine(e, i, opts.reviewItems)));
  parts.push(jsonReportTail(exceptions.length));
  return parts.join('');
}
