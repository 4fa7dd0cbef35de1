import { isoWithOffset, localDateTime } from '../lib/calendar.js';

/**
 * Times the CLI prints, in the bank's zone (bank.timeZone), as the console and the report show them
 * (design: "times shown to people are in the bank's zone, with its abbreviation; JSON keeps ISO 8601
 * with an offset"). ops/ hands over instants as ISO text in UTC (the console formats them itself);
 * the renderers here turn them into "2026-11-21 06:33:36 CST" for text and
 * "2026-11-21T06:33:36.000-06:00" for --json. One formatter for both: src/lib/calendar.ts.
 */

/** An ISO 8601 instant: a date, a time and a zone (Z or an offset). A date alone is not an instant. */
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;

function instantOf(text: string): number | null {
  if (!INSTANT.test(text)) return null;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : ms;
}

/** An instant (epoch ms or ISO text) for people: the bank's wall time and zone abbreviation; '-' for none. */
export function shownTime(at: number | string | null | undefined, timeZone: string): string {
  if (at === null || at === undefined || at === '') return '-';
  const ms = typeof at === 'number' ? at : instantOf(at);
  return ms === null ? String(at) : localDateTime(ms, timeZone);
}

/** Every ISO instant in a JSON value, anywhere in it, rewritten by `render` (other values as they are). */
function mapInstants(value: unknown, render: (ms: number) => string): unknown {
  if (typeof value === 'string') {
    const ms = instantOf(value);
    return ms === null ? value : render(ms);
  }
  if (Array.isArray(value)) return value.map((v) => mapInstants(v, render));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mapInstants(v, render)]));
  return value;
}

/** A value for --json: every instant as ISO 8601 with the bank zone's offset (the same instant). */
export function zonedJson<T>(value: T, timeZone: string): T {
  return mapInstants(value, (ms) => isoWithOffset(ms, timeZone)) as T;
}

/** A value for a text renderer that prints its strings as they are: every instant as shownTime does. */
export function zonedForText<T>(value: T, timeZone: string): T {
  return mapInstants(value, (ms) => localDateTime(ms, timeZone)) as T;
}
