import { spreadsheetField } from '../lib/csv.js';
import { openReportStream } from './files.js';
import { formatCents } from './money.js';
import type { ReportException } from './types.js';

/**
 * The reports' CSV writer: CRLF line ends, and lib/csv.ts's spreadsheetField (RFC 4180 quoting,
 * control characters neutralised, and, as these files are opened in a spreadsheet,
 * formula-injection protection), plus a UTF-8 byte-order mark (so Excel reads accents right).
 */
export function csvCell(value: string | number | null | undefined): string {
  return spreadsheetField(value);
}

export function csvRow(cells: ReadonlyArray<string | number | null | undefined>): string {
  return `${cells.map((c) => csvCell(c)).join(',')}\r\n`;
}

export const CSV_BOM = '\uFEFF';

export const EXCEPTION_CSV_HEADER = [
  'run_id',
  'reason',
  'loan_id',
  'loan_number',
  'field',
  'platform_value',
  'core_value',
  'connector_state',
  'amount',
  'since',
  'age_business_days',
  'age_bucket',
  'detail',
  'review_items',
] as const;

/** A loan's review items as one cell: one line per item, then "+N more" (bounded per loan). */
export function reviewItemsText(e: ReportException): string | null {
  if (e.reviewItems === undefined) return null;
  const lines = e.reviewItems.map((r) => `[${r.code}] ${r.field}: ${r.message}${r.at ? ` (${r.at})` : ''}`);
  if ((e.reviewItemsMore ?? 0) > 0) lines.push(`+${e.reviewItemsMore} more`);
  return lines.join('\n');
}

export function exceptionCsvRow(runId: string, e: ReportException): string {
  return csvRow([
    runId,
    e.reason,
    e.loanId,
    e.loanNumber,
    e.field,
    e.platformValue,
    e.coreValue,
    e.connectorState,
    e.centsAmount === null ? null : formatCents(e.centsAmount),
    e.since,
    e.ageBusinessDays,
    e.ageBucket,
    e.detail,
    reviewItemsText(e),
  ]);
}

/** Streams exception rows to a file as they are found; honours back-pressure. */
export interface CsvExceptionWriter {
  write(e: ReportException): Promise<void>;
  close(): Promise<void>;
  /** Destroys the stream and resolves once its file is closed (so it can then be removed); never rejects. */
  abort(): Promise<void>;
}

export function createCsvExceptionWriter(path: string, runId: string): CsvExceptionWriter {
  const stream = openReportStream(path);
  void stream.write(CSV_BOM + csvRow([...EXCEPTION_CSV_HEADER]));
  return {
    write: (e) => stream.write(exceptionCsvRow(runId, e)),
    close: () => stream.close(),
    abort: () => stream.abort(),
  };
}
