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
    expect(() => t.frequency('irregular payments')).toThrow(/no fixed schedule/);
    expect(() => t.frequency('fortnightly')).toThrow(/unknown payment frequency "fortnightly"/);
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
    expect(() => t.numberOfRepayments(13, 'biweekly')).toThrow(/not a whole number/);
    expect(() => t.numberOfRepayments(0, 'monthly')).toThrow(/greater than 0/);
    expect(() => t.numberOfRepayments(Number.MAX_SAFE_INTEGER, 'weekly')).toThrow(/not a whole number/);
  });

  it('converts interest-only months to periods', () => {
    expect(t.interestOnlyPeriods(6, 'quarterly')).toBe(2);
    expect(t.interestOnlyPeriods(undefined, 'monthly')).toBe(0);
    expect(t.interestOnlyPeriods(18, 'lump sum')).toBe(0);
    expect(() => t.interestOnlyPeriods(6, 'annual')).toThrow(/0\.50/);
  });

  it('lets a mapping configure irregular payments', () => {
    const c = new FrequencyTable({ 'irregular payments': { every: 1, unit: 'months' } });
    expect(c.numberOfRepayments(24, 'irregular payments')).toBe(24);
  });
});
