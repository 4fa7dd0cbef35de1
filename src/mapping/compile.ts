import jsonata from 'jsonata';
import type { z } from 'zod';
import { isValidTimeZone } from './calendar.js';
import { CsvError, parseCsv } from './csv.js';
import { analyzeExpression, checkExpression, syntaxProblemOf, type AnalysisContext, type ExpressionInfo, type ExprNode } from './expression.js';
import { buildFieldCheck, type FieldCheck } from './fieldSchema.js';
import { FrequencyTable } from './frequency.js';
import { BOUND_VARIABLES, HELPER_ARITY, helperImplementations, registerHelpers, type HelperContext } from './helpers.js';
import type { LookupTable } from './lookups.js';
import { mappingFileSchema, type MappingFile } from './spec.js';
import { parseYamlSource, type SourcePos, type YamlSource } from './yamlSource.js';

export const MAIN_FILE = 'mapping.yaml';

export interface MapperOptions {
  /** IANA zone in which `$date` derives core dates (config bank.timeZone). */
  timeZone: string;
  /** Let `$tin` return the masked form instead of raising tin_incomplete (config mappings.allowLast4Tin). */
  allowLast4Tin: boolean;
  /** Bank defaults (config mappings.defaults): override the mapping file's defaults. */
  defaults: Readonly<Record<string, string | number | boolean>>;
  /** Evaluation timeout per expression (config mappings.timeoutMs). */
  timeoutMs: number;
}

export const DEFAULT_MAPPER_OPTIONS: MapperOptions = { timeZone: 'America/Chicago', allowLast4Tin: false, defaults: {}, timeoutMs: 1_000 };

/** A lint/load problem, always with file:line:column. */
export interface LintProblem {
  file: string;
  line: number;
  column: number;
  message: string;
}

export function formatProblem(p: LintProblem): string {
  return `${p.file}:${p.line}:${p.column}: ${p.message}`;
}

/** Reads a file of the mapping set by path relative to its directory; undefined when absent. */
export type SourceReader = (relativePath: string) => string | undefined;

export interface CompiledExpression {
  readonly source: string;
  readonly expr: jsonata.Expression;
  readonly info: ExpressionInfo;
  readonly file: string;
  /** YAML path of the expression, to locate offsets inside it. */
  readonly yamlPath: readonly string[];
  readonly pos: SourcePos;
  posAt(offset: number): SourcePos;
}

export interface CompiledField {
  readonly name: string;
  readonly expr: CompiledExpression;
  readonly check: FieldCheck;
  /** What a failure means: warn (leave out / fallback, a review item) or quarantine the loan. */
  readonly onError: 'warn' | 'quarantine';
  readonly fallback?: string | number | boolean;
}

export interface CompiledTarget {
  readonly name: string;
  readonly type: string;
  readonly forEach: CompiledExpression | undefined;
  readonly lets: ReadonlyArray<{ readonly name: string; readonly expr: CompiledExpression }>;
  readonly checks: ReadonlyArray<{ readonly name: string; readonly expr: CompiledExpression }>;
  readonly externalId: CompiledExpression;
  readonly fields: readonly CompiledField[];
}

export interface CompiledOverride {
  readonly defaults: Readonly<Record<string, string>>;
  /** target → field → expression */
  readonly fields: ReadonlyMap<string, ReadonlyMap<string, CompiledExpression>>;
}

export interface CompiledMapping {
  readonly name: string;
  readonly label: string;
  readonly targets: readonly CompiledTarget[];
  readonly defaults: Readonly<Record<string, string>>;
  readonly overrides: ReadonlyMap<string, CompiledOverride>;
  readonly lookups: ReadonlyMap<string, LookupTable>;
  readonly options: MapperOptions;
}

export interface CompileResult {
  problems: LintProblem[];
  mapping: CompiledMapping | undefined;
  /** Every file read (relative path → text), for the content hash. */
  sources: Map<string, string>;
}

/** lookups and defaults keep the text as written (YAML 1.2 would read `0012` as 12). */
function keepText(path: readonly string[]): boolean {
  const [a, , c] = path;
  if (a === 'defaults') return path.length === 2;
  if (a === 'lookups') return (c === 'values' && path.length === 4) || (c === 'default' && path.length === 3);
  if (a === 'overrides') return c === 'defaults' && path.length === 4;
  return false;
}

const asText = (v: string | number | boolean): string => String(v);

function zodProblems(src: YamlSource, error: z.ZodError): LintProblem[] {
  const out: LintProblem[] = [];
  const add = (issue: z.core.$ZodIssue, prefix: readonly PropertyKey[]): void => {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      // report the branch that got furthest: its problems are the ones the engineer meant
      const best = [...issue.errors].sort((x, y) => depth(y) - depth(x))[0] ?? [];
      for (const sub of best) add(sub, path);
      return;
    }
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) out.push({ file: src.file, ...src.keyPosOf([...path, k]), message: `${[...path, k].map(String).join('.')}: unknown key` });
      return;
    }
    out.push({ file: src.file, ...src.posOf(path), message: `${path.map(String).join('.') || '(file)'}: ${issue.message}` });
  };
  const depth = (issues: z.core.$ZodIssue[]): number => Math.max(0, ...issues.map((i) => i.path.length + (i.code === 'invalid_type' ? 0 : 0.5)));
  for (const issue of error.issues) add(issue, []);
  return out;
}

