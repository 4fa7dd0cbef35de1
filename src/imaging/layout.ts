import jsonata from 'jsonata';
import { z } from 'zod';
import { parseCsv, CsvError } from '../lib/csv.js';
import { pictureProblem } from '../lib/calendar.js';
import { syntaxProblemOf } from '../mapping/expression.js';
import { parseYamlSource, type SourcePos } from '../lib/yaml-source.js';

/**
 * Index layouts of the imaging export (`imaging/*.yaml` of a mapping set): what the bank's imaging
 * system (OnBase DIP, Synergy, Laserfiche Import Agent…) reads beside the document files. The bank
 * writes it, like the file core's layout.yaml: the format (tagged, delimited, fixed-width), the
 * fields in order with a JSONata expression each over the loan, the document's owner, the document
 * and the identity block, and the lookup from the platform's document category and requirement to
 * the bank's document type (which must already exist in the imaging system).
 */

export const IMAGING_FORMATS = ['tagged', 'delimited', 'fixed'] as const;
export type ImagingFormat = (typeof IMAGING_FORMATS)[number];
/** What a `file:` field takes from the exported file, filled in when the batch is written. */
export const FILE_PARTS = ['name', 'path', 'sha256', 'bytes', 'batch'] as const;
export type FilePart = (typeof FILE_PARTS)[number];
/** OnBase: "Tags must be 20 characters or fewer" (Document Import Processor, tagged index). */
export const MAX_TAG_LENGTH = 20;

const plainName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { error: 'expected a plain file name, e.g. index.txt' });

const fieldSchema = z.strictObject({
  name: z.string().min(1).optional(),
  tag: z.string().min(1).optional(),
  value: z.string().min(1).optional(),
  file: z.enum(FILE_PARTS, { error: `expected one of ${FILE_PARTS.join(', ')}` }).optional(),
  date: z.string().min(1).optional(),
  width: z.number().int().min(1).optional(),
  align: z.enum(['left', 'right']).optional(),
  pad: z.string().length(1).optional(),
  required: z.boolean().optional(),
  maxLength: z.number().int().min(1).optional(),
});

const layoutSchema = z.strictObject({
  description: z.string().optional(),
  format: z.enum(IMAGING_FORMATS, { error: `expected one of ${IMAGING_FORMATS.join(', ')}` }),
  indexFile: plainName.default('index.txt'),
  encoding: z.enum(['utf-8', 'latin1', 'ascii']).default('utf-8'),
  lineEnding: z.enum(['crlf', 'lf']).default('crlf'),
  /** tagged: lines written once at the top of the index (OnBase self-configuring: its banner). */
  header: z.array(z.string()).default([]),
  /** tagged: the begin-document line of every record. */
  begin: z.string().min(1).optional(),
  /** tagged: a field whose value is empty is left out (default) or written with the tag alone. */
  skipEmpty: z.boolean().default(true),
  delimiter: z.string().length(1).default('|'),
  /** delimited: a first line of field names. */
  headerRow: z.boolean().default(false),
  /** Put before `file: path` values: where the importer sees the export folder (a UNC path on Windows). */
  filePathPrefix: z.string().default(''),
  pathSeparator: z.enum(['\\', '/']).default('\\'),
  documentTypes: z
    .strictObject({
      /** CSV in the set's imaging/ directory: category,requirement,documentType (`*` matches any). */
      lookup: z.string().min(1).optional(),
      default: z.string().min(1),
    })
    .optional(),
  fields: z.array(fieldSchema).min(1, { error: 'expected at least one field' }),
});

export interface ImagingField {
  readonly label: string;
  readonly tag: string | undefined;
  readonly value: string | undefined;
  readonly expr: jsonata.Expression | undefined;
  readonly file: FilePart | undefined;
  readonly date: string | undefined;
  readonly width: number | undefined;
  readonly align: 'left' | 'right';
  readonly pad: string;
  readonly required: boolean;
  readonly maxLength: number | undefined;
  /** Where the field is declared (for the errors of a loan that does not fit it). */
  readonly at: string;
}

