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

/**
 * RFC 4180 CSV (comma, double-quote quoting, CRLF or LF). Every cell stays text: lookup values
 * such as 0012 are never turned into numbers. A leading BOM is ignored.
 */
export function parseCsv(text: string): CsvRow[] {
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
        if (next !== undefined && next !== ',' && next !== '\n' && next !== '\r') {
          throw new CsvError('unexpected character after a closing quote', line, i - lineStart + 1);
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
    if (ch === '"' && cell === '') {
      quoted = true;
      cellStarted = true;
      i += 1;
      continue;
    }
    if (ch === ',') {
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
  if (quoted) throw new CsvError('unterminated quoted cell', line, i - lineStart + 1);
  if (cell !== '' || row.length > 0 || cellStarted) endRow();
  return rows;
}
