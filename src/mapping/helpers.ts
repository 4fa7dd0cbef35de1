import type jsonata from 'jsonata';
import { bankDate } from './calendar.js';
import { bpsToPercent, bpsToRate, centsToDecimal } from './decimal.js';
import type { FrequencyTable } from './frequency.js';
import { lookupValue, type LookupTables } from './lookups.js';
import { borrowerOf, kindOf, partiesOf, roleOf } from './parties.js';
import { hasFullTin, last4, tin, tinType } from './tin.js';

export interface HelperContext {
  timeZone: string;
  allowLast4Tin: boolean;
  lookups: LookupTables;
  frequencies: FrequencyTable;
}

/** Helper names and how many arguments each takes (lint checks calls against this). */
export const HELPER_ARITY: Readonly<Record<string, readonly [number, number]>> = {
  centsToDecimal: [1, 2],
  bpsToPercent: [1, 2],
  bpsToRate: [1, 2],
  date: [1, 2],
  lookup: [2, 3],
  frequency: [1, 2],
  numberOfRepayments: [2, 2],
  periods: [2, 2],
  interestOnlyPeriods: [2, 2],
  tin: [1, 2],
  last4: [1, 1],
  hasFullTin: [1, 1],
  tinType: [1, 1],
  borrower: [0, 0],
  roleOf: [1, 1],
  entityKind: [1, 1],
};

/** Variables bound for every expression (besides helpers). */
export const BOUND_VARIABLES = ['loan', 'entities', 'documents', 'root', 'defaults', 'index'] as const;

/**
 * JSONata 2.x built-in functions (https://docs.jsonata.org/). `$lookup` is replaced by ours; a test
 * checks each of these is a function in the installed jsonata.
 */
export const JSONATA_BUILTINS: ReadonlySet<string> = new Set([
  'sum', 'count', 'max', 'min', 'average', 'string', 'substring', 'substringBefore', 'substringAfter', 'lowercase',
  'uppercase', 'length', 'trim', 'pad', 'match', 'contains', 'replace', 'split', 'join', 'formatNumber', 'formatBase',
  'formatInteger', 'parseInteger', 'number', 'floor', 'ceil', 'round', 'abs', 'sqrt', 'power', 'boolean', 'not', 'map',
  'zip', 'filter', 'single', 'reduce', 'sift', 'keys', 'append', 'exists', 'spread', 'merge', 'reverse', 'each', 'error',
  'assert', 'type', 'sort', 'distinct', 'base64encode', 'base64decode', 'encodeUrlComponent', 'encodeUrl',
  'decodeUrlComponent', 'decodeUrl', 'eval', 'toMillis', 'fromMillis', 'clone',
]);

/** Built-ins whose result depends on when or how often they run: a mapping must be a pure function of its input. */
export const NON_DETERMINISTIC: ReadonlySet<string> = new Set(['now', 'millis', 'random', 'shuffle']);

type Entity = Record<string, unknown>;
const borrowerCache = new WeakMap<object, Entity | undefined>();

function borrowerFrom(focus: jsonata.Focus): Entity | undefined {
  const entities = focus.environment.lookup('entities') as unknown;
  const loan = focus.environment.lookup('loan') as Record<string, unknown> | undefined;
  if (entities === null || typeof entities !== 'object') return undefined;
  if (borrowerCache.has(entities)) return borrowerCache.get(entities);
  const b = borrowerOf(partiesOf(entities), loan?.['type']);
  borrowerCache.set(entities, b);
  return b;
}

export type HelperFn = (this: jsonata.Focus, ...args: unknown[]) => unknown;

/** The helper implementations, bound to a mapping's options and tables. */
export function helperImplementations(ctx: HelperContext): Map<string, HelperFn> {
  const f = ctx.frequencies;
  const m = new Map<string, HelperFn>();
  const reg = (name: string, fn: HelperFn): void => {
    m.set(name, fn);
  };
  reg('centsToDecimal', (c, s) => centsToDecimal(c, s));
  reg('bpsToPercent', (b, s) => bpsToPercent(b, s));
  reg('bpsToRate', (b, s) => bpsToRate(b, s));
  reg('date', (v, fmt) => bankDate(v, fmt, ctx.timeZone));
  reg('lookup', (...args) => lookupValue(ctx.lookups, args));
  reg('frequency', (v, term) => f.frequency(v, term));
  reg('numberOfRepayments', (term, v) => f.numberOfRepayments(term, v));
  reg('periods', (months, v) => f.periods(months, v, 'period'));
  reg('interestOnlyPeriods', (months, v) => f.interestOnlyPeriods(months, v));
  reg('tin', (e, fmt) => tin(e, fmt, ctx.allowLast4Tin));
  reg('last4', (e) => last4(e));
  reg('hasFullTin', (e) => hasFullTin(e));
  reg('tinType', (e) => tinType(e));
  reg('borrower', function (this: jsonata.Focus) {
    return borrowerFrom(this);
  });
  reg('roleOf', function (this: jsonata.Focus, e) {
    return roleOf(e, borrowerFrom(this));
  });
  reg('entityKind', function (this: jsonata.Focus, e) {
    return kindOf(e, partiesOf(this.environment.lookup('entities')));
  });
  return m;
}

/** Registers every helper on a compiled expression. */
export function registerHelpers(expr: jsonata.Expression, impls: ReadonlyMap<string, HelperFn>): void {
  for (const [name, fn] of impls) expr.registerFunction(name, fn);
}
