import { formatWallTime, toWallTime } from '../mapping/calendar.js';
import type { AgeBucket } from './types.js';

/**
 * Dates in the bank's time zone and business-day ages. Business days are Monday–Friday with no
 * holiday calendar: simple, predictable, and conservative (a holiday makes an item look one day
 * older, never younger).
 */

const formatters = new Map<string, Intl.DateTimeFormat>();

function dateFormatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    // en-CA formats as YYYY-MM-DD.
    f = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
    formatters.set(timeZone, f);
  }
  return f;
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;

/** The calendar date (YYYY-MM-DD) of an instant in a time zone. */
export function localDate(epochMs: number, timeZone: string): string {
  return dateFormatter(timeZone).format(new Date(epochMs));
}

/** "2026-11-21 06:33:36 America/Chicago" style rendering of an instant. */
export function localDateTime(epochMs: number, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'short',
  }).formatToParts(new Date(epochMs));
  const get = (t: Intl.DateTimeFormatPartTypes): string => parts.find((p) => p.type === t)?.value ?? '';
  return `${get('year')}-${get('month')}-${get('day')} ${get('hour')}:${get('minute')}:${get('second')} ${get('timeZoneName')}`;
}

/**
 * Normalizes a platform or core date for comparison: a date-only value stays as it is (never
 * `new Date(dateOnly)`, which shifts a day west of UTC); a date-time becomes its calendar date in
 * the bank's zone. Unparseable text is returned trimmed, so it still compares (and shows) as is.
 */
export function comparableDate(value: string, timeZone: string): string {
  // The same rule the mapping used to derive the core date ($date): an instant is converted to
  // the bank's zone, a value without offset is taken as written (Date.parse would read it in the
  // process's own zone, so a server's TZ could invent a one-day difference).
  const v = value.trim();
  const wall = toWallTime(v, timeZone);
  return wall === null ? v : formatWallTime(wall, 'yyyy-MM-dd');
}

/** Parses an ISO date-time (or date-only, read as midnight UTC) to epoch ms, or null. */
export function parseInstant(value: string | null | undefined): number | null {
  if (value === null || value === undefined || value === '') return null;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

function dayNumber(date: string): number {
  const m = DATE_ONLY.exec(date);
  if (!m) throw new Error(`expected YYYY-MM-DD, got ${date}`);
  return Math.floor(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) / 86_400_000);
}

/** Weekdays (Mon–Fri) after `from` up to and including `to`; 0 when to ≤ from. */
export function businessDaysBetween(from: string, to: string): number {
  const a = dayNumber(from);
  const b = dayNumber(to);
  if (b <= a) return 0;
  // Day 0 (1970-01-01) was a Thursday: weekday index with Monday = 0.
  const weekday = (d: number): number => (((d + 3) % 7) + 7) % 7;
  const days = b - a;
  const weeks = Math.floor(days / 7);
  let count = weeks * 5;
  for (let d = a + weeks * 7 + 1; d <= b; d++) if (weekday(d) < 5) count++;
  return count;
}

export function ageBucket(businessDays: number): AgeBucket {
  if (businessDays <= 1) return '0-1';
  if (businessDays <= 5) return '2-5';
  return '>5';
}
