import { toWallTime, wallTimeAt, zonedToUtc } from '../../lib/calendar.js';

/** Mambu's published date-time: date, time, and an offset (Z or ±hh:mm). */
const DATE_TIME_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;

const pad = (n: number, w = 2): string => String(Math.abs(n)).padStart(w, '0');

/**
 * A calendar day as Mambu types it (API v2 OpenAPI, `string<date-time>`, "stored as Organization
 * Time"): the day's first instant in the tenant's zone, written with that day's offset, e.g.
 * `2025-08-19T00:00:00-05:00` in America/Chicago. DST-correct: the offset is the one in force at the
 * day's midnight; a day whose midnight is skipped (Santiago, Havana) starts at the first wall time
 * that exists. A value that already is a date-time with an offset is kept as written.
 * Null for anything else (a date-time without offset says no instant).
 */
export function mambuDateTime(value: string, timeZone: string): string | null {
  if (DATE_TIME_WITH_OFFSET.test(value)) return toWallTime(value, timeZone) === null ? null : value;
  const m = DATE_ONLY.exec(value);
  if (m === null || toWallTime(value, timeZone) === null) return null;
  const day = { year: Number(m[1]), month: Number(m[2]), day: Number(m[3]) };
  const utc = zonedToUtc(day, timeZone);
  const wall = wallTimeAt(utc, timeZone);
  const offsetMin = Math.round(
    (Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second) - utc) / 60_000,
  );
  const sign = offsetMin < 0 ? '-' : '+';
  return (
    `${pad(wall.year, 4)}-${pad(wall.month)}-${pad(wall.day)}` +
    `T${pad(wall.hour)}:${pad(wall.minute)}:${pad(wall.second)}` +
    `${sign}${pad(Math.trunc(Math.abs(offsetMin) / 60))}:${pad(Math.abs(offsetMin) % 60)}`
  );
}

/** The loan account fields Mambu types as date-time (disbursementDetails, Loanaccount schema). */
export const LOAN_DATE_TIME_FIELDS: ReadonlyArray<readonly [string, string]> = [
  ['disbursementDetails', 'expectedDisbursementDate'],
  ['disbursementDetails', 'firstRepaymentDate'],
];
