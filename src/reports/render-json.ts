import { REASON_ACTIONS, REASON_LABELS } from './reasons.js';
import type { ExceptionReason, ReconciliationSummary, ReportException } from './types.js';

export const REPORT_SCHEMA = 'boarding-connector/reconciliation-report@1';

/**
 * report.json: the summary first (what a reviewer or a script reads), then every exception, one
 * per line, so a large report is built without one giant intermediate object.
 */
export function renderJson(s: ReconciliationSummary, exceptions: readonly ReportException[]): string {
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
  exceptions.forEach((e, i) => parts.push(`${i === 0 ? '' : ','}\n    ${JSON.stringify(e)}`));
  parts.push(exceptions.length > 0 ? '\n  ]\n}\n' : ']\n}\n');
  return parts.join('');
}
