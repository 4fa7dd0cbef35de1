/** Date-time helpers for the sandbox: rendering with offsets and the spec's strict date-time rule. */

/** Renders an instant as ISO 8601 in a fixed UTC offset (minutes), e.g. 2025-03-04T05:06:07-05:00. */
export function formatWithOffset(ms: number, offsetMinutes: number): string {
  if (offsetMinutes === 0) return new Date(ms).toISOString();
  const local = new Date(ms + offsetMinutes * 60_000).toISOString().slice(0, 19);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  const mm = String(abs % 60).padStart(2, '0');
  return `${local}${sign}${hh}:${mm}`;
}

const DATE_TIME_RE =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|([+-])(\d{2}):(\d{2}))$/;

/**
 * Parses an ISO 8601 date-time that has a time and a Z or numeric offset and names a real
 * calendar day (2025-02-30 is refused, which Date.parse would roll over). Returns epoch ms or null.
 */
export function parseStrictDateTime(value: string): number | null {
  const m = DATE_TIME_RE.exec(value);
  if (!m) return null;
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day > daysInMonth) return null;
  if (m[8] !== 'Z') {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 14 || om > 59 || (oh === 14 && om > 0)) return null;
  }
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}
