import jsonata from 'jsonata';
import type { z } from 'zod';
import { isValidTimeZone } from '../lib/calendar.js';
import { CsvError, parseCsv } from '../lib/csv.js';
import { ROOT_SHAPE, checkInputs, typeOf, type InputContext } from './input-paths.js';
import {
  analyzeExpression,
  checkExpression,
  syntaxProblemOf,
  type AnalysisContext,
  type ExpressionInfo,
  type ExprNode,
} from './expression.js';
import { fastEvaluator, type FastEvaluator } from './fast-eval.js';
import { buildFieldCheck, type FieldCheck } from './fieldSchema.js';
import { FrequencyTable } from './frequency.js';
import {
  BOUND_VARIABLES,
  HELPER_ARITY,
  helperImplementations,
  registerHelpers,
  type HelperContext,
} from './helpers.js';
import type { LookupTable } from './lookups.js';
import { mappingFileSchema, type MappingFile } from './spec.js';
import { parseYamlSource, type SourcePos, type YamlSource } from '../lib/yaml-source.js';

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
  /** Input paths the platform does not document that lint lets pass (config mappings.allowUnknownInput). */
  allowUnknownInput?: boolean | readonly string[];
}

export const DEFAULT_MAPPER_OPTIONS: MapperOptions = {
  timeZone: 'America/Chicago',
  allowLast4Tin: false,
  defaults: {},
  timeoutMs: 1_000,
};

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
  /** JSONata's result without JSONata, for the commonest shapes (mapping/fast-eval.ts). */
  readonly fast?: FastEvaluator | undefined;
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

/** The smallest parts of the file a schema issue can be cut out with (null: the file as a whole is wrong). */
function unitsOf(issue: z.core.$ZodIssue): string[][] | null {
  const p = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') return issue.keys.map((k) => [...p, k]);
  if (p[0] === 'targets' && p.length >= 2)
    return [
      p.length >= 4 && ['fields', 'let', 'checks'].includes(p[2] ?? '') ? p.slice(0, 4) : p.slice(0, 2),
    ];
  if (['lookups', 'overrides', 'frequencies', 'defaults'].includes(p[0] ?? '') && p.length >= 2)
    return [p.slice(0, 2)];
  return null;
}

function deletePath(root: unknown, path: readonly string[]): void {
  let cur: unknown = root;
  for (const k of path.slice(0, -1)) {
    if (cur === null || typeof cur !== 'object') return;
    cur = (cur as Record<string, unknown>)[k];
  }
  if (cur !== null && typeof cur === 'object') delete (cur as Record<string, unknown>)[path.at(-1) ?? ''];
}

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
      for (const k of issue.keys)
        out.push({
          file: src.file,
          ...src.keyPosOf([...path, k]),
          message: `${[...path, k].map(String).join('.')}: unknown key`,
        });
      return;
    }
    out.push({
      file: src.file,
      ...src.posOf(path),
      message: `${path.map(String).join('.') || '(file)'}: ${issue.message}`,
    });
  };
  const depth = (issues: z.core.$ZodIssue[]): number =>
    Math.max(0, ...issues.map((i) => i.path.length + (i.code === 'invalid_type' ? 0 : 0.5)));
  for (const issue of error.issues) add(issue, []);
  return out;
}

/**
 * Parses, validates and compiles a mapping set. Pure apart from `read`. Every problem found is
 * reported (not just the first), each with file:line:column.
 */
export function compileMapping(
  read: SourceReader,
  options: MapperOptions = DEFAULT_MAPPER_OPTIONS,
): CompileResult {
  const r = compileUnsorted(read, options);
  // In file order, as an editor lists them (schema problems are found before expression ones).
  r.problems.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.column - b.column);
  return r;
}

type ExprCompiler = (
  yamlPath: string[],
  source: string,
  extraVariables?: ReadonlySet<string>,
  inputs?: { ctx: InputContext; valueExpected: boolean },
) => CompiledExpression | undefined;

/**
 * The mapping file through its schema. Every problem in one pass: a part of the file that breaks
 * the schema is reported and cut out, and the rest is still compiled, so expression problems show
 * up before the schema ones are fixed. Undefined when nothing compilable is left.
 */
