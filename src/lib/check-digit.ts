/**
 * Check digits for the bank's account and customer numbers (docs/core.md "Account and customer
 * numbers"). Both schemes take the digits the check digit protects (everything before it) and
 * return the one digit appended to them, or null when the scheme has no digit for them.
 *
 * - `luhn`: Luhn mod 10 (ISO/IEC 7812-1): from the rightmost payload digit leftwards every
 *   second digit is doubled (9 subtracted when the double exceeds 9), the check digit is
 *   (10 − sum mod 10) mod 10. 7992739871 → 3.
 * - `mod11`: weights 2, 3, 4, 5, 6, 7, 2, 3, … from the rightmost payload digit leftwards, check
 *   digit = 11 − (weighted sum mod 11); a result of 11 is written 0; a result of 10 has no digit
 *   (null): that sequence is never issued (the pool skips it). This is the variant of Norwegian
 *   account and organisation numbers (8601111794 → 7, 92360901 → 6).
 */
export type CheckDigitScheme = 'luhn' | 'mod11' | 'none';

const DIGITS = /^\d+$/;

function assertDigits(payload: string): void {
  if (!DIGITS.test(payload)) throw new Error(`check digit: expected digits, got ${JSON.stringify(payload)}`);
}

export function luhnDigit(payload: string): string {
  assertDigits(payload);
  let sum = 0;
  let double = true;
  for (let i = payload.length - 1; i >= 0; i--) {
    let d = payload.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return String((10 - (sum % 10)) % 10);
}

export function mod11Digit(payload: string): string | null {
  assertDigits(payload);
  let sum = 0;
  let weight = 2;
  for (let i = payload.length - 1; i >= 0; i--) {
    sum += (payload.charCodeAt(i) - 48) * weight;
    weight = weight === 7 ? 2 : weight + 1;
  }
  const check = 11 - (sum % 11);
  if (check === 11) return '0';
  if (check === 10) return null;
  return String(check);
}

/** The check digit for `payload` under `scheme`: '' for none, null when the scheme has none for it. */
export function checkDigit(scheme: CheckDigitScheme, payload: string): string | null {
  switch (scheme) {
    case 'luhn':
      return luhnDigit(payload);
    case 'mod11':
      return mod11Digit(payload);
    case 'none':
      assertDigits(payload);
      return '';
  }
}

/** Whether `value` (payload followed by its check digit) carries a valid check digit under `scheme`. */
export function hasValidCheckDigit(scheme: CheckDigitScheme, value: string): boolean {
  if (!DIGITS.test(value)) return false;
  if (scheme === 'none') return true;
  if (value.length < 2) return false;
  const digit = checkDigit(scheme, value.slice(0, -1));
  return digit !== null && digit === value.slice(-1);
}
