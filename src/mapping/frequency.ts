import { daysInMonth } from '../lib/calendar.js';
import { HelperIssue, describe } from './issue.js';

export type PeriodUnit = 'days' | 'weeks' | 'months' | 'years';

/** A repayment schedule step: every `every` `unit`s. `lumpSum`: one repayment at maturity. */
export interface FrequencySpec {
  every: number;
  unit: PeriodUnit;
  lumpSum?: boolean;
  /** A review item each loan of this frequency gets (the schedule is a convention). */
  review?: string | undefined;
}

export interface Frequency {
  every: number;
  unit: PeriodUnit;
  /** Repayments per year, when whole (null for lump sum and odd schedules). */
  periodsPerYear: number | null;
  lumpSum: boolean;
}

/** How a count that is not whole becomes one (`reject`: an issue, the loan waits for a person). */
export type Rounding = 'up' | 'down' | 'nearest' | 'reject';
const ROUNDINGS: readonly Rounding[] = ['up', 'down', 'nearest', 'reject'];

/** Told when a convention approximated (a review item for a person; the loan still boards). */
export type Note = (message: string) => void;
const silent: Note = () => undefined;

/**
 * The platform's payment frequencies (platform-api.md) → schedule steps (domain-notes.md).
 * `irregular payments` has no schedule of its own: by convention it boards on a monthly schedule
 * with a review item; a mapping can configure another one under `frequencies:`.
 */
export const BUILTIN_FREQUENCIES: Readonly<Record<string, FrequencySpec>> = {
  weekly: { every: 1, unit: 'weeks' },
  biweekly: { every: 2, unit: 'weeks' },
  monthly: { every: 1, unit: 'months' },
  quarterly: { every: 3, unit: 'months' },
  'semi-annual': { every: 6, unit: 'months' },
  annual: { every: 1, unit: 'years' },
  'lump sum': { every: 1, unit: 'months', lumpSum: true },
  'irregular payments': {
    every: 1,
    unit: 'months',
    review:
      'payment frequency "irregular payments" boarded on a monthly ' +
      'schedule by convention: set the real schedule in the core',
  },
};

/** Periods of `unit` in a year, as a fraction num/den (days: 365, a bank's simple convention). */
const PER_YEAR: Record<PeriodUnit, bigint> = { days: 365n, weeks: 52n, months: 12n, years: 1n };

export class FrequencyTable {
  private readonly table: Map<string, FrequencySpec>;

  constructor(configured: Readonly<Record<string, FrequencySpec>> = {}) {
    this.table = new Map();
    for (const [k, v] of Object.entries({ ...BUILTIN_FREQUENCIES, ...configured }))
      this.table.set(normalize(k), v);
  }

  names(): string[] {
    return [...this.table.keys()];
  }

  spec(value: unknown, argIndex = 0, note: Note = silent): FrequencySpec {
    if (value === undefined || value === null || value === '')
      throw new HelperIssue('mapping', 'payment frequency is missing', argIndex);
    if (typeof value !== 'string')
      throw new HelperIssue(
        'mapping',
        `payment frequency must be a string, got ${describe(value)}`,
        argIndex,
      );
    const spec = this.table.get(normalize(value));
    if (spec !== undefined) {
      if (spec.review !== undefined) note(spec.review);
      return spec;
    }
    // A value the spec does not list boards like irregular payments (the convention for a
    // schedule the connector cannot know), with a review item naming the value.
    const irregular = this.table.get('irregular payments');
    if (irregular === undefined || irregular.lumpSum)
      throw new HelperIssue(
        'mapping',
        `unknown payment frequency ${describe(value)} (known: ${this.names().join(', ')})`,
        argIndex,
      );
    note(
      `unknown payment frequency ${describe(value)}: boarded like ` +
        `irregular payments (every ${irregular.every} ${irregular.unit})`,
    );
    return irregular;
  }

  /** `$frequency(f[, monthsTerm])`; lump sum needs the term: one repayment every monthsTerm months. */
  frequency(value: unknown, monthsTerm?: unknown, note: Note = silent): Frequency {
    const spec = this.spec(value, 0, note);
    if (spec.lumpSum) {
      const every =
        monthsTerm === undefined || monthsTerm === null
          ? null
          : Number(positiveMonths(monthsTerm, 'term in months', 1));
      return { every: every ?? 1, unit: 'months', periodsPerYear: null, lumpSum: true };
    }
    const perYear = PER_YEAR[spec.unit];
    const ppy = perYear % BigInt(spec.every) === 0n ? Number(perYear / BigInt(spec.every)) : null;
    return { every: spec.every, unit: spec.unit, periodsPerYear: ppy, lumpSum: false };
  }

  /**
   * Periods of the schedule in `months` months. A count that is not whole is rounded by
   * `rounding` (default up, so the borrower gets at least the months promised) and reported as a
   * review item; `reject` makes it an issue instead (a bank's explicit choice).
   */
  periods(
    months: unknown,
    value: unknown,
    what: string,
    rounding: unknown = 'up',
    note: Note = silent,
  ): number {
    const spec = this.spec(value, 1, note);
    const mode = roundingOf(rounding);
    const m = nonNegativeMonths(months, what, 0);
    if (spec.lumpSum) throw new HelperIssue('mapping', 'lump sum has no periods; use $numberOfRepayments', 1);
    // periods = months × perYear / (12 × every), exact in BigInt
    const num = m * PER_YEAR[spec.unit];
    const den = 12n * BigInt(spec.every);
    if (num % den === 0n) return Number(num / den);
    const approx = (Number((num * 100n) / den) / 100).toFixed(2);
    if (mode === 'reject') {
      throw new HelperIssue(
        'mapping',
        `${what} of ${m} months is not a whole number of ${describe(value)} periods (${approx})`,
        0,
      );
    }
    const floor = num / den;
    const rounded =
      mode === 'up' ? floor + 1n : mode === 'down' ? floor : 2n * (num % den) >= den ? floor + 1n : floor;
    note(
      `${what} of ${m} months is ${approx} ${describe(value)} periods: rounded ` +
        `${mode === 'nearest' ? 'to the nearest' : mode}, ${rounded} (the record keeps the months)`,
    );
    return Number(rounded);
  }

