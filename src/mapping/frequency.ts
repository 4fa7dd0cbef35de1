import { HelperIssue, describe } from './issue.js';

export type PeriodUnit = 'days' | 'weeks' | 'months' | 'years';

/** A repayment schedule step: every `every` `unit`s. `lumpSum`: one repayment at maturity. */
export interface FrequencySpec {
  every: number;
  unit: PeriodUnit;
  lumpSum?: boolean;
}

export interface Frequency {
  every: number;
  unit: PeriodUnit;
  /** Repayments per year, when whole (null for lump sum and odd schedules). */
  periodsPerYear: number | null;
  lumpSum: boolean;
}

/**
 * The platform's payment frequencies (platform-api.md) → schedule steps (domain-notes.md).
 * `irregular payments` has no schedule: a mapping must configure it under `frequencies:` or the
 * loan gets a mapping issue.
 */
export const BUILTIN_FREQUENCIES: Readonly<Record<string, FrequencySpec>> = {
  weekly: { every: 1, unit: 'weeks' },
  biweekly: { every: 2, unit: 'weeks' },
  monthly: { every: 1, unit: 'months' },
  quarterly: { every: 3, unit: 'months' },
  'semi-annual': { every: 6, unit: 'months' },
  annual: { every: 1, unit: 'years' },
  'lump sum': { every: 1, unit: 'months', lumpSum: true },
};

/** Periods of `unit` in a year, as a fraction num/den (days: 365, a bank's simple convention). */
const PER_YEAR: Record<PeriodUnit, bigint> = { days: 365n, weeks: 52n, months: 12n, years: 1n };

export class FrequencyTable {
  private readonly table: Map<string, FrequencySpec>;

  constructor(configured: Readonly<Record<string, FrequencySpec>> = {}) {
    this.table = new Map();
    for (const [k, v] of Object.entries({ ...BUILTIN_FREQUENCIES, ...configured })) this.table.set(normalize(k), v);
  }

  names(): string[] {
    return [...this.table.keys()];
  }

  spec(value: unknown, argIndex = 0): FrequencySpec {
    if (value === undefined || value === null || value === '') throw new HelperIssue('mapping', 'payment frequency is missing', argIndex);
    if (typeof value !== 'string') throw new HelperIssue('mapping', `payment frequency must be a string, got ${describe(value)}`, argIndex);
    const spec = this.table.get(normalize(value));
    if (spec) return spec;
    if (normalize(value) === 'irregular payments') {
      throw new HelperIssue(
        'mapping',
        'payment frequency "irregular payments" has no fixed schedule; configure it under frequencies: in the mapping file or board it by hand',
        argIndex,
      );
    }
    throw new HelperIssue('mapping', `unknown payment frequency ${describe(value)} (known: ${this.names().join(', ')})`, argIndex);
  }

  /** `$frequency(f[, monthsTerm])`; lump sum needs the term: one repayment every monthsTerm months. */
  frequency(value: unknown, monthsTerm?: unknown): Frequency {
    const spec = this.spec(value);
    if (spec.lumpSum) {
      const every = monthsTerm === undefined ? null : Number(positiveMonths(monthsTerm, 'term in months', 1));
      return { every: every ?? 1, unit: 'months', periodsPerYear: null, lumpSum: true };
    }
    const perYear = PER_YEAR[spec.unit];
    const ppy = perYear % BigInt(spec.every) === 0n ? Number(perYear / BigInt(spec.every)) : null;
    return { every: spec.every, unit: spec.unit, periodsPerYear: ppy, lumpSum: false };
  }

  /**
   * Whole periods of the schedule in `months` months. A non-whole count is a mapping issue, never
   * rounded: 13 months biweekly is not a schedule a core can be told about.
   */
  periods(months: unknown, value: unknown, what: string): number {
    const spec = this.spec(value, 1);
    const m = nonNegativeMonths(months, what, 0);
    if (spec.lumpSum) throw new HelperIssue('mapping', 'lump sum has no periods; use $numberOfRepayments', 1);
    // periods = months × perYear / (12 × every), exact in BigInt
    const num = m * PER_YEAR[spec.unit];
    const den = 12n * BigInt(spec.every);
    if (num % den !== 0n) {
      const approx = (Number((num * 100n) / den) / 100).toFixed(2);
      throw new HelperIssue('mapping', `${what} of ${m} months is not a whole number of ${describe(value)} periods (${approx})`, 0);
    }
    return Number(num / den);
  }

  numberOfRepayments(monthsTerm: unknown, value: unknown): number {
    const spec = this.spec(value, 1);
    if (spec.lumpSum) {
      positiveMonths(monthsTerm, 'term in months', 0);
      return 1;
    }
    positiveMonths(monthsTerm, 'term in months', 0);
    return this.periods(monthsTerm, value, 'term');
  }

  /** Interest-only months → periods; a lump-sum loan repays principal once, so it has none. */
  interestOnlyPeriods(monthsInterestOnly: unknown, value: unknown): number {
    if (monthsInterestOnly === undefined || monthsInterestOnly === null) return 0;
    const spec = this.spec(value, 1);
    if (spec.lumpSum) {
      nonNegativeMonths(monthsInterestOnly, 'interest-only months', 0);
      return 0;
    }
    return this.periods(monthsInterestOnly, value, 'interest-only period');
  }
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