function parseMappingFile(
  src: YamlSource,
  problems: LintProblem[],
): { file: MappingFile; pruned: Set<string> } | undefined {
  let raw: unknown = src.value;
  let parsed = mappingFileSchema.safeParse(raw);
  const pruned = new Set<string>();
  for (let round = 0; !parsed.success && round < 5; round++) {
    problems.push(...zodProblems(src, parsed.error));
    const units = parsed.error.issues.map(unitsOf);
    if (units.some((u) => u === null)) return undefined;
    raw = structuredClone(raw);
    for (const u of units.flat()) {
      if (u === null) continue;
      deletePath(raw, u);
      pruned.add(u.join('.'));
    }
    parsed = mappingFileSchema.safeParse(raw);
  }
  if (!parsed.success) return undefined;
  return { file: parsed.data, pruned };
}

function compileLookups(
  file: MappingFile,
  read: SourceReader,
  src: YamlSource,
  sources: Map<string, string>,
  problems: LintProblem[],
): Map<string, LookupTable> {
  const lookups = new Map<string, LookupTable>();
  for (const [name, spec] of Object.entries(file.lookups)) {
    const fallback = spec.default === undefined ? undefined : asText(spec.default);
    if ('values' in spec) {
      const values = new Map(Object.entries(spec.values).map(([k, v]) => [k, asText(v)]));
      lookups.set(name, {
        name,
        values,
        fallback,
        file: MAIN_FILE,
        ...(spec.warnOnDefault === true ? { warnOnDefault: true } : {}),
      });
      continue;
    }
    const csvText = read(spec.csv);
    if (csvText === undefined) {
      problems.push({
        file: MAIN_FILE,
        ...src.posOf(['lookups', name, 'csv']),
        message: `lookups.${name}: cannot read ${spec.csv}`,
      });
      continue;
    }
    sources.set(spec.csv, csvText);
    const table = csvLookup(name, spec.csv, csvText, spec.key, spec.value, fallback, problems);
    if (table) lookups.set(name, table);
  }

  return lookups;
}

/** What the expression lint knows of the set: its lookup tables' keys and the defaults' names. */
function analysisOf(
  file: MappingFile,
  defaults: Record<string, string>,
  lookups: ReadonlyMap<string, LookupTable>,
  pruned: ReadonlySet<string>,
): AnalysisContext {
  const defaultNames = new Set(Object.keys(defaults));
  for (const o of Object.values(file.overrides))
    for (const k of Object.keys(o.defaults ?? {})) defaultNames.add(k);
  for (const u of pruned) if (u.startsWith('defaults.')) defaultNames.add(u.slice('defaults.'.length));
  return {
    lookupTables: new Map<string, ReadonlySet<string> | null>([
      ...Object.keys(file.lookups).map((k): [string, ReadonlySet<string> | null] => {
        const t = lookups.get(k);
        return [k, t ? new Set(t.values.keys()) : null];
      }),
      // A table cut out for a schema problem is reported there; its uses are not unknown tables.
      ...[...pruned]
        .filter((u) => u.startsWith('lookups.'))
        .map((u): [string, null] => [u.slice('lookups.'.length), null]),
    ]),
    defaultNames,
  };
}

function exprCompiler(
  src: YamlSource,
  options: MapperOptions,
  analysis: AnalysisContext,
  helpers: ReturnType<typeof helperImplementations>,
  problems: LintProblem[],
): ExprCompiler {
  return (yamlPath, source, extraVariables, inputs) => {
    const posAt = (offset: number): SourcePos => src.posInScalar(yamlPath, offset);
    let expr: jsonata.Expression;
    try {
      expr = jsonata(source, { timeout: options.timeoutMs, stack: 500 });
    } catch (err) {
      const s = syntaxProblemOf(err);
      problems.push({
        file: MAIN_FILE,
        ...posAt(s.offset),
        message: `${yamlPath.join('.')}: JSONata syntax error: ${s.message}`,
      });
      return undefined;
    }
    const info = analyzeExpression(expr.ast() as ExprNode);
    for (const p of checkExpression(info, extraVariables ? { ...analysis, extraVariables } : analysis))
      problems.push({ file: MAIN_FILE, ...posAt(p.offset), message: `${yamlPath.join('.')}: ${p.message}` });
    if (inputs) {
      for (const p of checkInputs(info, inputs.ctx, {
        allowUnknown: options.allowUnknownInput ?? false,
        valueExpected: inputs.valueExpected,
      })) {
        problems.push({
          file: MAIN_FILE,
          ...posAt(p.offset),
          message: `${yamlPath.join('.')}: ${p.message}`,
        });
      }
    }
    registerHelpers(expr, helpers);
    const fast = fastEvaluator(expr.ast(), helpers);
    return { source, expr, info, fast, file: MAIN_FILE, yamlPath, pos: src.posOf(yamlPath), posAt };
  };
}

