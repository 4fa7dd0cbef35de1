import { describe, expect, it } from 'vitest';
import { checkDigit, hasValidCheckDigit, luhnDigit, mod11Digit } from '../../../src/lib/check-digit.js';

describe('check digits', () => {
  it('Luhn mod 10 matches the published examples', () => {
    // ISO/IEC 7812-1's worked example and common test card numbers.
    expect(luhnDigit('7992739871')).toBe('3');
    expect(luhnDigit('411111111111111')).toBe('1');
    expect(luhnDigit('37828224631000')).toBe('5');
    expect(luhnDigit('0')).toBe('0');
    expect(hasValidCheckDigit('luhn', '79927398713')).toBe(true);
    expect(hasValidCheckDigit('luhn', '79927398710')).toBe(false);
    expect(hasValidCheckDigit('luhn', '4111111111111111')).toBe(true);
  });

  it('leading zeros do not change a Luhn digit (a zero-padded sequence checks like the bare one)', () => {
    expect(luhnDigit('0007992739871')).toBe(luhnDigit('7992739871'));
  });

  it('mod 11 (weights 2–7 from the right) matches Norwegian account and organisation numbers', () => {
    expect(mod11Digit('8601111794')).toBe('7'); // account 8601.11.17947
    expect(mod11Digit('92360901')).toBe('6'); // organisation number 923 609 016
    expect(hasValidCheckDigit('mod11', '86011117947')).toBe(true);
    expect(hasValidCheckDigit('mod11', '86011117946')).toBe(false);
  });

  it('mod 11 writes 11 as 0 and has no digit for 10 (the pool skips that sequence)', () => {
    // 1×2 = 2 → 11 − 2 = 9; 0 → 11 → 0; 5×2 = 10 → 11 − 10 = 1; 1×2 + 1×3 = 5 → 6;
    // weighted sum 1 mod 11 → 10 → no digit: "6" → 6×2 = 12 ≡ 1.
    expect(mod11Digit('1')).toBe('9');
    expect(mod11Digit('0')).toBe('0');
    expect(mod11Digit('5')).toBe('1');
    expect(mod11Digit('11')).toBe('6');
    expect(mod11Digit('6')).toBeNull();
    expect(checkDigit('mod11', '6')).toBeNull();
  });

  it('none appends nothing and refuses non-digits everywhere', () => {
    expect(checkDigit('none', '123')).toBe('');
    expect(() => luhnDigit('12a')).toThrow(/expected digits/);
    expect(hasValidCheckDigit('luhn', 'AB12')).toBe(false);
  });
});
