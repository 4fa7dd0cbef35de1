import { z } from 'zod';
import { parseYamlSource, type SourcePos, type YamlSource } from '../../../lib/yaml-source.js';

/**
 * Output layouts of the file core (`layout.yaml` of a mapping set, optional): one entry per batch
 * file, CSV or fixed-width, exactly as the bank's core import job reads it. The layout is the
 * bank's contract with its core vendor, so nothing here is derived from the data: every declared
 * column is always written, in the declared order or position, whatever a day's loans hold.
 */

export const LAYOUT_FILE = 'layout.yaml';

export const ENCODINGS = ['ascii', 'latin1', 'utf-8'] as const;
export type LayoutEncoding = (typeof ENCODINGS)[number];
export const DATE_FORMATS = ['yyyy-mm-dd', 'yyyymmdd', 'mmddyyyy', 'mm/dd/yyyy'] as const;
export type LayoutDateFormat = (typeof DATE_FORMATS)[number];
/** Values a column can take besides a record field: where the record came from, and the batch. */
export const META_SOURCES = ['loanId', 'externalId', 'recordType', 'batchId', 'batchDate'] as const;
/**
 * What a control character in a value becomes: `replace` (default) writes controlReplacement in
 * its place, `reject` quarantines the loan. Line-based import jobs count a newline inside a quoted
 * CSV field as a new record, so no control character reaches a file as it is.
 */
export const CONTROL_POLICIES = ['replace', 'reject'] as const;
export type ControlPolicy = (typeof CONTROL_POLICIES)[number];
/** C0, DEL, C1 (incl. NEL) and the Unicode line and paragraph separators. */
// eslint-disable-next-line no-control-regex
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/gu;
export type MetaSource = (typeof META_SOURCES)[number];

const columnSchema = z
  .strictObject({
    name: z.string().min(1).describe('column header (CSV) or label (fixed-width, for messages)'),
    field: z.string().min(1).optional().describe('a field of the mapped record'),
    value: z.string().optional().describe('a constant (record type code, filler)'),
    source: z
      .enum(META_SOURCES)
      .optional()
      .describe('loanId | externalId | recordType | batchId | batchDate'),
    code: z
      .strictObject({ new: z.string(), correction: z.string() })
      .optional()
      .describe('record code: a first board, or a correction of a loan in a sealed batch'),
    count: z
      .enum(['records', 'loans'])
      .optional()
      .describe('header/trailer: number of detail records or of loans in the file'),
    total: z
      .string()
      .min(1)
      .optional()
      .describe('header/trailer: exact sum of this decimal field over the detail records'),
    start: z.number().int().min(1).optional().describe('fixed-width: first byte, 1-based'),
    length: z.number().int().min(1).optional().describe('fixed-width: width in bytes'),
    align: z.enum(['left', 'right']).optional(),
    pad: z.string().length(1).optional().describe('fixed-width pad character (default space)'),
    decimals: z
      .number()
      .int()
      .min(0)
      .max(18)
      .optional()
      .describe('decimal values are written with exactly this many decimals'),
    implied: z.boolean().optional().describe('with decimals: no decimal point (12345 for 123.45)'),
    dateFormat: z.enum(DATE_FORMATS).optional(),
    transliterate: z
      .boolean()
      .optional()
      .describe('fold accents and ligatures to ASCII (CAFÉ → CAFE, ß → ss)'),
    overflow: z
      .enum(['reject', 'truncate'])
      .optional()
      .describe('a value wider than the column: reject the loan (default) or cut it'),
    neutralise: z
      .boolean()
      .optional()
      .describe(
        'CSV: prefix cells starting with = + - @ tab CR with a quote (default true; turn off for numeric columns)',
      ),
    controlCharacters: z
      .enum(CONTROL_POLICIES)
      .optional()
      .describe("this column's control-character rule (default: the file's)"),
  })
  .refine(
    (c) => [c.field, c.value, c.source, c.code, c.count, c.total].filter((v) => v !== undefined).length === 1,
    {
      error: 'a column takes exactly one of field, value, source, code, count, total',
    },
  );

const fileSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'a plain file name (letters, digits, . _ -)'),
  record: z.string().min(1).describe('record type written to this file (e.g. customer, loan)'),
  format: z.enum(['csv', 'fixed']),
  encoding: z.enum(ENCODINGS).default('utf-8'),
  lineEnding: z.enum(['lf', 'crlf']).default('lf'),
  transliterate: z.boolean().default(false).describe('default of every column'),
  controlCharacters: z
    .enum(CONTROL_POLICIES)
    .default('replace')
    .describe('a control character in a value: replace (default) or reject the loan'),
  controlReplacement: z
    .string()
    .max(1)
    .default(' ')
    .describe('with replace: the character written instead (default a space; "" drops it)'),
  delimiter: z.string().length(1).default(','),
  quote: z.string().length(1).default('"'),
  quoting: z.enum(['needed', 'all']).default('needed'),
  headerRow: z.boolean().default(true).describe('CSV: first line names the columns'),
  recordLength: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('fixed-width: bytes per record (without line ending)'),
  header: z.array(columnSchema).optional().describe('header record (fixed-width or CSV)'),
  columns: z.array(columnSchema).min(1),
  trailer: z.array(columnSchema).optional().describe('trailer record: counts and totals'),
});

