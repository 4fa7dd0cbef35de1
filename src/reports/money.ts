/** Integer cents → "1234567.89" (no float division; negative amounts keep their sign). */
export function formatCents(cents: number): string {
  if (!Number.isSafeInteger(cents)) return String(cents);
  const neg = cents < 0;
  const abs = BigInt(Math.abs(cents));
  const whole = abs / 100n;
  const frac = (abs % 100n).toString().padStart(2, '0');
  return `${neg ? '-' : ''}${whole.toString()}.${frac}`;
}

/** Integer cents → "1,234,567.89" for people (HTML). */
export function formatCentsGrouped(cents: number): string {
  const plain = formatCents(cents);
  const m = /^(-?)(\d+)(\.\d+)?$/.exec(plain);
  if (!m) return plain;
  return `${m[1] ?? ''}${(m[2] ?? '').replace(/\B(?=(\d{3})+(?!\d))/g, ',')}${m[3] ?? ''}`;
}
