import { describe, expect, it } from 'vitest';
import { FrequencyTable } from '../../../src/mapping/frequency.js';

const t = new FrequencyTable();

describe('frequency and term conversions', () => {
  it('maps every platform frequency (domain-notes table)', () => {
    expect(t.frequency('weekly')).toMatchObject({ every: 1, unit: 'weeks', periodsPerYear: 52 });
    expect(t.frequency('biweekly')).toMatchObject({ every: 2, unit: 'weeks', periodsPerYear: 26 });
    expect(t.frequency('monthly')).toMatchObject({ every: 1, unit: 'months', periodsPerYear: 12 });
    expect(t.frequency('quarterly')).toMatchObject({ every: 3, unit: 'months', periodsPerYear: 4 });
    expect(t.frequency('semi-annual')).toMatchObject({ every: 6, unit: 'months', periodsPerYear: 2 });
    expect(t.frequency('annual')).toMatchObject({ every: 1, unit: 'years', periodsPerYear: 1 });
    expect(t.frequency('lump sum', 18)).toMatchObject({ every: 18, unit: 'months', lumpSum: true });
    const notes: string[] = [];
    expect(t.frequency('irregular payments', undefined, (n) => notes.push(n))).toMatchObject({
      every: 1,
      unit: 'months',
    });
    expect(t.frequency('fortnightly', undefined, (n) => notes.push(n))).toMatchObject({
      every: 1,
      unit: 'months',
    });
    expect(notes).toEqual([
      expect.stringMatching(/irregular payments" boarded on a monthly schedule/),
      expect.stringMatching(/unknown payment frequency "fortnightly": boarded like irregular payments/),
    ]);
    expect(() => t.frequency(null)).toThrow(/missing/);
  });

  it('counts repayments exactly and refuses non-whole counts', () => {
    expect(t.numberOfRepayments(12, 'weekly')).toBe(52);
    expect(t.numberOfRepayments(24, 'biweekly')).toBe(52);
    expect(t.numberOfRepayments(60, 'monthly')).toBe(60);
    expect(t.numberOfRepayments(36, 'quarterly')).toBe(12);
    expect(t.numberOfRepayments(60, 'semi-annual')).toBe(10);
    expect(t.numberOfRepayments(120, 'annual')).toBe(10);
    expect(t.numberOfRepayments(18, 'lump sum')).toBe(1);
    // Not whole: rounded by the convention (default up), with a note; reject is the bank's choice.
    const notes: string[] = [];
    expect(t.numberOfRepayments(13, 'biweekly', undefined, (n) => notes.push(n))).toBe(29);
    expect(notes).toEqual([
      'term of 13 months is 28.16 "biweekly" periods: rounded up, 29 (the record keeps the months)',
    ]);
    expect(t.numberOfRepayments(13, 'biweekly', 'down')).toBe(28);
    expect(t.numberOfRepayments(13, 'weekly', 'nearest')).toBe(56);
    expect(t.numberOfRepayments(1, 'annual')).toBe(1);
    expect(() => t.numberOfRepayments(13, 'biweekly', 'reject')).toThrow(/not a whole number/);
    expect(() => t.numberOfRepayments(13, 'biweekly', 'sideways')).toThrow(/rounding must be one of/);
    expect(() => t.numberOfRepayments(0, 'monthly')).toThrow(/greater than 0/);
  });

  it('converts interest-only months to periods', () => {
    expect(t.interestOnlyPeriods(6, 'quarterly')).toBe(2);
    expect(t.interestOnlyPeriods(undefined, 'monthly')).toBe(0);
    expect(t.interestOnlyPeriods(18, 'lump sum')).toBe(0);
    expect(t.interestOnlyPeriods(6, 'annual')).toBe(1); // 0.50 rounded up: at least the promised months
    expect(t.interestOnlyPeriods(3, 'biweekly', 36)).toBe(7);
    expect(t.interestOnlyPeriods(12, 'monthly', 12)).toBe(12); // the whole term: a balloon
    expect(t.interestOnlyPeriods(1, 'annual', 2)).toBe(1); // rounds to every repayment: balloon
    expect(() => t.interestOnlyPeriods(18, 'monthly', 12)).toThrow(/longer than the term of 12 months/);
  });

  it('lets a mapping configure irregular payments', () => {
    const c = new FrequencyTable({ 'irregular payments': { every: 1, unit: 'months' } });
    expect(c.numberOfRepayments(24, 'irregular payments')).toBe(24);
  });

  it('counts repayments on the calendar from the first payment to maturity', () => {
    const notes: string[] = [];
    expect(t.repaymentsBetween('2025-04-14', '2030-03-14', 'monthly')).toBe(60);
    expect(t.repaymentsBetween('2025-01-31', '2025-04-30', 'monthly')).toBe(4);
    expect(t.repaymentsBetween('2025-01-06', '2025-03-31', 'weekly')).toBe(13);
    expect(t.repaymentsBetween('2025-01-06', '2025-04-01', 'weekly', (n) => notes.push(n))).toBe(13);
    expect(notes[0]).toMatch(/not on the "weekly" schedule/);
    expect(() => t.repaymentsBetween('2025-05-01', '2025-04-01', 'monthly')).toThrow(
      /before the first payment/,
    );
  });
});
