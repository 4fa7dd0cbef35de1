import type { Layout, LayoutColumn, LayoutFile } from './layout.js';
import { concatBytes, encodeLine, renderRows } from './render.js';
import type { MappedRecord } from '../../../contract/records.js';

/** At most this many differing columns are listed per line; the rest are counted. */
const MAX_COLUMN_DIFFS = 12;

/**
 * Renders a fixture's `expected-lines/<file>` content: the lines its records give in that layout
 * file (a first board, no header or trailer), in the file's encoding and line ending, with dates in
 * `timeZone` (the case's, as its mapping ran). What `mappings test --update` writes; a string is a
 * problem (no such file, a value the layout refuses).
 */
export function renderExpectedLines(
  layout: Layout,
  loanId: string,
  records: readonly MappedRecord[],
  name: string,
  timeZone: string,
): Uint8Array | string {
  const file = layout.files.find((f) => f.name === name);
  if (file === undefined) return `expected-lines/${name}: the layout declares no file ${name}`;
  let lines: string[];
  try {
    lines = renderRows(file, records, { loanId, timeZone, kind: 'new' }).lines;
  } catch (err) {
    return `expected-lines/${name}: ${err instanceof Error ? err.message : String(err)}`;
  }
  return concatBytes(lines.map((l) => encodeLine(file, l)));
}

/**
 * Compares a fixture's `expected-lines/<file>` with the lines its records render to (a first board,
 * no header or trailer), byte for byte in the file's encoding. A line that differs is reported per
 * column: file, line, column name, expected and actual value (CSV cells split with the file's
 * delimiter and quote; fixed-width fields cut at the column's start and length).
 */
export function diffExpectedLines(
  layout: Layout,
  loanId: string,
  records: readonly MappedRecord[],
  expected: Readonly<Record<string, Uint8Array>>,
  timeZone: string,
): string[] {
  const diffs: string[] = [];
  for (const [name, want] of Object.entries(expected)) {
    const file = layout.files.find((f) => f.name === name);
    const rendered = renderExpectedLines(layout, loanId, records, name, timeZone);
    if (file === undefined || typeof rendered === 'string') {
      diffs.push(
        typeof rendered === 'string'
          ? rendered
          : `expected-lines/${name}: the layout declares no file ${name}`,
      );
      continue;
    }
    const got = splitRecords(file, rendered);
    const wantLines = splitRecords(file, want);
    for (let i = 0; i < Math.max(got.length, wantLines.length); i += 1) {
      const g = got[i];
      const w = wantLines[i];
      if (g !== undefined && w !== undefined && sameBytes(g, w)) continue;
      const where = `expected-lines/${name} line ${i + 1}`;
      if (g === undefined || w === undefined) {
        diffs.push(
          `${where}: expected ${w === undefined ? '(no line)' : JSON.stringify(decode(file, w))}, ` +
            `got ${g === undefined ? '(no line)' : JSON.stringify(decode(file, g))}`,
        );
        continue;
      }
      diffs.push(...diffLine(file, where, w, g));
    }
  }
  return diffs;
}

/** One differing line, column by column; the whole line when no column tells them apart. */
function diffLine(file: LayoutFile, where: string, want: Uint8Array, got: Uint8Array): string[] {
  const w = stripEol(want);
  const g = stripEol(got);
  const out: string[] = [];
  if (w.eol !== g.eol) out.push(`${where}: line ending: expected ${eolName(w.eol)}, got ${eolName(g.eol)}`);
  const wantCells = cellsOf(file, w.body);
  const gotCells = cellsOf(file, g.body);
  if (file.format === 'csv' && wantCells.length !== gotCells.length) {
    out.push(`${where}: expected ${wantCells.length} column(s), the layout writes ${gotCells.length}`);
  }
  if (file.format === 'fixed' && w.body.length !== g.body.length) {
    out.push(`${where}: expected ${w.body.length} byte(s), the layout writes ${g.body.length}`);
  }
  const columns: Array<{ label: string; want: string | undefined; got: string | undefined }> = [];
  for (let i = 0; i < Math.max(wantCells.length, gotCells.length); i += 1) {
    const wc = wantCells[i];
    const gc = gotCells[i];
    if (wc?.text === gc?.text) continue;
    columns.push({ label: (gc ?? wc)?.label ?? `column ${i + 1}`, want: wc?.text, got: gc?.text });
  }
  for (const c of columns.slice(0, MAX_COLUMN_DIFFS)) {
    out.push(
      `${where}, column ${c.label}: expected ${c.want === undefined ? '(no column)' : JSON.stringify(c.want)}, ` +
        `got ${c.got === undefined ? '(no column)' : JSON.stringify(c.got)}`,
    );
  }
  if (columns.length > MAX_COLUMN_DIFFS)
    out.push(`${where}: … ${columns.length - MAX_COLUMN_DIFFS} more column(s) differ`);
  if (out.length === 0)
    out.push(
      `${where}: expected ${JSON.stringify(decode(file, want))}, got ${JSON.stringify(decode(file, got))}`,
    );
  return out;
}