export interface DocumentTypeRule {
  category: string;
  requirement: string;
  documentType: string;
}

export interface ImagingLayout {
  /** The file (relative to the mapping set) and its text: a batch keeps the layout it was opened in. */
  readonly file: string;
  readonly source: string;
  readonly format: ImagingFormat;
  readonly indexFile: string;
  readonly encoding: 'utf-8' | 'latin1' | 'ascii';
  readonly lineEnding: '\r\n' | '\n';
  readonly header: readonly string[];
  readonly begin: string | undefined;
  readonly skipEmpty: boolean;
  readonly delimiter: string;
  readonly headerRow: boolean;
  readonly filePathPrefix: string;
  readonly pathSeparator: '\\' | '/';
  readonly documentTypes: { rules: readonly DocumentTypeRule[]; fallback: string } | undefined;
  readonly fields: readonly ImagingField[];
}

export interface ImagingLayoutProblem {
  file: string;
  line: number;
  column: number;
  message: string;
}

/** `yaml` keeps numbers typed; widths may be written as "12": taken as numbers. */
function coerce(v: unknown, key?: string): unknown {
  if (Array.isArray(v)) return v.map((x) => coerce(x));
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, coerce(x, k)]));
  if ((key === 'width' || key === 'maxLength') && typeof v === 'string' && /^\d+$/.test(v)) return Number(v);
  if ((key === 'required' || key === 'skipEmpty' || key === 'headerRow') && (v === 'true' || v === 'false'))
    return v === 'true';
  return v;
}

/**
 * Compiles an index layout. `file` is its path in the mapping set (messages name it);
 * `read` reads another file of the set's imaging/ directory (the document-type lookup).
 */
