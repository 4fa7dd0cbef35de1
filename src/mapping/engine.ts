import type { CompiledExpression, CompiledMapping, CompiledTarget } from './compile.js';
import { MAIN_FILE } from './compile.js';
import { accountNumberSinks } from './id-flow.js';
import { SLOW } from './fast-eval.js';
import { checkField } from './fieldSchema.js';
import { maskTins } from '../lib/redact.js';
import { HelperIssue, REVIEW_BINDING, describe } from './issue.js';
import type {
  LayoutColumnsView,
  MappedRecord,
  Mapper,
  MappingInput,
  MappingIssue,
  MappingIssueCode,
  MappingOutcome,
} from './types.js';

/** Past this many issues a loan's report stops growing: the first ones say what is wrong. */
const MAX_ISSUES = 100;

type Bindings = Record<string, unknown>;

interface Where {
  target: string;
  field: string;
  /** Input path prefix of the current item, e.g. entities.businesses[1] */
  itemPath: string | undefined;
}

class Failure extends Error {
  constructor(
    readonly code: MappingIssueCode,
    message: string,
    readonly offset: number | null,
    readonly inputPath: string | undefined,
  ) {
    super(message);
  }
}

function isFunction(v: object): boolean {
  return '_jsonata_function' in v || '_jsonata_lambda' in v || typeof v === 'function';
}

/** JSONata results may be sequences or hold functions; records must be plain JSON. */
function toPlain(v: unknown, at: string): unknown {
  if (v === undefined || v === null) return v;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`${at}: not a finite number`);
    return v;
  }
  if (typeof v !== 'object' && typeof v !== 'function') return v;
  if (isFunction(v))
    throw new Error(
      `${at}: the expression produced a function, not a value (missing parentheses in a call?)`,
    );
  if (Array.isArray(v)) return v.map((x, i) => toPlain(x, `${at}[${i}]`)).filter((x) => x !== undefined);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    const p = toPlain(x, `${at}.${k}`);
    if (p !== undefined) out[k] = p;
  }
  return out;
}

/**
 * Null ≡ absent for every platform field: keys whose value is null are dropped and nulls in lists
 * removed, once, before any expression sees the input. (JSONata's `$exists(null)` is true and
 * helpers would otherwise treat `naics: null` and an absent `naics` differently.)
 */
export function withoutNulls(v: unknown, depth = 0): unknown {
  if (v === null || typeof v !== 'object' || depth > 32) return v;
  if (Array.isArray(v)) return v.filter((x) => x !== null).map((x) => withoutNulls(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>))
    if (x !== null) out[k] = withoutNulls(x, depth + 1);
  return out;
}

function joinPath(prefix: string | undefined, path: string | undefined): string | undefined {
  if (path === undefined) return prefix;
  if (path.startsWith('$')) return path.slice(1);
  return prefix === undefined ? path : `${prefix}.${path}`;
}

function failureOf(ce: CompiledExpression, err: unknown): Failure {
  const position = (err as { position?: unknown }).position;
  const call = typeof position === 'number' ? ce.info.calls.get(position) : undefined;
  if (err instanceof HelperIssue) {
    const argPath = call && err.argIndex !== null ? call.argPaths[err.argIndex] : undefined;
    return new Failure(err.code, err.message, call?.start ?? null, argPath ?? ce.info.firstPath);
  }
  const e = err as { message?: unknown; code?: unknown };
  const message = typeof e.message === 'string' ? e.message : String(err);
  const code = typeof e.code === 'string' ? ` [${e.code}]` : '';
  return new Failure(
    'mapping',
    `expression failed${code}: ${message}`,
    call?.start ?? (typeof position === 'number' ? Math.max(0, position - 1) : null),
    ce.info.firstPath,
  );
}

async function evaluateJsonata(
  ce: CompiledExpression,
  context: unknown,
  bindings: Bindings,
): Promise<unknown> {
  try {
    return await ce.expr.evaluate(context, bindings);
  } catch (err) {
    throw failureOf(ce, err);
  }
}

/**
 * An expression's value: at once when the fast evaluator answers (mapping/fast-eval.ts: no promise
 * for the commonest fields, a mapping has dozens a loan), else JSONata's promise of it.
 */