  numberOfRepayments(
    monthsTerm: unknown,
    value: unknown,
    rounding: unknown = 'up',
    note: Note = silent,
  ): number {
    const spec = this.spec(value, 1, note);
    positiveMonths(monthsTerm, 'term in months', 0);
    if (spec.lumpSum) return 1;
    const n = this.periods(monthsTerm, value, 'term', rounding, note);
    if (n >= 1) return n;
    note(
      `term of ${String(monthsTerm)} months is shorter than one ${describe(value)} period: boarded as 1 repayment`,
    );
    return 1;
  }

  /**
   * Interest-only months → periods of the schedule, rounded up (the borrower gets at least the
   * promised months). With the term: interest-only for the whole term is a balloon (every
   * repayment interest-only, principal at maturity), and longer than the term is contradictory.
   * A lump-sum loan repays principal once, so it has none.
   */
  interestOnlyPeriods(
    monthsInterestOnly: unknown,
    value: unknown,
    monthsTerm?: unknown,
    note: Note = silent,
  ): number {
    if (monthsInterestOnly === undefined || monthsInterestOnly === null) return 0;
    const spec = this.spec(value, 1, note);
    const io = nonNegativeMonths(monthsInterestOnly, 'interest-only months', 0);
    const term =
      monthsTerm === undefined || monthsTerm === null
        ? undefined
        : positiveMonths(monthsTerm, 'term in months', 2);
    if (term !== undefined && io > term) {
      throw new HelperIssue(
        'contradictory',
        `interest-only period of ${io} months is longer than the term of ${term} months`,
        0,
      );
    }
    if (spec.lumpSum) return 0;
    const periods = this.periods(monthsInterestOnly, value, 'interest-only period', 'up', note);
    if (term === undefined) return periods;
    const n = this.numberOfRepayments(Number(term), value, 'up', silent);
    if (periods < n) return periods;
    if (io < term)
      note(
        `interest-only ${io} of ${term} months covers every one of the ${n} ${describe(value)} ` +
          `repayments once rounded: boarded interest-only to maturity (balloon)`,
      );
    return n;
  }

  /**
   * Repayments counted on the calendar from the first payment date to maturity (both yyyy-MM-dd,
   * in the bank's zone), inclusive. Maturity off the schedule counts the payments before it and is
   * reported.
   */
  repaymentsBetween(first: unknown, maturity: unknown, value: unknown, note: Note = silent): number {
    const spec = this.spec(value, 2, note);
    const a = ymd(first, 'first payment date', 0);
    const b = ymd(maturity, 'maturity date', 1);
    if (b.t < a.t)
      throw new HelperIssue(
        'contradictory',
        `maturity date ${String(maturity)} is before the first payment date ${String(first)}`,
        1,
      );
    if (spec.lumpSum) return 1;
    let count: number;
    let exact: boolean;
    if (spec.unit === 'months' || spec.unit === 'years') {
      const step = spec.every * (spec.unit === 'years' ? 12 : 1);
      const months =
        (b.y - a.y) * 12 + (b.m - a.m) - (b.d < a.d && !(b.d === daysInMonth(b.y, b.m) && a.d > b.d) ? 1 : 0);
      count = Math.floor(months / step) + 1;
      exact = months % step === 0 && (b.d === a.d || (b.d === daysInMonth(b.y, b.m) && a.d > b.d));
    } else {
      const step = spec.every * (spec.unit === 'weeks' ? 7 : 1);
      const days = Math.round((b.t - a.t) / 86_400_000);
      count = Math.floor(days / step) + 1;
      exact = days % step === 0;
    }
    if (!exact)
      note(
        `maturity ${String(maturity)} is not on the ${describe(value)} ` +
          `schedule from ${String(first)}: ${count} repayments counted up to it`,
      );
    return count;
  }
}

function ymd(v: unknown, what: string, argIndex: number): { y: number; m: number; d: number; t: number } {
  const m = typeof v === 'string' ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(v) : null;
  if (!m) throw new HelperIssue('mapping', `${what} is missing or not a date`, argIndex);
  const y = Number(m[1]);
  const mo = Number(m[2]);
  const d = Number(m[3]);
  return { y, m: mo, d, t: Date.UTC(y, mo - 1, d) };
}

function roundingOf(v: unknown): Rounding {
  if (v === undefined || v === null) return 'up';
  if (typeof v === 'string' && (ROUNDINGS as readonly string[]).includes(v)) return v as Rounding;
  throw new HelperIssue('mapping', `rounding must be one of ${ROUNDINGS.join(', ')}, got ${describe(v)}`, 2);
}

function normalize(s: string): string {
  return s.trim().toLowerCase().replace(/\s+/g, ' ');
}

function nonNegativeMonths(value: unknown, what: string, argIndex: number): bigint {
  if (value === undefined || value === null) throw new HelperIssue('mapping', `${what} is missing`, argIndex);
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new HelperIssue('mapping', `${what} must be a whole number ≥ 0, got ${describe(value)}`, argIndex);
  }
  return BigInt(value);
}

function positiveMonths(value: unknown, what: string, argIndex: number): bigint {
  const m = nonNegativeMonths(value, what, argIndex);
  if (m === 0n) throw new HelperIssue('mapping', `${what} must be greater than 0`, argIndex);
  return m;
}
