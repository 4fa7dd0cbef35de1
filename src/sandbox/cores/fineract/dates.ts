/** Dates and numbers as Fineract reads them: with the request's `dateFormat` and `locale`. */

const MONTHS = [
  'january',
  'february',
  'march',
  'april',
  'may',
  'june',
  'july',
  'august',
  'september',
  'october',
  'november',
  'december',
];

/** Parses a date with a Java-style pattern (yyyy, MM, MMMM, dd); returns yyyy-mm-dd or null. */
export function parseFineractDate(value: unknown, format: string): string | null {
  if (typeof value !== 'string') return null;
  const order: string[] = [];
  const re = format.replace(/yyyy|MMMM|MM|dd|[.*+?^${}()|[\]\\]/g, (tok) => {
    if (tok === 'yyyy') return (order.push('y'), '(\\d{4})');
    if (tok === 'MMMM') return (order.push('N'), '([A-Za-z]+)');
    if (tok === 'MM') return (order.push('M'), '(\\d{1,2})');
    if (tok === 'dd') return (order.push('d'), '(\\d{1,2})');
    return `\\${tok}`;
  });
  const m = new RegExp(`^${re}$`).exec(value.trim());
  if (!m) return null;
  let y = 0;
  let mo = 0;
  let d = 0;
  order.forEach((k, i) => {
    const v = m[i + 1] ?? '';
    if (k === 'y') y = Number(v);
    if (k === 'M') mo = Number(v);
    if (k === 'N') mo = MONTHS.indexOf(v.toLowerCase()) + 1;
    if (k === 'd') d = Number(v);
  });
  const dt = new Date(Date.UTC(y, mo - 1, d));
  if (mo < 1 || dt.getUTCFullYear() !== y || dt.getUTCMonth() !== mo - 1 || dt.getUTCDate() !== d)
    return null;
  return dt.toISOString().slice(0, 10);
}

/** Fineract answers dates as `[yyyy, m, d]` (LocalDate through its JSON serializer). */
export function dateArray(iso: string | undefined): number[] | undefined {
  if (iso === undefined) return undefined;
  const [y, m, d] = iso.split('-').map(Number);
  return [y ?? 0, m ?? 0, d ?? 0];
}

/** `iso` plus n periods of PeriodFrequencyType `unit` (0 days, 1 weeks, 2 months, 3 years). */
export function addPeriod(iso: string, n: number, unit: number): string {
  const dt = new Date(`${iso}T00:00:00Z`);
  if (unit === 0) dt.setUTCDate(dt.getUTCDate() + n);
  if (unit === 1) dt.setUTCDate(dt.getUTCDate() + 7 * n);
  if (unit === 2) dt.setUTCMonth(dt.getUTCMonth() + n);
  if (unit === 3) dt.setUTCFullYear(dt.getUTCFullYear() + n);
  return dt.toISOString().slice(0, 10);
}

/**
 * A BigDecimal parameter: a JSON number, or a string read with the request's locale
 * (JsonParserHelper.extractBigDecimalNamed); only `en` grouping is modelled here.
 */
export function num(v: unknown, locale: unknown): number | null {
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v !== 'string' || v.trim() === '') return null;
  const text = locale === 'en' ? v.replace(/,/g, '') : v;
  const n = Number(text);
  return Number.isFinite(n) ? n : null;
}

export function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v);
}

/** Today in UTC as yyyy-mm-dd (Fineract's business date when the tenant sets none). */
export function todayIso(now: number = Date.now()): string {
  return new Date(now).toISOString().slice(0, 10);
}
