/**
 * Exact decimals as scaled integers (BigInt units of 10^-decimals): the one formatting of money
 * and rates, shared by the mapping helpers (`$centsToDecimal`…) and the file core's layouts
 * (decimal columns, header and trailer totals). Nothing here rounds.
 */

/** `units × 10^-decimals` written with exactly `decimals` digits after the point (no point for 0); never "-0". */
export function formatUnits(units: bigint, decimals: number): string {
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(decimals + 1, '0');
  const body =
    decimals === 0
      ? digits
      : `${digits.slice(0, digits.length - decimals)}.${digits.slice(digits.length - decimals)}`;
  return `${negative ? '-' : ''}${body}`;
}

/** Units of 10^-from as units of 10^-to; undefined when that would drop non-zero digits. */
export function rescale(units: bigint, from: number, to: number): bigint | undefined {
  if (to >= from) return units * 10n ** BigInt(to - from);
  const drop = 10n ** BigInt(from - to);
  return units % drop === 0n ? units / drop : undefined;
}
