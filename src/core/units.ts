/**
 * A core's decimal amounts and rates back to platform units (cents, basis points), for
 * reconciliation; shared by the HTTP cores (Fineract, Mambu). Integer/string math only: a
 * principal of 1250000.5 becomes 125000050 cents without ever multiplying a float.
 */

/** A decimal (number or string) with up to 2 places kept exactly; further places round half up. */
export function decimalToHundredths(value: unknown): number | null {
  if (typeof value !== 'number' && typeof value !== 'string') return null;
  const text = typeof value === 'number' ? numberToPlainString(value) : value.trim();
  const m = /^(-)?(\d+)(?:\.(\d*))?$/.exec(text);
  if (!m) return null;
  const frac = (m[3] ?? '').padEnd(3, '0');
  let hundredths = BigInt(m[2] ?? '0') * 100n + BigInt(frac.slice(0, 2));
  if (Number(frac[2]) >= 5) hundredths += 1n;
  const n = Number(m[1] ? -hundredths : hundredths);
  return Number.isSafeInteger(n) ? n : null;
}

function numberToPlainString(n: number): string {
  if (!Number.isFinite(n)) return '';
  const s = String(n);
  // Small/large numbers print with an exponent; toFixed(6) is exact enough for money/rates here.
  return /e/i.test(s) ? n.toFixed(6) : s;
}

/** Amount in the currency unit → cents. */
export const decimalToCents = decimalToHundredths;
/** Percent (7.25) → basis points (725). */
export const percentToBps = decimalToHundredths;