/**
 * Parses, validates and compiles a mapping set. Pure apart from `read`. Every problem found is
 * reported (not just the first), each with file:line:column.
 */
export function compileMapping(read: SourceReader, options: MapperOptions = DEFAULT_MAPPER_OPTIONS): CompileResult {
  const sources = new Map<string, string>();
  const problems: LintProblem[] = [];
  const text = read(MAIN_FILE);
  if (text === undefined) return { problems: [{ file: MAIN_FILE, line: 1, column: 1, message: `${MAIN_FILE} not found in the mapping directory` }], mapping: undefined, sources };
  sources.set(MAIN_FILE, text);
  if (!isValidTimeZone(options.timeZone)) problems.push({ file: MAIN_FILE, line: 1, column: 1, message: `bank time zone "${options.timeZone}" is not an IANA time zone` });

  const src = parseYamlSource(MAIN_FILE, text, keepText);
  for (const p of src.problems) problems.push({ file: MAIN_FILE, line: p.line, column: p.column, message: p.message });
  if (src.value === undefined) return { problems, mapping: undefined, sources };
  const parsed = mappingFileSchema.safeParse(src.value);
  if (!parsed.success) return { problems: [...problems, ...zodProblems(src, parsed.error)], mapping: undefined, sources };
  const file: MappingFile = parsed.data;

  // lookups
  const lookups = new Map<string, LookupTable>();
  for (const [name, spec] of Object.entries(file.lookups)) {
    const fallback = spec.default === undefined ? undefined : asText(spec.default);
    if ('values' in spec) {
      const values = new Map(Object.entries(spec.values).map(([k, v]) => [k, asText(v)]));
      lookups.set(name, { name, values, fallback, file: MAIN_FILE, ...(spec.warnOnDefault === true ? { warnOnDefault: true } : {}) });
      continue;
    }
    const csvText = read(spec.csv);
    if (csvText === undefined) {
      problems.push({ file: MAIN_FILE, ...src.posOf(['lookups', name, 'csv']), message: `lookups.${name}: cannot read ${spec.csv}` });
      continue;
    }
    sources.set(spec.csv, csvText);
    const table = csvLookup(name, spec.csv, csvText, spec.key, spec.value, fallback, problems);
    if (table) lookups.set(name, table);
  }

  const frequencies = new FrequencyTable(file.frequencies);
  const helperCtx: HelperContext = { timeZone: options.timeZone, allowLast4Tin: options.allowLast4Tin, lookups, frequencies };
  const helpers = helperImplementations(helperCtx);
  const configDefaults = Object.fromEntries(Object.entries(options.defaults).map(([k, v]) => [k, asText(v)]));
  const defaults = { ...Object.fromEntries(Object.entries(file.defaults).map(([k, v]) => [k, asText(v)])), ...configDefaults };
  const defaultNames = new Set(Object.keys(defaults));
  for (const o of Object.values(file.overrides)) for (const k of Object.keys(o.defaults ?? {})) defaultNames.add(k);
  const analysis: AnalysisContext = {
    lookupTables: new Map<string, ReadonlySet<string> | null>(Object.keys(file.lookups).map((k) => {
      const t = lookups.get(k);
      return [k, t ? new Set(t.values.keys()) : null];
    })),
    defaultNames,
  };

  const compileExpr = (yamlPath: string[], source: string, extraVariables?: ReadonlySet<string>): CompiledExpression | undefined => {
    const posAt = (offset: number): SourcePos => src.posInScalar(yamlPath, offset);
    let expr: jsonata.Expression;
    try {
      expr = jsonata(source, { timeout: options.timeoutMs, stack: 500 });
    } catch (err) {
      const s = syntaxProblemOf(err);
      problems.push({ file: MAIN_FILE, ...posAt(s.offset), message: `${yamlPath.join('.')}: JSONata syntax error: ${s.message}` });
      return undefined;
    }
    const info = analyzeExpression(expr.ast() as ExprNode);
    for (const p of checkExpression(info, extraVariables ? { ...analysis, extraVariables } : analysis)) problems.push({ file: MAIN_FILE, ...posAt(p.offset), message: `${yamlPath.join('.')}: ${p.message}` });
    registerHelpers(expr, helpers);
    return { source, expr, info, file: MAIN_FILE, yamlPath, pos: src.posOf(yamlPath), posAt };
  };

  const targets: CompiledTarget[] = [];
  for (const [name, t] of Object.entries(file.targets)) {
    const base = ['targets', name];
    const forEach = t.for === undefined ? undefined : compileExpr([...base, 'for'], t.for);
    const letNames = new Set<string>();
    const lets: Array<{ name: string; expr: CompiledExpression }> = [];
    for (const [lname, source] of Object.entries(t.let ?? {})) {
      if ((BOUND_VARIABLES as readonly string[]).includes(lname) || lname in HELPER_ARITY) {
        problems.push({ file: MAIN_FILE, ...src.keyPosOf([...base, 'let', lname]), message: `${base.join('.')}.let.${lname}: $${lname} is already a bound variable or helper` });
      }
      const e = compileExpr([...base, 'let', lname], source, new Set(letNames));
      letNames.add(lname);
      if (e) lets.push({ name: lname, expr: e });
    }
    const externalId = compileExpr([...base, 'externalId'], t.externalId, letNames);
    const checks: Array<{ name: string; expr: CompiledExpression }> = [];
    for (const [cname, source] of Object.entries(t.checks ?? {})) {
      const e = compileExpr([...base, 'checks', cname], source, letNames);
      if (e) checks.push({ name: cname, expr: e });
    }
    const fields: CompiledField[] = [];
    for (const [fname, spec] of Object.entries(t.fields)) {
      const fpath = [...base, 'fields', fname];
      const exprPath = typeof spec === 'string' ? fpath : [...fpath, 'expr'];
      const expr = compileExpr(exprPath, typeof spec === 'string' ? spec : spec.expr, letNames);
      let check: FieldCheck | undefined;
      try {
        check = buildFieldCheck(spec);
      } catch (err) {
        problems.push({ file: MAIN_FILE, ...src.posOf(fpath), message: `${fpath.join('.')}: ${err instanceof Error ? err.message : String(err)}` });
      }
      if (expr && check) {
        const obj = typeof spec === 'string' ? undefined : spec;
        // An optional field never quarantines a loan unless the bank says so.
        const onError = obj?.onError ?? (check.required ? 'quarantine' : 'warn');
        fields.push({ name: fname, expr, check, onError, ...(obj?.fallback !== undefined ? { fallback: obj.fallback } : {}) });
      }
    }
    if (externalId) targets.push({ name, type: t.type ?? name, forEach, lets, checks, externalId, fields });
  }

  const overrides = new Map<string, CompiledOverride>();
  for (const [productId, o] of Object.entries(file.overrides)) {
    const fieldMap = new Map<string, Map<string, CompiledExpression>>();
    for (const [tname, fieldsOf] of Object.entries(o.fields ?? {})) {
      const target = file.targets[tname];
      if (!target) {
        problems.push({ file: MAIN_FILE, ...src.keyPosOf(['overrides', productId, 'fields', tname]), message: `overrides.${productId}.fields: unknown target "${tname}"` });
        continue;
      }
      const m = new Map<string, CompiledExpression>();
      for (const [fname, spec] of Object.entries(fieldsOf)) {
        const p = ['overrides', productId, 'fields', tname, fname];
        if (!(fname in target.fields)) {
          problems.push({ file: MAIN_FILE, ...src.keyPosOf(p), message: `${p.join('.')}: target "${tname}" has no field "${fname}" (an override replaces an existing field's expression)` });
          continue;
        }
        const e = compileExpr(typeof spec === 'string' ? p : [...p, 'expr'], typeof spec === 'string' ? spec : spec.expr, new Set(Object.keys(target.let ?? {})));
        if (e) m.set(fname, e);
      }
      fieldMap.set(tname, m);
    }
    overrides.set(productId, { defaults: Object.fromEntries(Object.entries(o.defaults ?? {}).map(([k, v]) => [k, asText(v)])), fields: fieldMap });
  }

  if (problems.length > 0) return { problems, mapping: undefined, sources };
  return {
    problems,
    sources,
    mapping: { name: file.name, label: String(file.version), targets, defaults, overrides, lookups, options },
  };
}