function compileTargets(
  file: MappingFile,
  src: YamlSource,
  compileExpr: ExprCompiler,
  problems: LintProblem[],
): { targets: CompiledTarget[]; itemContexts: Map<string, InputContext> } {
  const targets: CompiledTarget[] = [];
  const itemContexts = new Map<string, InputContext>();
  for (const [name, t] of Object.entries(file.targets)) {
    const base = ['targets', name];
    const forEach =
      t.for === undefined
        ? undefined
        : compileExpr([...base, 'for'], t.for, undefined, { ctx: [ROOT_SHAPE], valueExpected: false });
    // Each item's shape (loan, business, person, document…), for the paths its fields read.
    const itemCtx: InputContext =
      t.for === undefined ? [ROOT_SHAPE] : forEach ? typeOf(forEach.info.ast, [ROOT_SHAPE]) : null;
    itemContexts.set(name, itemCtx);
    const inItem = (valueExpected: boolean) => ({ ctx: itemCtx, valueExpected });
    const letNames = new Set<string>();
    const lets: Array<{ name: string; expr: CompiledExpression }> = [];
    for (const [lname, source] of Object.entries(t.let ?? {})) {
      if ((BOUND_VARIABLES as readonly string[]).includes(lname) || lname in HELPER_ARITY) {
        problems.push({
          file: MAIN_FILE,
          ...src.keyPosOf([...base, 'let', lname]),
          message: `${base.join('.')}.let.${lname}: $${lname} is already a bound variable or helper`,
        });
      }
      const e = compileExpr([...base, 'let', lname], source, new Set(letNames), inItem(false));
      letNames.add(lname);
      if (e) lets.push({ name: lname, expr: e });
    }
    const externalId = compileExpr([...base, 'externalId'], t.externalId, letNames, inItem(true));
    const checks: Array<{ name: string; expr: CompiledExpression }> = [];
    for (const [cname, source] of Object.entries(t.checks ?? {})) {
      const e = compileExpr([...base, 'checks', cname], source, letNames, inItem(false));
      if (e) checks.push({ name: cname, expr: e });
    }
    const fields: CompiledField[] = [];
    for (const [fname, spec] of Object.entries(t.fields)) {
      const fpath = [...base, 'fields', fname];
      const exprPath = typeof spec === 'string' ? fpath : [...fpath, 'expr'];
      const expr = compileExpr(exprPath, typeof spec === 'string' ? spec : spec.expr, letNames, inItem(true));
      let check: FieldCheck | undefined;
      try {
        check = buildFieldCheck(spec);
      } catch (err) {
        problems.push({
          file: MAIN_FILE,
          ...src.posOf(fpath),
          message: `${fpath.join('.')}: ${err instanceof Error ? err.message : String(err)}`,
        });
      }
      if (expr && check) {
        const obj = typeof spec === 'string' ? undefined : spec;
        // An optional field never quarantines a loan unless the bank says so.
        const onError = obj?.onError ?? (check.required ? 'quarantine' : 'warn');
        fields.push({
          name: fname,
          expr,
          check,
          onError,
          ...(obj?.fallback !== undefined ? { fallback: obj.fallback } : {}),
        });
      }
    }
    if (externalId) targets.push({ name, type: t.type ?? name, forEach, lets, checks, externalId, fields });
  }

  return { targets, itemContexts };
}

function compileOverrides(
  file: MappingFile,
  src: YamlSource,
  pruned: ReadonlySet<string>,
  itemContexts: ReadonlyMap<string, InputContext>,
  compileExpr: ExprCompiler,
  problems: LintProblem[],
): Map<string, CompiledOverride> {
  const overrides = new Map<string, CompiledOverride>();
  for (const [productId, o] of Object.entries(file.overrides)) {
    const fieldMap = new Map<string, Map<string, CompiledExpression>>();
    for (const [tname, fieldsOf] of Object.entries(o.fields ?? {})) {
      const target = file.targets[tname];
      if (!target) {
        if (pruned.has(`targets.${tname}`)) continue;
        problems.push({
          file: MAIN_FILE,
          ...src.keyPosOf(['overrides', productId, 'fields', tname]),
          message: `overrides.${productId}.fields: unknown target "${tname}"`,
        });
        continue;
      }
      const m = new Map<string, CompiledExpression>();
      for (const [fname, spec] of Object.entries(fieldsOf)) {
        const p = ['overrides', productId, 'fields', tname, fname];
        if (!(fname in target.fields)) {
          if (pruned.has(`targets.${tname}.fields.${fname}`)) continue;
          problems.push({
            file: MAIN_FILE,
            ...src.keyPosOf(p),
            message:
              `${p.join('.')}: target "${tname}" has no field "${fname}" ` +
              `(an override replaces an existing field's expression)`,
          });
          continue;
        }
        const e = compileExpr(
          typeof spec === 'string' ? p : [...p, 'expr'],
          typeof spec === 'string' ? spec : spec.expr,
          new Set(Object.keys(target.let ?? {})),
          { ctx: itemContexts.get(tname) ?? null, valueExpected: true },
        );
        if (e) m.set(fname, e);
      }
      fieldMap.set(tname, m);
    }
    overrides.set(productId, {
      defaults: Object.fromEntries(Object.entries(o.defaults ?? {}).map(([k, v]) => [k, asText(v)])),
      fields: fieldMap,
    });
  }

  return overrides;
}

