import { formatUnits, rescale } from '../lib/decimal.js';
import { HelperIssue, describe } from './issue.js';

/**
 * Money and rate conversions with BigInt/string math only. JSONata numbers are IEEE doubles, so
 * money never goes through `/` or `*` in an expression: whole cents come in, a decimal string
 * goes out, and any value that is not an exact integer is refused instead of rounded.
 */

/** Accepts a safe integer number or a string of digits (optionally signed); refuses the rest. */
export function toBigIntExact(value: unknown, what: string, argIndex = 0): bigint {
  if (value === undefined || value === null) throw new HelperIssue('mapping', `${what} is missing`, argIndex);
  if (typeof value === 'number') {
    if (!Number.isInteger(value))
      throw new HelperIssue('mapping', `${what} must be a whole number, got ${describe(value)}`, argIndex);
    if (!Number.isSafeInteger(value))
      throw new HelperIssue(
        'mapping',
        `${what} ${describe(value)} is beyond 9007199254740991 and cannot be exact`,
        argIndex,
      );
    return BigInt(value);
  }
  if (typeof value === 'string' && /^-?\d+$/.test(value.trim())) return BigInt(value.trim());
  throw new HelperIssue('mapping', `${what} must be a whole number, got ${describe(value)}`, argIndex);
}

function scaleArg(value: unknown, fallback: number, argIndex: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 18) {
    throw new HelperIssue(
      'mapping',
      `scale must be an integer from 0 to 18, got ${describe(value)}`,
      argIndex,
    );
  }
  return value;
}

/**
 * Formats `units / 10^exponent` with exactly `scale` decimals. Refuses (never rounds) when the
 * requested scale would drop non-zero digits.
 */
export function formatScaled(units: bigint, exponent: number, scale: number, what: string): string {
  const v = rescale(units, exponent, scale);
  if (v === undefined)
    throw new HelperIssue('mapping', `${what} cannot be written with ${scale} decimals without rounding`);
  return formatUnits(v, scale);
}

/** 125000050 → "1250000.50" (scale 2 by default). */
// Nothing in → nothing out (like $date): a null or absent optional amount leaves the field out;
// a required field then says it is missing.
export function centsToDecimal(cents: unknown, scale?: unknown): string | undefined {
  if (cents === undefined || cents === null) return undefined;
  return formatScaled(toBigIntExact(cents, 'amount in cents'), 2, scaleArg(scale, 2, 1), 'amount');
}

/** 725 → "7.25" (percent, scale 2 by default). */
export function bpsToPercent(bps: unknown, scale?: unknown): string | undefined {
  if (bps === undefined || bps === null) return undefined;
  return formatScaled(toBigIntExact(bps, 'rate in basis points'), 2, scaleArg(scale, 2, 1), 'rate');
}

/** 725 → "0.0725" (fraction, scale 4 by default). */
export function bpsToRate(bps: unknown, scale?: unknown): string | undefined {
  if (bps === undefined || bps === null) return undefined;
  return formatScaled(toBigIntExact(bps, 'rate in basis points'), 4, scaleArg(scale, 4, 1), 'rate');
}
