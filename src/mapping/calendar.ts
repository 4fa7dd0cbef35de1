import { HelperIssue, describe } from './issue.js';

/**
 * Core dates derived from platform date-times in the bank's time zone. Never `new Date(dateOnly)`:
 * that parses as UTC midnight and shows the previous day west of Greenwich.
 */

export interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?\s*([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

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

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * Wall-clock time of `text` in `timeZone`. A date-time with Z or an offset is an instant and is
 * converted; a date-only value or a date-time without offset is already a calendar value and is
 * taken as written (no zone shift).
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
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 60) return null;
  const offset = m[8];
  if (offset === undefined) return { year, month, day, hour, minute, second };
  let offsetMinutes = 0;
  if (offset !== 'Z' && offset !== 'z') {
    const sign = offset.startsWith('-') ? -1 : 1;
    const digits = offset.slice(1).replace(':', '');
    offsetMinutes = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0'));
  }
  const fraction = m[7] === undefined ? 0 : Number(`0.${m[7]}`) * 1000;
  const utcMs = Date.UTC(year, month - 1, day, hour, minute, Math.min(second, 59), Math.floor(fraction)) - offsetMinutes * 60_000;
  const wall = new Date(utcMs + zoneOffsetMs(timeZone, utcMs));
  return {
    year: wall.getUTCFullYear(),
    month: wall.getUTCMonth() + 1,
    day: wall.getUTCDate(),
    hour: wall.getUTCHours(),
    minute: wall.getUTCMinutes(),
    second: wall.getUTCSeconds(),
  };
}

/** The zone's UTC offset at an instant, from Intl (whole seconds: historical offsets have them). */
function rawOffsetMs(timeZone: string, utcMs: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatterFor(timeZone).formatToParts(new Date(utcMs))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  const asUtc = Date.UTC(parts['year'] ?? 1970, (parts['month'] ?? 1) - 1, parts['day'] ?? 1, parts['hour'] ?? 0, parts['minute'] ?? 0, parts['second'] ?? 0);
  return asUtc - (utcMs - (((utcMs % 1000) + 1000) % 1000));
}

const BUCKET_MS = 15 * 60_000;
const offsetCache = new Map<string, Map<number, number>>();

/**
 * Offset of the zone at an instant. Intl is slow, so offsets are cached per 15-minute bucket when
 * the offset is the same at both ends of the bucket (zone transitions fall on quarter hours);
 * otherwise the instant is asked directly. Exact either way.
 */
function zoneOffsetMs(timeZone: string, utcMs: number): number {
  let cache = offsetCache.get(timeZone);
  if (!cache) {
    cache = new Map();
    offsetCache.set(timeZone, cache);
  }
  const bucket = Math.floor(utcMs / BUCKET_MS);
  const hit = cache.get(bucket);
  if (hit !== undefined) return hit;
  const start = rawOffsetMs(timeZone, bucket * BUCKET_MS);
  const end = rawOffsetMs(timeZone, bucket * BUCKET_MS + BUCKET_MS - 1);
  if (start !== end) return rawOffsetMs(timeZone, utcMs);
  if (cache.size > 50_000) cache.clear();
  cache.set(bucket, start);
  return start;
}

const TOKEN = /yyyy|yy|MM|M|dd|d|HH|H|mm|ss|'[^']*'/g;

/**
 * Why a date picture would print letters as they are, or null. Every letter outside single quotes
 * must be one of the picture's tokens: "yyyyDDD" would print "2025DDD", never a day of the year.
 */
export function pictureProblem(format: string): string | null {
  const rest = format.replace(TOKEN, '');
  const bad = /[A-Za-z]/.exec(rest);
  return bad ? `picture "${format}": "${bad[0]}" is not a picture letter (yyyy yy MM M dd d HH H mm ss; quote literal text, e.g. "yyyy'T'HH")` : null;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** Formats with a small picture language: yyyy yy MM M dd d HH H mm ss, 'quoted literal'. */
export function formatWallTime(t: WallTime, format: string): string {
  return format.replace(TOKEN, (tok) => {
    switch (tok) {
      case 'yyyy': return pad(t.year, 4);
      case 'yy': return pad(t.year % 100, 2);
      case 'MM': return pad(t.month, 2);
      case 'M': return String(t.month);
      case 'dd': return pad(t.day, 2);
      case 'd': return String(t.day);
      case 'HH': return pad(t.hour, 2);
      case 'H': return String(t.hour);
      case 'mm': return pad(t.minute, 2);
      case 'ss': return pad(t.second, 2);
      default: return tok.slice(1, -1);
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
    src += tok.startsWith("'") ? escapeRe(tok.slice(1, -1)) : ({ yyyy: '(?<y>\\d{4})', yy: '\\d{2}', MM: '(?<m>\\d{2})', M: '(?<m>\\d{1,2})', dd: '(?<d>\\d{2})', d: '(?<d>\\d{1,2})', HH: '\\d{2}', H: '\\d{1,2}', mm: '\\d{2}', ss: '\\d{2}' } as Record<string, string>)[tok];
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

/** `$date(ts[, format])`: nothing in, nothing out (optional dates stay optional). */
export function bankDate(value: unknown, format: unknown, timeZone: string): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new HelperIssue('mapping', `expected an ISO 8601 date-time, got ${describe(value)}`, 0);
  const picture = format === undefined || format === null ? 'yyyy-MM-dd' : format;
  if (typeof picture !== 'string') throw new HelperIssue('mapping', `date format must be a string, got ${describe(format)}`, 1);
  const bad = pictureProblem(picture);
  if (bad) throw new HelperIssue('mapping', bad, 1);
  const t = toWallTime(value, timeZone);
  if (!t) throw new HelperIssue('mapping', `expected an ISO 8601 date-time, got ${describe(value)}`, 0);
  return formatWallTime(t, picture);
}