export function compileImagingLayout(
  file: string,
  text: string,
  read: (rel: string) => string | undefined,
): { layout: ImagingLayout | undefined; problems: ImagingLayoutProblem[] } {
  const src = parseYamlSource(file, text, () => true);
  const problems: ImagingLayoutProblem[] = src.problems.map((p) => ({ file, ...p }));
  if (problems.length > 0) return { layout: undefined, problems };
  const at = (pos: SourcePos, message: string, inFile = file): void => {
    problems.push({ file: inFile, line: pos.line, column: pos.column, message });
  };
  const parsed = layoutSchema.safeParse(coerce(src.value));
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const path = issue.path;
      const pos =
        issue.code === 'unrecognized_keys' ? src.keyPosOf([...path, issue.keys[0] ?? '']) : src.posOf(path);
      const what =
        issue.code === 'unrecognized_keys' ? `unknown key ${issue.keys.join(', ')}` : issue.message;
      at(pos, `${path.length > 0 ? `${path.join('.')}: ` : ''}${what}`);
    }
    return { layout: undefined, problems };
  }
  const l = parsed.data;
  if (l.format === 'tagged' && l.begin === undefined)
    at(src.posOf(['format']), 'begin: required for a tagged index (the line that starts each document)');
  const fields: ImagingField[] = l.fields.map((f, i) => {
    const path = ['fields', i];
    const pos = src.posOf(path);
    const label = f.name ?? f.tag?.trim() ?? `field ${i + 1}`;
    if ((f.value === undefined) === (f.file === undefined))
      at(pos, `fields.${i}: give exactly one of value (an expression) or file (${FILE_PARTS.join(', ')})`);
    if (l.format === 'tagged') {
      if (f.tag === undefined) at(pos, `fields.${i}: tag: required in a tagged index`);
      else if (f.tag.trim().length > MAX_TAG_LENGTH)
        at(
          src.posOf([...path, 'tag']),
          `fields.${i}.tag: "${f.tag.trim()}" is ${f.tag.trim().length} characters; ` +
            `an imaging tag is at most ${MAX_TAG_LENGTH}`,
        );
    }
    if (l.format === 'fixed' && f.width === undefined)
      at(pos, `fields.${i}: width: required in a fixed-width index`);
    if (l.format === 'delimited' && l.headerRow && f.name === undefined)
      at(pos, `fields.${i}: name: required when headerRow is true`);
    if (f.date !== undefined) {
      const bad = pictureProblem(normaliseDate(f.date));
      if (bad !== null) at(src.posOf([...path, 'date']), `fields.${i}.date: ${bad}`);
    }
    let expr: jsonata.Expression | undefined;
    if (f.value !== undefined) {
      try {
        expr = jsonata(f.value);
      } catch (err) {
        const s = syntaxProblemOf(err);
        at(
          src.posInScalar([...path, 'value'], s.offset),
          `fields.${i}.value: JSONata syntax error: ${s.message}`,
        );
      }
    }
    return {
      label,
      tag: f.tag,
      value: f.value,
      expr,
      file: f.file,
      date: f.date === undefined ? undefined : normaliseDate(f.date),
      width: f.width,
      align: f.align ?? 'left',
      pad: f.pad ?? ' ',
      required: f.required ?? false,
      maxLength: f.maxLength,
      at: `${file}:${pos.line}`,
    };
  });
  if (!fields.some((f) => f.file === 'name' || f.file === 'path'))
    at(src.posOf(['fields']), 'fields: no field names the document file (file: name or file: path)');
  let documentTypes: ImagingLayout['documentTypes'];
  if (l.documentTypes !== undefined) {
    const rules: DocumentTypeRule[] = [];
    const lookup = l.documentTypes.lookup;
    if (lookup !== undefined) {
      const rel = lookupPath(file, lookup);
      const csv = read(rel);
      if (csv === undefined)
        at(src.posOf(['documentTypes', 'lookup']), `documentTypes.lookup: ${rel} not found`);
      else {
        try {
          const rows = parseCsv(csv);
          const head = rows[0]?.cells.map((c) => c.trim()) ?? [];
          const want = ['category', 'requirement', 'documentType'];
          if (want.some((w, j) => head[j] !== w))
            at({ line: 1, column: 1 }, `header must be ${want.join(',')}`, rel);
          for (const r of rows.slice(1)) {
            const [category = '', requirement = '', documentType = ''] = r.cells.map((c) => c.trim());
            if (documentType === '') at({ line: r.line, column: 1 }, 'documentType is empty', rel);
            else rules.push({ category, requirement, documentType });
          }
        } catch (err) {
          if (err instanceof CsvError) at({ line: err.line, column: err.column }, err.message, rel);
          else throw err;
        }
      }
    }
    documentTypes = { rules, fallback: l.documentTypes.default };
  }
  if (problems.length > 0) return { layout: undefined, problems };
  return {
    layout: {
      file,
      source: text,
      format: l.format,
      indexFile: l.indexFile,
      encoding: l.encoding,
      lineEnding: l.lineEnding === 'crlf' ? '\r\n' : '\n',
      header: l.header,
      begin: l.begin,
      skipEmpty: l.skipEmpty,
      delimiter: l.delimiter,
      headerRow: l.headerRow,
      filePathPrefix: l.filePathPrefix,
      pathSeparator: l.pathSeparator,
      documentTypes,
      fields,
    },
    problems,
  };
}

/** The lookup's path in the set: beside the layout file. */
function lookupPath(layoutFile: string, lookup: string): string {
  const slash = layoutFile.lastIndexOf('/');
  return slash < 0 ? lookup : `${layoutFile.slice(0, slash + 1)}${lookup}`;
}

/**
 * Dates are written as imaging manuals write them (MM/DD/YYYY, YYYYMMDD): upper-case day and year
 * letters become the calendar picture's (yyyy, dd); MM stays the month.
 */
export function normaliseDate(picture: string): string {
  return picture.replace(/YYYY/g, 'yyyy').replace(/YY/g, 'yy').replace(/DD/g, 'dd');
}
