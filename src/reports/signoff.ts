/**
 * A run's sign-off as an auditor keeps it: who prepared and reviewed the run, when, their comments
 * and the preparer's disposition of each exception, written beside the run's files as
 * `signoff.json` and shown in its `report.html` (re-rendered from report.json, so the page on disk
 * carries the signatures, not only the console's database).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { localDateTime } from '../lib/calendar.js';
import { REPORT_FILES, writeFileAtomic } from './files.js';
import { HTML_MAX_ROWS, renderHtml } from './render-html.js';
import type { ReconciliationSummary, ReportException } from './types.js';
import type { SignOffRecord } from './dispositions.js';

export {
  DISPOSITIONS,
  DISPOSITION_LABELS,
  type Disposition,
  type ExceptionDisposition,
  type SignOffRecord,
} from './dispositions.js';

export const SIGNOFF_FILE = 'signoff.json';

/** report.json back into what renderHtml takes. */
function parseReport(text: string): { summary: ReconciliationSummary; exceptions: ReportException[] } {
  const {
    schema: _schema,
    reasons: _reasons,
    signOff: _signOff,
    exceptions,
    ...summary
  } = JSON.parse(text) as Record<string, unknown> & { exceptions?: ReportException[] };
  return { summary: summary as unknown as ReconciliationSummary, exceptions: exceptions ?? [] };
}

/** The exceptions of a run (from its report.json), for the sign-off form and its checks. */
export async function runExceptions(runDir: string): Promise<ReportException[]> {
  return parseReport(await readFile(join(runDir, REPORT_FILES.json), 'utf8')).exceptions;
}

/** Writes signoff.json and re-renders report.html with the signatures (when report.json carries a whole summary). */
export async function writeSignOff(runDir: string, record: SignOffRecord): Promise<void> {
  const { summary, exceptions } = parseReport(await readFile(join(runDir, REPORT_FILES.json), 'utf8'));
  const tz = (summary as Partial<ReconciliationSummary>).header?.timeZone;
  const local = (iso: string | null): string | null =>
    iso === null || tz === undefined ? null : localDateTime(Date.parse(iso), tz);
  writeFileAtomic(
    join(runDir, SIGNOFF_FILE),
    `${JSON.stringify(
      {
        ...record,
        preparedAtLocal: local(record.preparedAt),
        reviewedAtLocal: local(record.reviewedAt),
        timeZone: tz ?? null,
      },
      null,
      2,
    )}\n`,
  );
  if (tz === undefined) return;
  writeFileAtomic(
    join(runDir, REPORT_FILES.html),
    renderHtml(summary, exceptions.slice(0, HTML_MAX_ROWS), {
      exceptionCount: exceptions.length,
      signOff: record,
    }),
  );
}
