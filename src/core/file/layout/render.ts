import { formatWallTime, toWallTime } from '../../../lib/calendar.js';
import { formatUnits } from '../../../lib/decimal.js';
import { neutraliseFormula } from '../../../lib/formula.js';
import { byteLength, CONTROL_CHARACTERS, type LayoutColumn, type LayoutFile } from './layout.js';
import type { MappedRecord } from '../../../contract/records.js';

/**
 * Renders mapped records into the lines of a declared layout. Pure and per record: a line depends
 * only on its own record, the bank's time zone and whether it is a first board or a correction
 * (both kinds are rendered in one pass), so a batch can store each loan's lines once and never
 * render them again. Header and trailer records are rendered at seal time from counts and exact
 * totals.
 */

export class LayoutRenderError extends Error {
  override readonly name = 'LayoutRenderError';
}

export type RowKind = 'new' | 'correction';

/** What a loan's lines depend on besides its records. */
export interface LoanContext {
  loanId: string;
  /** The bank's IANA time zone (config bank.timeZone): a date column shows an instant's day there. */
  timeZone: string;
}

export interface RecordContext extends LoanContext {
  kind: RowKind;
}

export interface BatchSummary {
  batchId: string;
  /** The bank's IANA time zone, as for the detail records. */
  timeZone: string;
  /** yyyy-mm-dd (bank day the batch was opened). */
  batchDate: string;
  records: number;
  loans: number;
  /** Exact sums by `totalKey(column)`, in units of 10^-decimals. */
  totals: ReadonlyMap<string, bigint>;
}

/** The lines (without line ending) and total contributions of one loan in one file. */
export interface RenderedRows {
  lines: string[];
  /** totalKey → scaled integer as a decimal string (BigInt-safe, JSON-safe). */
  amounts: Record<string, string>;
}

/**
 * One loan's rows in one file, for both kinds of board (the store decides which it is, in its
 * write transaction): every value is read and formatted once; only `code` columns differ between
 * the two, and without one both kinds share the same lines.
 */
export interface RenderedLoanRows {
  new: RenderedRows;
  correction: RenderedRows;
}

/**
 * Renders every record of the file's record type, as a first board and as a correction; empty lists when the
 * loan has none.
 */
export function renderLoanRows(
  file: LayoutFile,
  records: readonly MappedRecord[],
  ctx: LoanContext,
): RenderedLoanRows {
  const lines: string[] = [];
  const corrections: string[] = [];
  const amounts: Record<string, bigint> = {};
  const withCode = file.columns.some((c) => c.code !== undefined);
  // One sum per field and scale, however many header/trailer columns show it.
  const totalCols = [
    ...new Map(
      [...(file.header ?? []), ...(file.trailer ?? [])]
        .filter((c) => c.total !== undefined)
        .map((c) => [totalKey(c), c]),
    ).values(),
  ];
  for (const rec of records) {
    if (rec.type !== file.record) continue;
    const cells = file.columns.map((c) => ({
      c,
      out: cellOut(file, c, detailValue(c, rec, ctx, 'new'), ctx.timeZone),
    }));
    lines.push(joinCells(file, cells));
    if (withCode)
      corrections.push(
        joinCells(
          file,
          cells.map((x) =>
            x.c.code === undefined
              ? x
              : { c: x.c, out: cellOut(file, x.c, x.c.code.correction, ctx.timeZone) },
          ),
        ),
      );
    for (const c of totalCols) {
      const key = totalKey(c);
      const v = rec.fields[c.total as string];
      if (v === null || v === undefined || v === '') continue;
      amounts[key] =
        (amounts[key] ?? 0n) +
        scaled(cellText(v), c.decimals ?? 2, `${file.name} ${c.name} (${rec.type}.${c.total})`);
    }
  }
  const sums = Object.fromEntries(Object.entries(amounts).map(([k, v]) => [k, v.toString()]));
  return {
    new: { lines, amounts: sums },
    correction: { lines: withCode ? corrections : lines, amounts: sums },
  };
}

/** Renders every record of the file's record type for one kind of board; an empty list when the loan has none. */
export function renderRows(
  file: LayoutFile,
  records: readonly MappedRecord[],
  ctx: RecordContext,
): RenderedRows {
  return renderLoanRows(file, records, ctx)[ctx.kind];
}

export function totalKey(c: LayoutColumn): string {
  return `${c.total ?? ''}@${c.decimals ?? 2}`;
}

/** The CSV header row, or undefined when the file has none. */
export function headerRowLine(file: LayoutFile): string | undefined {
  if (file.format !== 'csv' || !file.headerRow) return undefined;
  return file.columns.map((c) => csvCell(file, { ...c, neutralise: false }, c.name)).join(file.delimiter);
}

