import type jsonata from 'jsonata';
import { formatWallTime, pictureProblem, toWallTime } from '../lib/calendar.js';
import { bpsToPercent, bpsToRate, centsToDecimal } from './decimal.js';
import type { FrequencyTable } from './frequency.js';
import { lookupValue, type LookupTables } from './lookups.js';
import { borrowerVerdict, kindOf, partiesOf, roleOf, type BorrowerVerdict } from './parties.js';
import { hasFullTin, last4, tin, tinType } from './tin.js';
import { HelperIssue, describe, review } from './issue.js';

export interface HelperContext {
  timeZone: string;
  allowLast4Tin: boolean;
  lookups: LookupTables;
  frequencies: FrequencyTable;
}

/** The customer match of a business or person (identity.customers[id]), or undefined. */
function customerOf(
  focus: jsonata.Focus,
  entity: unknown,
): { cif?: unknown; existing?: unknown } | undefined {
  const id =
    typeof entity === 'string'
      ? entity
      : entity !== null && typeof entity === 'object'
        ? (entity as { id?: unknown }).id
        : undefined;
  if (typeof id !== 'string') {
    if (entity === undefined) return undefined;
    throw new HelperIssue('mapping', `expected a business or person (or its id), got ${describe(entity)}`, 0);
  }
  const root = focus.environment.lookup('root') as
    { identity?: { customers?: Record<string, unknown> } } | undefined;
  const c = root?.identity?.customers?.[id];
  return c !== null && typeof c === 'object' ? c : undefined;
}

/** Helper names and how many arguments each takes (lint checks calls against this). */
export const HELPER_ARITY: Readonly<Record<string, readonly [number, number]>> = {
  centsToDecimal: [1, 2],
  bpsToPercent: [1, 2],
  bpsToRate: [1, 2],
  date: [1, 2],
  lookup: [2, 3],
  frequency: [1, 2],
  numberOfRepayments: [2, 3],
  repaymentsBetween: [3, 3],
  periods: [2, 3],
  interestOnlyPeriods: [2, 3],
  review: [2, 2],
  fit: [2, 3],
  tin: [1, 2],
  last4: [1, 1],
  hasFullTin: [1, 1],
  tinType: [1, 1],
  borrower: [0, 0],
  roleOf: [1, 1],
  entityKind: [1, 1],
  cif: [1, 1],
  existingCustomer: [1, 1],
  matchedBy: [1, 1],
  accountNumber: [0, 0],
};

/** Variables bound for every expression (besides helpers). */
export const BOUND_VARIABLES = [
  'loan',
  'entities',
  'documents',
  'root',
  'defaults',
  'index',
  'identity',
] as const;

/**
 * JSONata 2.x built-in functions (https://docs.jsonata.org/). `$lookup` is replaced by ours; a test
 * checks each of these is a function in the installed jsonata.
 */
export const JSONATA_BUILTINS: ReadonlySet<string> = new Set([
  'sum',
  'count',
  'max',
  'min',
  'average',
  'string',
  'substring',
  'substringBefore',
  'substringAfter',
  'lowercase',
  'uppercase',
  'length',
  'trim',
  'pad',
  'match',
  'contains',
  'replace',
  'split',
  'join',
  'formatNumber',
  'formatBase',
  'formatInteger',
  'parseInteger',
  'number',
  'floor',
  'ceil',
  'round',
  'abs',
  'sqrt',
  'power',
  'boolean',
  'not',
  'map',
  'zip',
  'filter',
  'single',
  'reduce',
  'sift',
  'keys',
  'append',
  'exists',
  'spread',
  'merge',
  'reverse',
  'each',
  'error',
  'assert',
  'type',
  'sort',
  'distinct',
  'base64encode',
  'base64decode',
  'encodeUrlComponent',
  'encodeUrl',
  'decodeUrlComponent',
  'decodeUrl',
  'eval',
  'toMillis',
  'fromMillis',
  'clone',
]);

/** Built-ins whose result depends on when or how often they run: a mapping must be a pure function of its input. */
export const NON_DETERMINISTIC: ReadonlySet<string> = new Set(['now', 'millis', 'random', 'shuffle']);

type Entity = Record<string, unknown>;
const borrowerCache = new WeakMap<object, BorrowerVerdict>();

/** `$borrower()`: the borrower, a review item when it was inferred, an issue when contradictory. */
function borrowerFrom(focus: jsonata.Focus): Entity | undefined {
  const entities = focus.environment.lookup('entities') as unknown;
  const loan = focus.environment.lookup('loan') as Record<string, unknown> | undefined;
  if (entities === null || typeof entities !== 'object') return undefined;
  let v = borrowerCache.get(entities);
  if (v === undefined) {
    v = borrowerVerdict(partiesOf(entities), loan?.['type']);
    borrowerCache.set(entities, v);
  }
  if ('contradiction' in v) throw new HelperIssue('contradictory', v.contradiction);
  if (v.note !== undefined) review(focus, 'approximated', v.note);
  return v.entity;
}

/**
 * `$accountNumber()`: the loan's core account number, from the bank's number pool (or nothing
 * when the core assigns it). Use it, not the platform's loan id, wherever a core keys on the loan
 * in a column of fixed width (docs/mapping-guide.md).
 */
