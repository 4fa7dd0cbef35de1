import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bpsToPercent, bpsToRate, centsToDecimal } from '../../../src/mapping/decimal.js';
import { HelperIssue } from '../../../src/mapping/issue.js';

const MAX = Number.MAX_SAFE_INTEGER;
/** Reads a decimal string back into an exact integer of 10^-scale units. */
const units = (s: string | undefined, scale: number): bigint => {
  if (s === undefined) throw new Error('no value');
  const neg = s.startsWith('-');
  const [i = '0', f = ''] = (neg ? s.slice(1) : s).split('.');
  const v = BigInt(i) * 10n ** BigInt(scale) + BigInt(f.padEnd(scale, '0') || '0');
  return neg ? -v : v;
};

describe('centsToDecimal', () => {
  it('formats the documented example', () => {
    expect(centsToDecimal(125000050)).toBe('1250000.50');
    expect(centsToDecimal(5)).toBe('0.05');
    expect(centsToDecimal(0)).toBe('0.00');
    expect(centsToDecimal(-105)).toBe('-1.05');
    expect(centsToDecimal(MAX)).toBe('90071992547409.91');
    expect(centsToDecimal('0012')).toBe('0.12');
  });

  it('is exact for every amount up to 9007199254740991 cents (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: -MAX, max: MAX }), (cents) => {
        const s = centsToDecimal(cents);
        expect(s).toMatch(/^-?\d+\.\d{2}$/);
        expect(units(s, 2)).toBe(BigInt(cents));
      }),
      { numRuns: 5000 },
    );
  });

  it('pads wider scales and refuses to round to narrower ones', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX }), fc.integer({ min: 2, max: 8 }), (cents, scale) => {
        const s = centsToDecimal(cents, scale);
        expect(units(s, scale)).toBe(BigInt(cents) * 10n ** BigInt(scale - 2));
      }),
    );
    expect(centsToDecimal(1200, 0)).toBe('12');
    expect(() => centsToDecimal(1250, 0)).toThrow(HelperIssue);
  });

  it('refuses what is not whole cents instead of rounding', () => {
    expect(() => centsToDecimal(12.5)).toThrow(/whole number/);
    expect(() => centsToDecimal(MAX + 2)).toThrow(/cannot be exact/);
    // Null ≡ absent: nothing in, nothing out (a required field then says it is missing).
    expect(centsToDecimal(null)).toBeUndefined();
    expect(bpsToPercent(undefined)).toBeUndefined();
    expect(() => centsToDecimal('12.50')).toThrow(/whole number/);
    expect(() => centsToDecimal({})).toThrow(HelperIssue);
  });
});

describe('bpsToPercent / bpsToRate', () => {
  it('formats the documented example', () => {
    expect(bpsToPercent(725)).toBe('7.25');
    expect(bpsToRate(725)).toBe('0.0725');
    expect(bpsToPercent(700)).toBe('7.00');
    expect(bpsToPercent(725, 4)).toBe('7.2500');
    expect(bpsToRate(1)).toBe('0.0001');
  });

  it('is exact for every basis-point value up to 9007199254740991 (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX }), (bps) => {
        expect(units(bpsToPercent(bps), 2)).toBe(BigInt(bps));
        expect(units(bpsToRate(bps), 4)).toBe(BigInt(bps));
      }),
      { numRuns: 5000 },
    );
  });
});