function compileUnsorted(read: SourceReader, options: MapperOptions): CompileResult {
  const sources = new Map<string, string>();
  const problems: LintProblem[] = [];
  const text = read(MAIN_FILE);
  if (text === undefined)
    return {
      problems: [
        { file: MAIN_FILE, line: 1, column: 1, message: `${MAIN_FILE} not found in the mapping directory` },
      ],
      mapping: undefined,
      sources,
    };
  sources.set(MAIN_FILE, text);
  if (!isValidTimeZone(options.timeZone))
    problems.push({
      file: MAIN_FILE,
      line: 1,
      column: 1,
      message: `bank time zone "${options.timeZone}" is not an IANA time zone`,
    });

  const src = parseYamlSource(MAIN_FILE, text, keepText);
  for (const p of src.problems)
    problems.push({ file: MAIN_FILE, line: p.line, column: p.column, message: p.message });
  if (src.value === undefined) return { problems, mapping: undefined, sources };
  const set = parseMappingFile(src, problems);
  if (set === undefined) return { problems, mapping: undefined, sources };
  const { file, pruned } = set;

  const lookups = compileLookups(file, read, src, sources, problems);

  const frequencies = new FrequencyTable(file.frequencies);
  const helperCtx: HelperContext = {
    timeZone: options.timeZone,
    allowLast4Tin: options.allowLast4Tin,
    lookups,
    frequencies,
  };
  const helpers = helperImplementations(helperCtx);
  const configDefaults = Object.fromEntries(Object.entries(options.defaults).map(([k, v]) => [k, asText(v)]));
  const defaults = {
    ...Object.fromEntries(Object.entries(file.defaults).map(([k, v]) => [k, asText(v)])),
    ...configDefaults,
  };
  const analysis = analysisOf(file, defaults, lookups, pruned);

  const compileExpr = exprCompiler(src, options, analysis, helpers, problems);
  const { targets, itemContexts } = compileTargets(file, src, compileExpr, problems);
  const overrides = compileOverrides(file, src, pruned, itemContexts, compileExpr, problems);

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
    if (err instanceof CsvError)
      problems.push({
        file: path,
        line: err.line,
        column: err.column,
        message: `lookup ${name}: ${err.message}`,
      });
    return undefined;
  }
  const header = rows[0];
  if (!header) {
    problems.push({
      file: path,
      line: 1,
      column: 1,
      message: `lookup ${name}: empty CSV (a header row with columns ${keyCol},${valueCol} is required)`,
    });
    return undefined;
  }
  const ki = header.cells.indexOf(keyCol);
  const vi = header.cells.indexOf(valueCol);
  if (ki < 0 || vi < 0) {
    problems.push({
      file: path,
      line: 1,
      column: 1,
      message: `lookup ${name}: header needs columns "${keyCol}" and "${valueCol}" (found ${header.cells.join(', ')})`,
    });
    return undefined;
  }
  const values = new Map<string, string>();
  for (const row of rows.slice(1)) {
    const k = row.cells[ki];
    const v = row.cells[vi];
    if (k === undefined || v === undefined) {
      problems.push({
        file: path,
        line: row.line,
        column: 1,
        message: `lookup ${name}: row has ${row.cells.length} cells, expected ${header.cells.length}`,
      });
      continue;
    }
    if (values.has(k)) {
      problems.push({
        file: path,
        line: row.line,
        column: 1,
        message: `lookup ${name}: duplicate key "${k}"`,
      });
      continue;
    }
    values.set(k, v);
  }
  return { name, values, fallback, file: path };
}