function evaluateExpr(ce: CompiledExpression, context: unknown, bindings: Bindings): unknown {
  if (ce.fast !== undefined) {
    let v: unknown;
    try {
      v = ce.fast(context, bindings);
    } catch (err) {
      throw failureOf(ce, err);
    }
    if (v !== SLOW)
      return v instanceof Promise ? v.catch((err: unknown) => Promise.reject(failureOf(ce, err))) : v;
  }
  return evaluateJsonata(ce, context, bindings);
}

function issueAt(ce: CompiledExpression | undefined, where: Where, f: Failure): MappingIssue {
  const pos = ce ? (f.offset === null ? ce.pos : ce.posAt(f.offset)) : { line: 1, column: 1 };
  const issue: MappingIssue = {
    code: f.code,
    file: ce?.file ?? MAIN_FILE,
    line: pos.line,
    column: pos.column,
    target: where.target,
    field: where.field,
    message: maskTins(f.message),
  };
  const inputPath = joinPath(where.itemPath, f.inputPath);
  if (inputPath !== undefined) issue.inputPath = inputPath;
  return issue;
}

/** One loan's mapping as it goes: the issues, review items and records it collects. */
class MapRun {
  readonly issues: MappingIssue[] = [];
  readonly warnings: MappingIssue[] = [];
  readonly records: MappedRecord[] = [];
  private readonly warned = new Set<string>();
  private readonly seen = new Set<string>();
  /** Review items helpers report while an expression runs; attributed to it once it returns. */
  reported: Array<{ code: MappingIssueCode; message: string }> = [];

  warn(
    ce: CompiledExpression | undefined,
    where: Where,
    code: MappingIssueCode,
    message: string,
    inputPath?: string,
  ): void {
    const key = `${code}\u0000${message}`;
    if (this.warned.has(key)) return; // one review item per fact, whichever field met it first
    this.warned.add(key);
    this.warnings.push(issueAt(ce, where, new Failure(code, message, null, inputPath)));
  }

  settle(ce: CompiledExpression | undefined, where: Where): void {
    for (const r of this.reported) this.warn(ce, where, r.code, r.message, ce?.info.firstPath);
    this.reported = [];
  }

  fail(ce: CompiledExpression | undefined, where: Where, f: Failure): void {
    this.issues.push(issueAt(ce, where, f));
  }

  /** false (and an issue) when a record of this type already has this external id. */
  claim(target: CompiledTarget, externalId: string, itemPath: string | undefined): boolean {
    const key = `${target.type}\u0000${externalId}`;
    if (!this.seen.has(key)) {
      this.seen.add(key);
      return true;
    }
    this.fail(
      target.externalId,
      { target: target.name, field: 'externalId', itemPath },
      new Failure(
        'validation',
        `two ${target.type} records have the external id ${describe(externalId)}`,
        null,
        undefined,
      ),
    );
    return false;
  }
}

const NO_LOAN: MappingIssue = {
  code: 'validation',
  file: MAIN_FILE,
  line: 1,
  column: 1,
  target: '(input)',
  field: 'loan',
  message: 'the input has no loan',
};

/** The items a target maps (its `for`, else the whole input once); null when the `for` failed. */
async function itemsOf(
  st: MapRun,
  target: CompiledTarget,
  root: object,
  bindings: Bindings,
): Promise<{ items: unknown[]; itemPrefix: string | undefined; single: boolean } | null> {
  if (!target.forEach) return { items: [root], itemPrefix: undefined, single: false };
  try {
    const rNow = evaluateExpr(target.forEach, root, bindings);
    const r: unknown = rNow instanceof Promise ? await rNow : rNow;
    return {
      items: toPlainItems(r),
      itemPrefix: target.forEach.info.simplePath,
      single: r !== null && typeof r === 'object' && !Array.isArray(r),
    };
  } catch (err) {
    st.fail(target.forEach, { target: target.name, field: '(for)', itemPath: undefined }, asFailure(err));
    return null;
  }
}

/**
 * A record's lets, run once per record; a failed let is one issue, and whatever reads it is skipped
 * (its own issue would only repeat the cause). The names of the failed lets.
 */
async function runLets(
  st: MapRun,
  target: CompiledTarget,
  item: object,
  b: Bindings,
  itemPath: string | undefined,
): Promise<Set<string>> {
  const failedLets = new Set<string>();
  for (const l of target.lets) {
    if ([...l.expr.info.variables].some((v) => failedLets.has(v))) {
      failedLets.add(l.name);
      continue;
    }
    const where: Where = { target: target.name, field: `$${l.name}`, itemPath };
    try {
      const vNow = evaluateExpr(l.expr, item, b);
      const v: unknown = vNow instanceof Promise ? await vNow : vNow;
      b[l.name] = toPlain(v, l.name);
      st.settle(l.expr, where);
    } catch (err) {
      st.reported = [];
      failedLets.add(l.name);
      st.fail(l.expr, where, asFailure(err));
    }
  }
  return failedLets;
}