interface Cell {
  label: string;
  text: string;
}

/** A record split into its columns, labelled with the layout's column names (by position). */
function cellsOf(file: LayoutFile, body: Uint8Array): Cell[] {
  if (file.format === 'fixed') {
    const cols = [...file.columns].sort((a, b) => a.start - b.start);
    const cells: Cell[] = cols.map((c) => ({
      label: labelOf(c),
      text: decode(file, body.subarray(c.start - 1, c.start - 1 + c.length)),
    }));
    // Bytes no column covers (filler between or after the columns).
    let covered = 0;
    for (const c of cols) covered = Math.max(covered, c.start - 1 + c.length);
    if (body.length > covered)
      cells.push({
        label: `bytes ${covered + 1}-${body.length} (no column)`,
        text: decode(file, body.subarray(covered)),
      });
    return cells;
  }
  return splitCsvRecord(decode(file, body), file.delimiter, file.quote).map((text, i) => ({
    label: file.columns[i] ? labelOf(file.columns[i]) : `${i + 1} (not in the layout)`,
    text,
  }));
}

function labelOf(c: LayoutColumn): string {
  return c.name;
}

/** The cells of one CSV record (quotes removed, doubled quotes undone). */
function splitCsvRecord(text: string, delimiter: string, quote: string): string[] {
  const cells: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i] as string;
    if (quoted) {
      if (ch === quote) {
        if (text[i + 1] === quote) {
          cell += quote;
          i += 1;
        } else quoted = false;
      } else cell += ch;
    } else if (ch === quote) quoted = true;
    else if (ch === delimiter) {
      cells.push(cell);
      cell = '';
    } else cell += ch;
  }
  cells.push(cell);
  return cells;
}

/**
 * The records of a file, each with its line ending: LF ends a record, except inside a quoted CSV
 * cell (a name with a line break stays one record). The ending is compared too.
 */
function splitRecords(file: LayoutFile, bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const lf = 0x0a;
  const quote = file.format === 'csv' ? file.quote.charCodeAt(0) : -1;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < bytes.length; i += 1) {
    if (bytes[i] === quote) quoted = !quoted;
    else if (bytes[i] === lf && !quoted) {
      out.push(bytes.subarray(start, i + 1));
      start = i + 1;
    }
  }
  if (start < bytes.length) out.push(bytes.subarray(start));
  return out;
}

function stripEol(line: Uint8Array): { body: Uint8Array; eol: string } {
  if (line.length >= 2 && line[line.length - 2] === 0x0d && line[line.length - 1] === 0x0a)
    return { body: line.subarray(0, line.length - 2), eol: '\r\n' };
  if (line.length >= 1 && line[line.length - 1] === 0x0a)
    return { body: line.subarray(0, line.length - 1), eol: '\n' };
  return { body: line, eol: '' };
}

const eolName = (eol: string): string =>
  eol === '\r\n' ? 'CRLF' : eol === '\n' ? 'LF' : 'none (last line unterminated)';

function decode(file: LayoutFile, bytes: Uint8Array): string {
  return new TextDecoder(file.encoding === 'utf-8' ? 'utf-8' : 'latin1').decode(bytes);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
