/**
 * Calendar days and wall-clock times in the bank's time zone: the one place the connector turns
 * instants into dates. Never `new Date(dateOnly)`: that parses as UTC midnight and shows the
 * previous day west of Greenwich; never the process's own zone (a server's TZ would move dates).
 */

export interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?\s*([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DAY_MS = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hourCycle: 'h23',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

export function isValidTimeZone(timeZone: string): boolean {
  try {
    formatterFor(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** Days in a month (1-12) of the proleptic Gregorian calendar. */
export function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** The zone's UTC offset at an instant, from Intl (whole seconds: historical offsets have them). */
function rawOffsetMs(timeZone: string, utcMs: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatterFor(timeZone).formatToParts(new Date(utcMs))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  const asUtc = Date.UTC(
    parts['year'] ?? 1970,
    (parts['month'] ?? 1) - 1,
    parts['day'] ?? 1,
    parts['hour'] ?? 0,
    parts['minute'] ?? 0,
    parts['second'] ?? 0,
  );
  return asUtc - (utcMs - (((utcMs % 1000) + 1000) % 1000));
}

const BUCKET_MS = 15 * 60_000;
const DAY_BUCKET_MS = 24 * 60 * 60_000;
const offsetCache = new Map<string, Map<number, number>>();
const dayOffsetCache = new Map<string, Map<number, number>>();

/** The cache of one zone (bounded: cleared past 50,000 entries). */
function cacheOf(caches: Map<string, Map<number, number>>, timeZone: string): Map<number, number> {
  let cache = caches.get(timeZone);
  if (!cache) {
    cache = new Map();
    caches.set(timeZone, cache);
  }
  if (cache.size > 50_000) cache.clear();
  return cache;
}

/** The offset of a whole UTC day when it is the same at its start, every 6 hours and its end; else null. */
function steadyDayOffset(timeZone: string, dayStartMs: number): number | null {
  const first = rawOffsetMs(timeZone, dayStartMs);
  for (const at of [6, 12, 18].map((h) => dayStartMs + h * 3_600_000).concat(dayStartMs + DAY_BUCKET_MS - 1))
    if (rawOffsetMs(timeZone, at) !== first) return null;
  return first;
}

/**
 * Offset of the zone at an instant. Intl is slow, so offsets are cached: per UTC day when the
 * offset is the same at the day's start, every 6 hours and its end (no zone changes its offset
 * and back within 6 hours; a loan's instants spread over years, so a quarter-hour cache alone
 * missed nearly every one), else per 15-minute bucket when it is the same at both ends of the
 * bucket (zone transitions fall on quarter hours); otherwise the instant is asked directly.
 * Exact either way.
 */
function zoneOffsetMs(timeZone: string, utcMs: number): number {
  const days = cacheOf(dayOffsetCache, timeZone);
  const day = Math.floor(utcMs / DAY_BUCKET_MS);
  const dayHit = days.get(day); // NaN: a day with a transition, asked per quarter hour
  if (dayHit !== undefined && !Number.isNaN(dayHit)) return dayHit;
  const cache = cacheOf(offsetCache, timeZone);
  const bucket = Math.floor(utcMs / BUCKET_MS);
  const hit = cache.get(bucket);
  if (hit !== undefined) return hit;
  if (dayHit === undefined) {
    const dayOffset = steadyDayOffset(timeZone, day * DAY_BUCKET_MS);
    days.set(day, dayOffset ?? NaN);
    if (dayOffset !== null) return dayOffset;
  }
  const start = rawOffsetMs(timeZone, bucket * BUCKET_MS);
  const end = rawOffsetMs(timeZone, bucket * BUCKET_MS + BUCKET_MS - 1);
  if (start !== end) return rawOffsetMs(timeZone, utcMs);
  cache.set(bucket, start);
  return start;
}

/** The wall-clock time of an instant (epoch ms) in a zone. */
export function wallTimeAt(epochMs: number, timeZone: string): WallTime {
  const wall = new Date(epochMs + zoneOffsetMs(timeZone, epochMs));
  return {
    year: wall.getUTCFullYear(),
    month: wall.getUTCMonth() + 1,
    day: wall.getUTCDate(),
    hour: wall.getUTCHours(),
    minute: wall.getUTCMinutes(),
    second: wall.getUTCSeconds(),
  };
}

/**
 * The instant a wall-clock time happens in a zone. A time skipped by a DST change resolves past the
 * gap (02:30 on a spring-forward day is 03:30); a repeated time takes its first occurrence.
 * Day and month overflow roll over like Date.UTC (day 32 is the next month).
 */
export function zonedToUtc(
  t: Pick<WallTime, 'year' | 'month' | 'day'> & Partial<WallTime>,
  timeZone: string,
): number {
  const wall = Date.UTC(t.year, t.month - 1, t.day, t.hour ?? 0, t.minute ?? 0, t.second ?? 0);
  // The offsets in force a day either side cover any one transition near this time.
  const candidates = [
    ...new Set([wall - zoneOffsetMs(timeZone, wall - DAY_MS), wall - zoneOffsetMs(timeZone, wall + DAY_MS)]),
  ].sort((a, b) => a - b);
  const exact = candidates.filter((c) => c + zoneOffsetMs(timeZone, c) === wall);
  // Both exact: a repeated hour, take the first. None exact: a skipped hour, the later candidate is
  // the same wall time shifted past the gap.
  return exact[0] ?? (candidates[candidates.length - 1] as number);
}

/**
 * Wall-clock time of `text` in `timeZone`. A date-time with Z or an offset is an instant and is
 * converted; a date-only value or a date-time without offset is already a calendar value and is
 * taken as written (no zone shift). Null for text that is not ISO 8601 or names no real day.
 */
export function toWallTime(text: string, timeZone: string): WallTime | null {
  const m = ISO.exec(text.trim());
  if (!m) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = m[4] === undefined ? 0 : Number(m[4]);
  const minute = m[5] === undefined ? 0 : Number(m[5]);
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth(year, month) ||
    hour > 23 ||
    minute > 59 ||
    second > 60
  )
    return null;
  const offset = m[8];
  if (offset === undefined) return { year, month, day, hour, minute, second };
  let offsetMinutes = 0;
  if (offset !== 'Z' && offset !== 'z') {
    const sign = offset.startsWith('-') ? -1 : 1;
    const digits = offset.slice(1).replace(':', '');
    offsetMinutes = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0'));
  }
  const fraction = m[7] === undefined ? 0 : Number(`0.${m[7]}`) * 1000;
  const utcMs =
    Date.UTC(year, month - 1, day, hour, minute, Math.min(second, 59), Math.floor(fraction)) -
    offsetMinutes * 60_000;
  return wallTimeAt(utcMs, timeZone);
}

const TOKEN = /yyyy|yy|MM|M|dd|d|HH|H|mm|ss|'[^']*'/g;

/**
 * Why a date picture would print letters as they are, or null. Every letter outside single quotes
 * must be one of the picture's tokens: "yyyyDDD" would print "2025DDD", never a day of the year.
 */
export function pictureProblem(format: string): string | null {
  const rest = format.replace(TOKEN, '');
  const bad = /[A-Za-z]/.exec(rest);
  return bad
    ? `picture "${format}": "${bad[0]}" is not a picture letter (yyyy ` +
        `yy MM M dd d HH H mm ss; quote literal text, e.g. "yyyy'T'HH")`
    : null;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** Formats with a small picture language: yyyy yy MM M dd d HH H mm ss, 'quoted literal'. */
export function formatWallTime(t: WallTime, format: string): string {
  return format.replace(TOKEN, (tok) => {
    switch (tok) {
      case 'yyyy':
        return pad(t.year, 4);
      case 'yy':
        return pad(t.year % 100, 2);
      case 'MM':
        return pad(t.month, 2);
      case 'M':
        return String(t.month);
      case 'dd':
        return pad(t.day, 2);
      case 'd':
        return String(t.day);
      case 'HH':
        return pad(t.hour, 2);
      case 'H':
        return String(t.hour);
      case 'mm':
        return pad(t.minute, 2);
      case 'ss':
        return pad(t.second, 2);
      default:
        return tok.slice(1, -1);
    }
  });
}

/** A regular expression that accepts what `formatWallTime(…, format)` produces (output schema). */
export function formatPattern(format: string): RegExp {
  let src = '';
  let last = 0;
  for (const m of format.matchAll(TOKEN)) {
    src += escapeRe(format.slice(last, m.index));
    const tok = m[0];
    src += tok.startsWith("'")
      ? escapeRe(tok.slice(1, -1))
      : (
          {
            yyyy: '(?<y>\\d{4})',
            yy: '\\d{2}',
            MM: '(?<m>\\d{2})',
            M: '(?<m>\\d{1,2})',
            dd: '(?<d>\\d{2})',
            d: '(?<d>\\d{1,2})',
            HH: '\\d{2}',
            H: '\\d{1,2}',
            mm: '\\d{2}',
            ss: '\\d{2}',
          } as Record<string, string>
        )[tok];
    last = m.index + tok.length;
  }
  src += escapeRe(format.slice(last));
  return new RegExp(`^${src}$`);
}

/** Checks a formatted date: matches the picture and, when it has y/M/d, is a real calendar day. */
export function isFormattedDate(value: string, pattern: RegExp): boolean {
  const m = pattern.exec(value);
  if (!m) return false;
  const g = m.groups;
  if (g?.['y'] !== undefined && g['m'] !== undefined && g['d'] !== undefined) {
    const y = Number(g['y']);
    const mo = Number(g['m']);
    const d = Number(g['d']);
    return mo >= 1 && mo <= 12 && d >= 1 && d <= daysInMonth(y, mo);
  }
  return true;
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The calendar date (yyyy-MM-dd) of an instant in a time zone. */
export function localDate(epochMs: number, timeZone: string): string {
  return formatWallTime(wallTimeAt(epochMs, timeZone), 'yyyy-MM-dd');
}

/** "2026-11-21 06:33:36 CST" style rendering of an instant, for people reading a report. */
export function localDateTime(epochMs: number, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', { timeZone, timeZoneName: 'short' }).formatToParts(
    new Date(epochMs),
  );
  const zoneName = parts.find((p) => p.type === 'timeZoneName')?.value ?? timeZone;
  return `${formatWallTime(wallTimeAt(epochMs, timeZone), 'yyyy-MM-dd HH:mm:ss')} ${zoneName}`;
}

/**
 * An instant as ISO 8601 with the zone's offset at that instant, milliseconds kept:
 * "2026-11-21T06:33:36.120-06:00" (what `--json` prints: the bank's wall time, still one instant).
 */
export function isoWithOffset(epochMs: number, timeZone: string): string {
  const offsetMs = zoneOffsetMs(timeZone, epochMs);
  const wall = new Date(epochMs + offsetMs).toISOString().slice(0, -1);
  const minutes = Math.round(Math.abs(offsetMs) / 60_000);
  const sign = offsetMs < 0 ? '-' : '+';
  const hh = String(Math.floor(minutes / 60)).padStart(2, '0');
  const mm = String(minutes % 60).padStart(2, '0');
  return `${wall}${sign}${hh}:${mm}`;
}

/**
 * Normalizes a platform or core date for comparison with the rule the mapping derives core dates
 * by: an instant becomes its calendar date in the bank's zone, a value without offset is taken as
 * written (Date.parse would read it in the process's own zone). Unparseable text is returned
 * trimmed, so it still compares (and shows) as is.
 */
export function comparableDate(value: string, timeZone: string): string {
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
  return Math.floor(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) / DAY_MS);
}

/**
 * Weekdays (Mon–Fri) after `from` up to and including `to`; 0 when to ≤ from. No holiday calendar:
 * simple, predictable, and conservative (a holiday makes an item look one day older, never younger).
 */
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