function csvLookup(
  name: string,
  path: string,
  text: string,
  keyCol: string,
  valueCol: string,
  fallback: string | undefined,
  problems: LintProblem[],
): LookupTable | undefined {
  let rows;
  try {
    rows = parseCsv(text);
  } catch (err) {
    if (err instanceof CsvError) problems.push({ file: path, line: err.line, column: err.column, message: `lookup ${name}: ${err.message}` });
    return undefined;
  }
  const header = rows[0];
  if (!header) {
    problems.push({ file: path, line: 1, column: 1, message: `lookup ${name}: empty CSV (a header row with columns ${keyCol},${valueCol} is required)` });
    return undefined;
  }
  const ki = header.cells.indexOf(keyCol);
  const vi = header.cells.indexOf(valueCol);
  if (ki < 0 || vi < 0) {
    problems.push({ file: path, line: 1, column: 1, message: `lookup ${name}: header needs columns "${keyCol}" and "${valueCol}" (found ${header.cells.join(', ')})` });
    return undefined;
  }
  const values = new Map<string, string>();
  for (const row of rows.slice(1)) {
    const k = row.cells[ki];
    const v = row.cells[vi];
    if (k === undefined || v === undefined) {
      problems.push({ file: path, line: row.line, column: 1, message: `lookup ${name}: row has ${row.cells.length} cells, expected ${header.cells.length}` });
      continue;
    }
    if (values.has(k)) {
      problems.push({ file: path, line: row.line, column: 1, message: `lookup ${name}: duplicate key "${k}"` });
      continue;
    }
    values.set(k, v);
  }
  return { name, values, fallback, file: path };
}