const layoutSchema = z.strictObject({
  description: z.string().optional(),
  files: z.array(fileSchema).min(1),
});

export interface LayoutColumn {
  readonly name: string;
  readonly field?: string;
  readonly value?: string;
  readonly source?: MetaSource;
  readonly code?: { readonly new: string; readonly correction: string };
  readonly count?: 'records' | 'loans';
  readonly total?: string;
  readonly start: number;
  readonly length: number;
  readonly align: 'left' | 'right';
  readonly pad: string;
  readonly decimals?: number;
  readonly implied: boolean;
  readonly dateFormat?: LayoutDateFormat;
  readonly transliterate: boolean;
  readonly overflow: 'reject' | 'truncate';
  readonly neutralise: boolean;
  readonly controlCharacters: ControlPolicy;
}

export interface LayoutFile {
  readonly name: string;
  readonly record: string;
  readonly format: 'csv' | 'fixed';
  readonly encoding: LayoutEncoding;
  readonly eol: '\n' | '\r\n';
  readonly delimiter: string;
  readonly quote: string;
  readonly quoteAll: boolean;
  readonly controlReplacement: string;
  readonly headerRow: boolean;
  readonly recordLength: number;
  readonly header: readonly LayoutColumn[] | undefined;
  readonly columns: readonly LayoutColumn[];
  readonly trailer: readonly LayoutColumn[] | undefined;
}

/** Written by the file core into every sealed batch, beside the layout's files. */
export const CONTROL_FILE = 'control.csv';

export interface Layout {
  readonly files: readonly LayoutFile[];
  /** The `layout.yaml` text it was compiled from: a batch keeps it, so it is sealed in its own layout. */
  readonly source: string;
}

/** A problem of `layout.yaml`, at its line and column (the shape of the mapping lint's problems). */
export interface LayoutProblem {
  file: string;
  line: number;
  column: number;
  message: string;
}

export interface LayoutCompileResult {
  layout: Layout | undefined;
  problems: LayoutProblem[];
  /** Not errors: a platform id in a fixed-width column (LayoutRecordCatalogue.idIntoFixedColumn). */
  warnings: LayoutProblem[];
}

/**
 * What the mapping set says about the records a layout writes, for the lint of `layout.yaml`
 * against its set. src/mapping-sets builds it from the compiled mapping (layout-catalogue.ts) and
 * hands it in: the layout never imports the mapping engine, nor the engine the layout.
 */
export interface LayoutRecordCatalogue {
  /** Record type → field → its `maxLength`; undefined when the mapping did not compile (no field checks then). */
  readonly fields: ReadonlyMap<string, ReadonlyMap<string, number | undefined>> | undefined;
  /**
   * The warning text when a fixed-width detail column of `record` would carry a platform id; undefined when
   * it would not.
   */
  idIntoFixedColumn(
    file: string,
    record: string,
    column: { name: string; length: number; source?: MetaSource; field?: string },
  ): string | undefined;
}

type RawFile = z.infer<typeof layoutSchema>['files'][number];
type RawColumn = RawFile['columns'][number];

/** A column as the renderer takes it: the file's settings and the defaults filled in. */
function compiledColumn(c: RawColumn, f: RawFile): LayoutColumn {
  return {
    name: c.name,
    ...(c.field !== undefined ? { field: c.field } : {}),
    ...(c.value !== undefined ? { value: c.value } : {}),
    ...(c.source !== undefined ? { source: c.source } : {}),
    ...(c.code !== undefined ? { code: c.code } : {}),
    ...(c.count !== undefined ? { count: c.count } : {}),
    ...(c.total !== undefined ? { total: c.total } : {}),
    start: c.start ?? 0,
    length: c.length ?? 0,
    align: c.align ?? (c.count !== undefined || c.total !== undefined ? 'right' : 'left'),
    pad: c.pad ?? ' ',
    ...(c.decimals !== undefined ? { decimals: c.decimals } : c.total !== undefined ? { decimals: 2 } : {}),
    implied: c.implied ?? false,
    ...(c.dateFormat !== undefined ? { dateFormat: c.dateFormat } : {}),
    transliterate: c.transliterate ?? f.transliterate,
    overflow: c.overflow ?? 'reject',
    neutralise: c.neutralise ?? true,
    controlCharacters: c.controlCharacters ?? f.controlCharacters,
  } satisfies LayoutColumn;
}