export function summaryLine(
  file: LayoutFile,
  section: 'header' | 'trailer',
  s: BatchSummary,
): string | undefined {
  const cols = section === 'header' ? file.header : file.trailer;
  if (cols === undefined) return undefined;
  return renderLine(file, cols, s.timeZone, (c) => {
    if (c.value !== undefined) return c.value;
    if (c.source === 'batchId') return s.batchId;
    if (c.source === 'batchDate') return s.batchDate;
    if (c.count !== undefined) return String(c.count === 'records' ? s.records : s.loans);
    // A plain decimal here: formatValue applies the column's decimals and implied point once.
    if (c.total !== undefined) return formatScaled(s.totals.get(totalKey(c)) ?? 0n, c.decimals ?? 2, false);
    return '';
  });
}

function detailValue(c: LayoutColumn, rec: MappedRecord, ctx: LoanContext, kind: RowKind): unknown {
  if (c.field !== undefined) return rec.fields[c.field];
  if (c.value !== undefined) return c.value;
  if (c.code !== undefined) return kind === 'correction' ? c.code.correction : c.code.new;
  switch (c.source) {
    case 'loanId':
      return ctx.loanId;
    case 'externalId':
      return rec.externalId;
    case 'recordType':
      return rec.type;
    default:
      return null;
  }
}

function renderLine(
  file: LayoutFile,
  cols: readonly LayoutColumn[],
  timeZone: string,
  valueOf: (c: LayoutColumn) => unknown,
): string {
  return joinCells(
    file,
    cols.map((c) => ({ c, out: cellOut(file, c, valueOf(c), timeZone) })),
  );
}

/** One column's cell as written: formatted, then quoted (CSV) or padded to its width (fixed). */
function cellOut(file: LayoutFile, c: LayoutColumn, raw: unknown, timeZone: string): string {
  const text = raw === null || raw === undefined ? '' : formatValue(file, c, raw, timeZone);
  return file.format === 'csv' ? csvCell(file, c, text) : fixedCell(file, c, text);
}

function joinCells(file: LayoutFile, cells: ReadonlyArray<{ c: LayoutColumn; out: string }>): string {
  if (file.format === 'csv') return cells.map((x) => x.out).join(file.delimiter);
  return cells
    .slice()
    .sort((a, b) => a.c.start - b.c.start)
    .map((x) => x.out)
    .join('');
}

function formatValue(file: LayoutFile, c: LayoutColumn, raw: unknown, timeZone: string): string {
  const text = cellText(raw);
  if (text === '') return '';
  const where = `${file.name} ${c.name}`;
  if (c.dateFormat !== undefined) {
    // An instant (Z or an offset) shows its day in the bank's zone, never its UTC day; a date, or a
    // date-time without offset, is already the bank's calendar value and is written as it is.
    const wall = toWallTime(text, timeZone);
    if (wall === null)
      throw new LayoutRenderError(
        `${where}: a value of ${text.length} characters is not a ` +
          `date (yyyy-mm-dd) or an ISO 8601 date-time of a real day`,
      );
    const [y, mo, d] = formatWallTime(wall, 'yyyy-MM-dd').split('-') as [string, string, string];
    switch (c.dateFormat) {
      case 'yyyymmdd':
        return `${y}${mo}${d}`;
      case 'mmddyyyy':
        return `${mo}${d}${y}`;
      case 'mm/dd/yyyy':
        return `${mo}/${d}/${y}`;
      default:
        return `${y}-${mo}-${d}`;
    }
  }
  if (c.decimals !== undefined) return formatScaled(scaled(text, c.decimals, where), c.decimals, c.implied);
  return text;
}

function cellText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}

/**
 * A decimal text as an integer of 10^-decimals units; refuses to drop non-zero digits (money never rounds
 * silently).
 */
export function scaled(text: string, decimals: number, where: string): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text.trim());
  if (!m)
    throw new LayoutRenderError(`${where}: a value of ${text.length} characters is not a decimal number`);
  const frac = m[3] ?? '';
  if (frac.length > decimals && /[^0]/.test(frac.slice(decimals))) {
    throw new LayoutRenderError(`${where}: ${text} has more than ${decimals} decimal(s)`);
  }
  return BigInt(`${m[1] ?? ''}${m[2] ?? '0'}${frac.slice(0, decimals).padEnd(decimals, '0')}`);
}

/**
 * A scaled total or value as text: with its decimal point, or without one for an implied-decimal column
 * (12345 for 123.45).
 */
export function formatScaled(v: bigint, decimals: number, implied: boolean): string {
  const text = formatUnits(v, decimals);
  return implied ? text.replace('.', '') : text;
}

