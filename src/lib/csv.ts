import { neutraliseFormula } from './formula.js';

/**
 * The connector's one CSV module: a reader (mapping sets' CSV tables, the file core's customer
 * extract, layout fixtures) and an RFC 4180 field writer (the file core's `control.csv`, and under
 * reports/csv.ts's formula protection, the reports and the sandbox's extract).
 */
export interface CsvRow {
  /** 1-based line where the row starts. */
  line: number;
  cells: string[];
}

export class CsvError extends Error {
  override readonly name = 'CsvError';
  constructor(
    message: string,
    readonly line: number,
    readonly column: number,
  ) {
    super(message);
  }
}

export interface CsvOptions {
  /** One character; default `,`. */
  delimiter?: string;
}

/**
 * RFC 4180 CSV (double-quote quoting, a doubled quote for a quote, CRLF or LF, line breaks inside
 * quoted cells), the one CSV reader of the connector: mapping lookups and the bank's customer
 * extract (line by line: parseCsvLine). Every cell stays text: lookup values such as 0012 are
 * never turned into numbers. A leading BOM is ignored, empty lines are skipped. A quote inside an
 * unquoted cell, a character after a closing quote or an unterminated quoted cell is a CsvError
 * naming line and column.
 */
export function parseCsv(text: string, opts: CsvOptions = {}): CsvRow[] {
  const delimiter = opts.delimiter ?? ',';
  if (delimiter.length !== 1 || delimiter === '"' || delimiter === '\r' || delimiter === '\n')
    throw new CsvError(
      `the delimiter must be one character other than a quote or a line break, got ${JSON.stringify(delimiter)}`,
      1,
      1,
    );
  const rows: CsvRow[] = [];
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let line = 1;
  let lineStart = i;
  let row: string[] = [];
  let rowLine = 1;
  let cell = '';
  let quoted = false;
  let cellStarted = false;
  const endRow = (): void => {
    row.push(cell);
    if (!(row.length === 1 && row[0] === '' && !cellStarted)) rows.push({ line: rowLine, cells: row });
    row = [];
    cell = '';
    cellStarted = false;
  };
  while (i < text.length) {
    const ch = text[i] as string;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i += 2;
          continue;
        }
        quoted = false;
        i += 1;
        const next = text[i];
        if (next !== undefined && next !== delimiter && next !== '\n' && next !== '\r') {
          throw new CsvError(
            `unexpected ${JSON.stringify(next)} after a closing quote`,
            line,
            i - lineStart + 1,
          );
        }
        continue;
      }
      if (ch === '\n') {
        line += 1;
        lineStart = i + 1;
      }
      cell += ch;
      i += 1;
      continue;
    }
    if (ch === '"') {
      if (cell !== '')
        throw new CsvError(
          'a quote inside an unquoted cell (quote the cell and double the quote)',
          line,
          i - lineStart + 1,
        );
      quoted = true;
      cellStarted = true;
      i += 1;
      continue;
    }
    if (ch === delimiter) {
      row.push(cell);
      cell = '';
      cellStarted = true;
      i += 1;
      continue;
    }
    if (ch === '\r' || ch === '\n') {
      endRow();
      i += ch === '\r' && text[i + 1] === '\n' ? 2 : 1;
      line += 1;
      lineStart = i;
      rowLine = line;
      continue;
    }
    cell += ch;
    cellStarted = true;
    i += 1;
  }
  if (quoted) throw new CsvError('a quoted cell is not closed', line, i - lineStart + 1);
  if (cell !== '' || row.length > 0 || cellStarted) endRow();
  return rows;
}

/**
 * One line of CSV on its own (the customer extract: a broken line is reported and skipped without
 * swallowing the lines after it, so a quoted line break is not supported there). Returns the
 * cells, or what is wrong with the line.
 */
export function parseCsvLine(line: string, delimiter = ','): string[] | string {
  if (line.includes('\n') || line.includes('\r')) return 'a line break inside the line';
  try {
    return parseCsv(line, { delimiter })[0]?.cells ?? [''];
  } catch (err) {
    if (err instanceof CsvError) return err.message;
    throw err;
  }
}

/** C0 controls but TAB, LF and CR (which a quoted field keeps), DEL, and the C1 controls. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;

/**
 * A control character (ESC, BEL, NUL, the C1 range…) made harmless: the C0 ones and DEL become
 * their visible Unicode control pictures (ESC → ␛), the C1 ones U+FFFD. An escape sequence in a
 * name must not reach the terminal that `cat`s an export, nor a program that reads it back.
 */
export function neutraliseControls(text: string): string {
  return text.replace(CONTROL, (ch) => {
    const code = ch.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    return code === 0x7f ? '\u2421' : '\ufffd';
  });
}

/**
 * One RFC 4180 field: quoted (with its quotes doubled) when it holds a comma, a quote, CR or LF, or
 * begins or ends with white space; as it is otherwise. Control characters are neutralised
 * (neutraliseControls) in every field; no formula neutralising: for files a program reads back (the
 * file core's `control.csv`, the customer extract). Files a spreadsheet opens use spreadsheetField.
 */
export function csvField(value: string | number | bigint | null | undefined): string {
  if (value === null || value === undefined) return '';
  const text = neutraliseControls(String(value));
  return /[",\r\n]/.test(text) || text !== text.trim() ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * A field of a CSV people open in a spreadsheet (the reports' CSVs, the console's audit export):
 * csvField plus formula-injection protection for text (lib/formula.ts).
 */
export function spreadsheetField(value: string | number | bigint | null | undefined): string {
  if (value === null || value === undefined) return '';
  return csvField(typeof value === 'string' ? neutraliseFormula(value) : value);
}

/** A CSV record of RFC 4180 fields, without its line ending. */
export function csvRecord(values: ReadonlyArray<string | number | bigint | null | undefined>): string {
  return values.map(csvField).join(',');
}