type Section = 'header' | 'columns' | 'trailer';

/**
 * Compiles `layout.yaml`. With the mapping set's catalogue it also checks that every field a column
 * names exists on the record type and that its `maxLength` fits the column width.
 */
export function compileLayout(text: string, catalogue?: LayoutRecordCatalogue): LayoutCompileResult {
  const src = parseYamlSource(LAYOUT_FILE, text, () => true);
  const problems: LayoutProblem[] = src.problems.map((p) => ({ file: LAYOUT_FILE, ...p }));
  const warnings: LayoutProblem[] = [];
  if (problems.length > 0) return { layout: undefined, problems, warnings };
  const at = (pos: SourcePos, message: string): void => {
    problems.push({ file: LAYOUT_FILE, line: pos.line, column: pos.column, message });
  };
  const parsed = layoutSchema.safeParse(coerceNumbers(src.value));
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const path = issue.path;
      const pos =
        issue.code === 'unrecognized_keys' ? src.keyPosOf([...path, issue.keys[0] ?? '']) : src.posOf(path);
      at(pos, `${path.length > 0 ? `${path.join('.')}: ` : ''}${issue.message}`);
    }
    return { layout: undefined, problems, warnings };
  }
  const fieldsByType = catalogue?.fields ?? new Map<string, ReadonlyMap<string, number | undefined>>();
  const checkFields = catalogue?.fields !== undefined;
  const names = new Set<string>();
  const files: LayoutFile[] = parsed.data.files.map((f, fi) => {
    const fpath = ['files', fi];
    if (names.has(f.name.toLowerCase()))
      at(src.posOf([...fpath, 'name']), `file ${f.name} is declared twice`);
    if (f.name.toLowerCase() === CONTROL_FILE)
      at(src.posOf([...fpath, 'name']), `${f.name} is the batch's own control file: name the file otherwise`);
    names.add(f.name.toLowerCase());
    if (checkFields && !fieldsByType.has(f.record)) {
      at(
        src.posOf([...fpath, 'record']),
        `record type ${f.record} is not produced by the mapping (types: ${[...fieldsByType.keys()].join(', ')})`,
      );
    }
    if (f.format === 'fixed' && f.recordLength === undefined)
      at(src.keyPosOf([...fpath, 'format']), 'a fixed-width file needs recordLength');
    if (f.format === 'csv' && f.recordLength !== undefined)
      at(src.keyPosOf([...fpath, 'recordLength']), 'recordLength is for fixed-width files');
    if (new RegExp(CONTROL_CHARACTERS.source, 'u').test(f.controlReplacement)) {
      at(
        src.posOf([...fpath, 'controlReplacement']),
        'controlReplacement must not itself be a control character',
      );
    }
    const recordLength = f.recordLength ?? 0;
    const section = (key: Section, cols: typeof f.columns | undefined): LayoutColumn[] | undefined => {
      if (cols === undefined) return undefined;
      const out = cols.map((c, ci) => {
        const path = [...fpath, key, ci];
        const pos = src.posOf(path);
        if (key === 'columns' && (c.count !== undefined || c.total !== undefined))
          at(pos, `${c.name}: count and total belong in a header or trailer record`);
        if (
          key !== 'columns' &&
          (c.field !== undefined ||
            c.code !== undefined ||
            (c.source !== undefined && c.source !== 'batchId' && c.source !== 'batchDate'))
        ) {
          at(pos, `${c.name}: a ${key} record holds constants, batchId, batchDate, count and total only`);
        }
        const fields = fieldsByType.get(f.record);
        for (const name of [c.field, c.total]) {
          if (name === undefined || !checkFields || !fields) continue;
          if (!fields.has(name))
            at(pos, `${c.name}: ${f.record} has no field ${name} (fields: ${[...fields.keys()].join(', ')})`);
        }
        if (f.format === 'fixed') {
          if (c.start === undefined || c.length === undefined)
            at(pos, `${c.name}: a fixed-width column needs start and length`);
          const max = c.field !== undefined ? fields?.get(c.field) : undefined;
          if (max !== undefined && c.length !== undefined && max > c.length && c.overflow !== 'truncate') {
            at(
              src.posOf([...path, 'length']),
              `${c.name}: field ${f.record}.${c.field} has maxLength ${max}, wider ` +
                `than the column (${c.length} bytes); widen it or set overflow: truncate`,
            );
          }
          if (c.value !== undefined && c.length !== undefined && byteLength(c.value, f.encoding) > c.length) {
            at(
              src.posOf([...path, 'value']),
              `${c.name}: the constant is ${byteLength(c.value, f.encoding)} bytes, the column ${c.length}`,
            );
          }
          if (
            c.code !== undefined &&
            c.length !== undefined &&
            Math.max(byteLength(c.code.new, f.encoding), byteLength(c.code.correction, f.encoding)) > c.length
          ) {
            at(
              src.posOf([...path, 'code']),
              `${c.name}: a code is wider than the column (${c.length} bytes)`,
            );
          }
          if (c.pad !== undefined && byteLength(c.pad, f.encoding) !== 1)
            at(src.posOf([...path, 'pad']), `${c.name}: the pad character must be one byte in ${f.encoding}`);
          const id =
            key === 'columns' && c.length !== undefined
              ? catalogue?.idIntoFixedColumn(f.name, f.record, {
                  name: c.name,
                  length: c.length,
                  ...(c.source !== undefined ? { source: c.source } : {}),
                  ...(c.field !== undefined ? { field: c.field } : {}),
                })
              : undefined;
          if (id !== undefined)
            warnings.push({ file: LAYOUT_FILE, line: pos.line, column: pos.column, message: id });
        } else if (
          c.start !== undefined ||
          c.length !== undefined ||
          c.pad !== undefined ||
          c.align !== undefined
        ) {
          at(pos, `${c.name}: start, length, pad and align are for fixed-width files`);
        }
        if (c.implied !== undefined && c.decimals === undefined)
          at(src.keyPosOf([...path, 'implied']), `${c.name}: implied needs decimals`);
        return compiledColumn(c, f);
      });
      if (f.format === 'fixed' && f.recordLength !== undefined)
        checkCoverage(src, at, [...fpath, key], out, recordLength);
      return out;
    };
    return {
      name: f.name,
      record: f.record,
      format: f.format,
      encoding: f.encoding,
      eol: f.lineEnding === 'crlf' ? '\r\n' : '\n',
      delimiter: f.delimiter,
      quote: f.quote,
      quoteAll: f.quoting === 'all',
      controlReplacement: f.controlReplacement,
      headerRow: f.format === 'csv' && f.headerRow,
      recordLength,
      header: section('header', f.header),
      columns: section('columns', f.columns) ?? [],
      trailer: section('trailer', f.trailer),
    };
  });
  return problems.length > 0
    ? { layout: undefined, problems, warnings }
    : { layout: { files, source: text }, problems, warnings };
}