async function runChecks(
  st: MapRun,
  target: CompiledTarget,
  item: object,
  b: Bindings,
  itemPath: string | undefined,
  skip: (ce: CompiledExpression) => boolean,
): Promise<void> {
  for (const c of target.checks) {
    if (skip(c.expr)) continue;
    const where: Where = { target: target.name, field: `(check ${c.name})`, itemPath };
    try {
      const vNow = evaluateExpr(c.expr, item, b);
      const v: unknown = vNow instanceof Promise ? await vNow : vNow;
      st.settle(c.expr, where);
      if (v === false)
        throw new Failure('validation', `check "${c.name}" failed`, null, c.expr.info.firstPath);
    } catch (err) {
      st.reported = [];
      st.fail(c.expr, where, asFailure(err));
    }
  }
}

async function externalIdOf(
  st: MapRun,
  target: CompiledTarget,
  item: object,
  b: Bindings,
  itemPath: string | undefined,
): Promise<string | undefined> {
  const where: Where = { target: target.name, field: 'externalId', itemPath };
  try {
    const vNow = evaluateExpr(target.externalId, item, b);
    const v: unknown = vNow instanceof Promise ? await vNow : vNow;
    st.settle(target.externalId, where);
    if ((typeof v === 'string' && v.trim() !== '') || (typeof v === 'number' && Number.isSafeInteger(v)))
      return String(v);
    throw new Failure(
      'validation',
      `externalId must be a non-empty string, got ${describe(v)}`,
      null,
      target.externalId.info.firstPath,
    );
  } catch (err) {
    st.fail(target.externalId, where, asFailure(err));
    return undefined;
  }
}

async function mapFields(
  st: MapRun,
  target: CompiledTarget,
  item: object,
  b: Bindings,
  itemPath: string | undefined,
  skip: (ce: CompiledExpression) => boolean,
  fieldOverrides: ReadonlyMap<string, CompiledExpression> | undefined,
): Promise<Record<string, unknown>> {
  const fields: Record<string, unknown> = {};
  for (const field of target.fields) {
    const ce = fieldOverrides?.get(field.name) ?? field.expr;
    if (skip(ce)) continue;
    const where: Where = { target: target.name, field: field.name, itemPath };
    try {
      const outNow = evaluateExpr(ce, item, b);
      const out: unknown = outNow instanceof Promise ? await outNow : outNow;
      const value = toPlain(out, field.name);
      const problem = checkField(value, field.check);
      if (problem) throw new Failure('validation', problem, null, ce.info.firstPath);
      st.settle(ce, where);
      if (value !== undefined && value !== null) fields[field.name] = value;
    } catch (err) {
      st.reported = [];
      const f = asFailure(err);
      // Contradictory data always stops the loan; otherwise the field says what a failure means.
      if (f.code === 'contradictory' || field.onError === 'quarantine') {
        if (field.fallback === undefined || f.code === 'contradictory') {
          st.fail(ce, where, f);
          continue;
        }
      }
      if (field.fallback !== undefined) {
        fields[field.name] = field.fallback;
        st.warn(
          ce,
          where,
          'optional_field',
          `${f.message}; used the fallback ${describe(field.fallback)}`,
          f.inputPath,
        );
      } else if (field.check.required) {
        st.fail(ce, where, f);
      } else {
        st.warn(ce, where, 'optional_field', `${f.message}; left out`, f.inputPath);
      }
    }
  }
  return fields;
}

/**
 * One record of a target from one item: lets, checks, external id, fields. `b` is the item's own bindings
 * (its lets are added).
 */
async function mapItem(
  st: MapRun,
  target: CompiledTarget,
  item: object,
  b: Bindings,
  itemPath: string | undefined,
  fieldOverrides: ReadonlyMap<string, CompiledExpression> | undefined,
): Promise<void> {
  const failedLets = await runLets(st, target, item, b, itemPath);
  const skip = (ce: CompiledExpression): boolean =>
    failedLets.size > 0 && [...ce.info.variables].some((v) => failedLets.has(v));
  await runChecks(st, target, item, b, itemPath, skip);
  const externalId = await externalIdOf(st, target, item, b, itemPath);
  const fields = await mapFields(st, target, item, b, itemPath, skip, fieldOverrides);
  if (externalId === undefined) return;
  if (st.claim(target, externalId, itemPath)) st.records.push({ type: target.type, externalId, fields });
}