function accountNumberFrom(identity: unknown): string | undefined {
  if (identity === null || typeof identity !== 'object') return undefined;
  const n = (identity as { accountNumber?: unknown }).accountNumber;
  return typeof n === 'string' && n !== '' ? n : undefined;
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
  reg('lookup', function (this: jsonata.Focus, ...args) {
    return lookupValue(ctx.lookups, args, (m) => review(this, 'defaulted', m));
  });
  reg('frequency', function (this: jsonata.Focus, v, term) {
    return f.frequency(v, term, (m) => review(this, 'approximated', m));
  });
  reg('numberOfRepayments', function (this: jsonata.Focus, term, v, rounding) {
    return f.numberOfRepayments(term, v, rounding, (m) => review(this, 'approximated', m));
  });
  reg('repaymentsBetween', function (this: jsonata.Focus, first, maturity, v) {
    return f.repaymentsBetween(
      bankDate(first, undefined, ctx.timeZone),
      bankDate(maturity, undefined, ctx.timeZone),
      v,
      (m) => review(this, 'approximated', m),
    );
  });
  reg('periods', function (this: jsonata.Focus, months, v, rounding) {
    return f.periods(months, v, 'period', rounding, (m) => review(this, 'approximated', m));
  });
  reg('interestOnlyPeriods', function (this: jsonata.Focus, months, v, term) {
    return f.interestOnlyPeriods(months, v, term, (m) => review(this, 'approximated', m));
  });
  reg('fit', function (this: jsonata.Focus, value, max, fallback) {
    return fitText(value, max, fallback, (m) => review(this, 'approximated', m));
  });
  reg('review', function (this: jsonata.Focus, value, message) {
    if (typeof message !== 'string' || message === '')
      throw new HelperIssue('mapping', '$review(value, message): message must be text', 1);
    review(this, 'approximated', message);
    return value;
  });
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
  // `$cif(entity)`: the bank's customer number (customer match); nothing when not known yet (a new
  // customer whose number the core assigns, or a preview without a resolution).
  reg('cif', function (this: jsonata.Focus, e) {
    const c = customerOf(this, e);
    return typeof c?.cif === 'string' && c.cif !== '' ? c.cif : undefined;
  });
  // `$existingCustomer(entity)`: the core already has this customer: reference it, write no customer record.
  reg('existingCustomer', function (this: jsonata.Focus, e) {
    return customerOf(this, e)?.existing === true;
  });
  // `$matchedBy(entity)`: how the customer was found: crossref | tin | created (nothing without a match).
  reg('matchedBy', function (this: jsonata.Focus, e) {
    const m = (customerOf(this, e) as { matchedBy?: unknown } | undefined)?.matchedBy;
    return typeof m === 'string' ? m : undefined;
  });
  reg('entityKind', function (this: jsonata.Focus, e) {
    return kindOf(e, partiesOf(this.environment.lookup('entities')));
  });
  reg('accountNumber', function (this: jsonata.Focus) {
    return accountNumberFrom(this.environment.lookup('identity'));
  });
  return m;
}

/**
 * `$fit(text, max[, fallback])`: text for a field of at most `max` characters. Cut to `max` when
 * longer, the fallback when empty or absent — each with a review item: a legal name may be longer
 * than a core's column, and a loan must not wait for a person because of it.
 */
export function fitText(
  value: unknown,
  max: unknown,
  fallback: unknown,
  note: (message: string) => void,
): string | undefined {
  if (typeof max !== 'number' || !Number.isSafeInteger(max) || max < 1)
    throw new HelperIssue('mapping', `$fit: max must be a whole number ≥ 1, got ${describe(max)}`, 1);
  if (
    value !== undefined &&
    value !== null &&
    typeof value !== 'string' &&
    typeof value !== 'number' &&
    typeof value !== 'boolean'
  ) {
    throw new HelperIssue('mapping', `$fit: expected text, got ${describe(value)}`, 0);
  }
  const text = value === undefined || value === null ? '' : String(value).trim();
  if (text === '') {
    if (typeof fallback !== 'string' && typeof fallback !== 'number') return undefined;
    const f = String(fallback);
    if (f === '') return undefined;
    note(`empty value: used ${describe(f)}`);
    return [...f].slice(0, max).join('');
  }
  const chars = [...text];
  if (chars.length <= max) return text;
  note(`${chars.length} characters cut to ${max}`);
  return chars.slice(0, max).join('');
}

/** Registers every helper on a compiled expression. */
export function registerHelpers(expr: jsonata.Expression, impls: ReadonlyMap<string, HelperFn>): void {
  for (const [name, fn] of impls) expr.registerFunction(name, fn);
}

/** `$date(ts[, format])`: nothing in, nothing out (optional dates stay optional). */
export function bankDate(value: unknown, format: unknown, timeZone: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string')
    throw new HelperIssue('mapping', `expected an ISO 8601 date-time, got ${describe(value)}`, 0);
  const picture = format === undefined || format === null ? 'yyyy-MM-dd' : format;
  if (typeof picture !== 'string')
    throw new HelperIssue('mapping', `date format must be a string, got ${describe(format)}`, 1);
  const bad = pictureProblem(picture);
  if (bad) throw new HelperIssue('mapping', bad, 1);
  const t = toWallTime(value, timeZone);
  if (!t) throw new HelperIssue('mapping', `expected an ISO 8601 date-time, got ${describe(value)}`, 0);
  return formatWallTime(t, picture);
}
