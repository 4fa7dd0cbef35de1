import { describe, expect, it } from 'vitest';
import {
  canonicalFromFineractLoan,
  fineractDate,
  platformFrequency,
} from '../../../src/core/fineract/units.js';
import { decimalToCents, percentToBps } from '../../../src/core/units.js';
import { fineractMessage } from '../../../src/core/fineract/http.js';

describe('Fineract units back to platform units', () => {
  it('converts decimals to cents exactly, never through float multiplication', () => {
    expect(decimalToCents(1250000.5)).toBe(125000050);
    expect(decimalToCents('1250000.50')).toBe(125000050);
    expect(decimalToCents(0.29)).toBe(29); // 0.29 * 100 = 28.999999999999996 in floats
    expect(decimalToCents(1.005)).toBe(101);
    expect(decimalToCents('12')).toBe(1200);
    expect(decimalToCents(null)).toBeNull();
    expect(decimalToCents('1,000.00')).toBeNull();
    expect(percentToBps(7.25)).toBe(725);
    expect(percentToBps(0.57)).toBe(57);
  });

  it('reads date arrays and frequencies', () => {
    expect(fineractDate([2025, 3, 4])).toBe('2025-03-04');
    expect(fineractDate('2025-03-04')).toBe('2025-03-04');
    expect(fineractDate(undefined)).toBeNull();
    expect(platformFrequency(2, { id: 1 }, 26)).toBe('biweekly');
    expect(platformFrequency(3, 2, 20)).toBe('quarterly');
    expect(platformFrequency(60, 2, 1)).toBe('lump sum');
    expect(platformFrequency(5, 0, 10)).toBeNull();
  });

  it('maps a loan response', () => {
    expect(
      canonicalFromFineractLoan({
        principal: 1000,
        annualInterestRate: 6.5,
        numberOfRepayments: 12,
        repaymentEvery: 1,
        repaymentFrequencyType: { id: 2 },
        timeline: { expectedMaturityDate: [2026, 1, 31] },
      }),
    ).toEqual({
      centsAmount: 100000,
      bpsRate: 650,
      maturityDate: '2026-01-31',
      firstPaymentDate: null,
      paymentFrequency: 'monthly',
    });
  });

  it("quotes Fineract's own messages", () => {
    expect(
      fineractMessage(
        {
          defaultUserMessage: 'Validation errors exist.',
          errors: [
            { parameterName: 'principal', defaultUserMessage: 'The parameter `principal` is mandatory.' },
          ],
        },
        '',
      ),
    ).toBe('The parameter `principal` is mandatory.');
    expect(fineractMessage({ defaultUserMessage: 'Client with externalId `x` already exists' }, '')).toBe(
      'Client with externalId `x` already exists',
    );
    expect(fineractMessage(null, '<html>bad gateway</html>')).toBe('<html>bad gateway</html>');
  });
});