/** Fixed-width positions: every byte of 1..recordLength belongs to exactly one column. */
function checkCoverage(
  src: YamlSource,
  at: (p: SourcePos, m: string) => void,
  path: PropertyKey[],
  cols: readonly LayoutColumn[],
  recordLength: number,
): void {
  const order = cols
    .map((c, i) => ({ c, i }))
    .filter(({ c }) => c.length > 0)
    .sort((a, b) => a.c.start - b.c.start);
  let next = 1;
  for (const { c, i } of order) {
    const pos = src.posOf([...path, i, 'start']);
    if (c.start < next)
      at(
        pos,
        `${c.name}: bytes ${c.start}-${c.start + c.length - 1} overlap the previous column (which ends at ${next - 1})`,
      );
    else if (c.start > next)
      at(pos, `${c.name}: gap at bytes ${next}-${c.start - 1} (declare a filler column with value: "")`);
    next = Math.max(next, c.start + c.length);
  }
  if (next - 1 > recordLength)
    at(src.posOf(path), `columns end at byte ${next - 1}, past recordLength ${recordLength}`);
  else if (next - 1 < recordLength)
    at(
      src.posOf(path),
      `gap at bytes ${next}-${recordLength} before the end of the record (declare a filler column)`,
    );
}

const UTF8 = new TextEncoder();

/**
 * Bytes of a string in a layout's encoding: UTF-8 bytes, or one byte per character in ascii and
 * latin1 (a character those lack counts as one: rendering refuses or transliterates it first).
 * The one measure of the lint (constants, codes, pad) and of the renderer (column widths).
 */
export function byteLength(s: string, encoding: LayoutEncoding): number {
  if (encoding !== 'utf-8') return [...s].length;
  return UTF8.encode(s).length;
}

/**
 * YAML keeps scalars as text in this parse (so `0012` survives); numbers are parsed back where the schema
 * wants them.
 */
function coerceNumbers(value: unknown, key = ''): unknown {
  if (Array.isArray(value)) return value.map((v) => coerceNumbers(v));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, coerceNumbers(v, k)]),
    );
  }
  if (typeof value === 'string' && NUMERIC_KEYS.has(key) && /^\d+$/.test(value)) return Number(value);
  if (typeof value === 'string' && BOOLEAN_KEYS.has(key) && (value === 'true' || value === 'false'))
    return value === 'true';
  return value;
}
const NUMERIC_KEYS = new Set(['start', 'length', 'decimals', 'recordLength']);
const BOOLEAN_KEYS = new Set(['implied', 'transliterate', 'neutralise', 'headerRow']);