/**
 * A value without control characters (layout `controlCharacters`): replaced by the file's
 * controlReplacement, or the loan is refused with a message naming the file and column, and the
 * character's code point, never the value (it may be a name or a tax id).
 */
function withoutControls(file: LayoutFile, c: LayoutColumn, text: string): string {
  CONTROL_CHARACTERS.lastIndex = 0;
  if (!CONTROL_CHARACTERS.test(text)) return text;
  if (c.controlCharacters === 'reject') {
    CONTROL_CHARACTERS.lastIndex = 0;
    const ch = CONTROL_CHARACTERS.exec(text)?.[0] ?? '';
    const code = `U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
    throw new LayoutRenderError(
      `${file.name} ${c.name}: the value holds a control character ` +
        `(${code}); the layout says controlCharacters: reject`,
    );
  }
  return text.replace(CONTROL_CHARACTERS, file.controlReplacement);
}

function csvCell(file: LayoutFile, c: LayoutColumn, text: string): string {
  // Before anything else: a newline inside a quoted field is still a new line to a line-based import job.
  const clean = withoutControls(file, c, text);
  let t = c.neutralise ? neutraliseFormula(clean) : clean;
  t = representable(file, c, t);
  const q = file.quote;
  if (file.quoteAll || t.includes(file.delimiter) || t.includes(q) || /[\r\n]/.test(t) || t !== t.trim()) {
    return `${q}${t.replaceAll(q, q + q)}${q}`;
  }
  return t;
}

function fixedCell(file: LayoutFile, c: LayoutColumn, text: string): string {
  // A control character (a newline in a name) would break the record structure the import job counts on.
  let t = representable(file, c, withoutControls(file, c, text));
  let bytes = byteLength(t, file.encoding);
  if (bytes > c.length) {
    if (c.overflow !== 'truncate') {
      throw new LayoutRenderError(
        `${file.name} ${c.name}: the value is ${bytes} bytes in ${file.encoding}, the column ${c.length}`,
      );
    }
    const chars = [...t];
    while (bytes > c.length) {
      chars.pop();
      t = chars.join('');
      bytes = byteLength(t, file.encoding);
    }
  }
  const padding = c.pad.repeat(c.length - bytes);
  if (c.align === 'left') return t + padding;
  if (c.pad === '0' && t.startsWith('-')) return `-${padding}${t.slice(1)}`;
  return padding + t;
}

function representable(file: LayoutFile, c: LayoutColumn, text: string): string {
  const t = c.transliterate ? transliterate(text) : text;
  const max = file.encoding === 'ascii' ? 0x7f : file.encoding === 'latin1' ? 0xff : Infinity;
  if (max === Infinity) return t;
  let out = '';
  for (const ch of t) {
    if ((ch.codePointAt(0) ?? 0) <= max) out += ch;
    else if (c.transliterate) out += '?';
    else
      throw new LayoutRenderError(
        `${file.name} ${c.name}: ${JSON.stringify(ch)} cannot be written in ${file.encoding} (set transliterate: true)`,
      );
  }
  return out;
}

const FOLD: Record<string, string> = {
  ß: 'ss',
  ẞ: 'SS',
  Æ: 'AE',
  æ: 'ae',
  Ø: 'O',
  ø: 'o',
  Ł: 'L',
  ł: 'l',
  Đ: 'D',
  đ: 'd',
  Ð: 'D',
  ð: 'd',
  Œ: 'OE',
  œ: 'oe',
  Þ: 'TH',
  þ: 'th',
  ı: 'i',
  Ħ: 'H',
  ħ: 'h',
  '\u2018': "'",
  '\u2019': "'",
  '\u201c': '"',
  '\u201d': '"',
  '\u2013': '-',
  '\u2014': '-',
  '\u00a0': ' ',
  '\u2026': '...',
};

/** Folds a name to ASCII: accents dropped (É → E), ligatures and special letters spelled out (ß → ss). */
export function transliterate(text: string): string {
  let out = '';
  for (const ch of text.normalize('NFD').replace(/[\u0300-\u036f]/g, '')) out += FOLD[ch] ?? ch;
  return out;
}

/** A line as the bytes of the file's encoding (characters were checked when the line was rendered). */
/** The encoded lines of a file, one after the other (a batch file, a fixture's expected bytes). */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function encodeLine(file: LayoutFile, line: string): Uint8Array {
  const text = line + file.eol;
  if (file.encoding === 'utf-8') return new TextEncoder().encode(text);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i += 1) bytes[i] = text.charCodeAt(i) & 0xff;
  return bytes;
}