async function mapTarget(
  st: MapRun,
  target: CompiledTarget,
  root: object,
  bindings: Bindings,
  fieldOverrides: ReadonlyMap<string, CompiledExpression> | undefined,
): Promise<void> {
  const of = await itemsOf(st, target, root, bindings);
  if (of === null) return;
  const { items, itemPrefix, single } = of;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    const itemPath =
      target.forEach && itemPrefix !== undefined ? (single ? itemPrefix : `${itemPrefix}[${i}]`) : undefined;
    if (item === null || typeof item !== 'object' || Array.isArray(item)) {
      st.fail(
        target.forEach,
        { target: target.name, field: '(for)', itemPath },
        new Failure(
          'mapping',
          `each item must be an object, item ${i} is ${describe(item)}`,
          null,
          undefined,
        ),
      );
      continue;
    }
    await mapItem(st, target, item, { ...bindings, index: i }, itemPath, fieldOverrides);
  }
}

/** A compiled mapping bound to its content version. Never throws for bad data: issues are data. */
export function createMapper(mapping: CompiledMapping, version: string, layout?: LayoutColumnsView): Mapper {
  const defaultsFor = new Map<string, Readonly<Record<string, string>>>();
  const baseDefaults = Object.freeze({ ...mapping.defaults });
  for (const [productId, o] of mapping.overrides)
    defaultsFor.set(productId, Object.freeze({ ...mapping.defaults, ...o.defaults }));

  async function mapInput(raw: MappingInput): Promise<MappingOutcome> {
    const st = new MapRun();
    const input = withoutNulls(raw) as MappingInput;
    const loan = (input as { loan?: unknown }).loan;
    if (loan === null || typeof loan !== 'object')
      return { ok: false, mappingVersion: version, issues: [NO_LOAN] };
    const productRef = (loan as { product?: { id?: unknown } | null }).product;
    const productId = typeof productRef?.id === 'string' ? productRef.id : undefined;
    const override = productId === undefined ? undefined : mapping.overrides.get(productId);
    const bindings: Bindings = {
      loan,
      entities: input.entities ?? { businesses: [], people: [] },
      documents: input.documents ?? [],
      root: input,
      defaults: (productId !== undefined && defaultsFor.get(productId)) || baseDefaults,
      index: 0,
      identity: input.identity ?? { accountNumber: null, customers: {} },
      [REVIEW_BINDING]: (code: MappingIssueCode, message: string) => {
        st.reported.push({ code, message: maskTins(message) });
      },
    };
    const root = { loan, entities: bindings['entities'], documents: bindings['documents'] };
    for (const target of mapping.targets) {
      if (st.issues.length >= MAX_ISSUES) break;
      await mapTarget(st, target, root, bindings, override?.fields.get(target.name));
    }
    if (st.issues.length > 0)
      return { ok: false, mappingVersion: version, issues: st.issues.slice(0, MAX_ISSUES) };
    return {
      ok: true,
      mappingVersion: version,
      records: st.records,
      warnings: st.warnings.slice(0, MAX_ISSUES),
    };
  }

  return {
    version,
    name: mapping.name,
    accountNumberSinks: accountNumberSinks(mapping, layout),
    async map(input: MappingInput): Promise<MappingOutcome> {
      try {
        return await mapInput(input);
      } catch (err) {
        // A bug in the engine must still quarantine one loan, not stop the daemon.
        return {
          ok: false,
          mappingVersion: version,
          issues: [
            {
              code: 'mapping',
              file: MAIN_FILE,
              line: 1,
              column: 1,
              target: '(engine)',
              field: '(engine)',
              message: maskTins(
                `internal mapping error: ${err instanceof Error ? err.message : String(err)}`,
              ),
            },
          ],
        };
      }
    },
  };
}

function asFailure(err: unknown): Failure {
  if (err instanceof Failure) return err;
  return new Failure('mapping', err instanceof Error ? err.message : String(err), null, undefined);
}

function toPlainItems(v: unknown): unknown[] {
  if (v === undefined || v === null) return [];
  const plain = toPlain(v, '(for)');
  return Array.isArray(plain) ? plain : [plain];
}
