import { describe, expect, it } from 'vitest';
import {
  businessDaysBetween,
  comparableDate,
  localDate,
  localDateTime,
  wallTimeAt,
  zonedToUtc,
  type WallTime,
} from '../../../src/lib/calendar.js';
import { ageBucket } from '../../../src/reports/compute.js';

describe('business-day ages', () => {
  it('counts weekdays after the start date up to the end date', () => {
    expect(businessDaysBetween('2026-11-20', '2026-11-20')).toBe(0); // Friday, same day
    expect(businessDaysBetween('2026-11-20', '2026-11-23')).toBe(1); // Friday → Monday
    expect(businessDaysBetween('2026-11-21', '2026-11-22')).toBe(0); // Saturday → Sunday
    expect(businessDaysBetween('2026-11-16', '2026-11-30')).toBe(10); // two weeks
    expect(businessDaysBetween('2026-11-30', '2026-11-16')).toBe(0); // end before start
  });

  it('buckets 0–1, 2–5, >5', () => {
    expect([0, 1, 2, 5, 6, 40].map(ageBucket)).toEqual(['0-1', '0-1', '2-5', '2-5', '>5', '>5']);
  });
});

describe('dates in the bank time zone', () => {
  it('derives the local calendar date of an instant', () => {
    // 03:00 UTC on the 14th is still the 13th in Chicago.
    expect(localDate(Date.parse('2025-03-14T03:00:00Z'), 'America/Chicago')).toBe('2025-03-13');
    expect(localDate(Date.parse('2025-03-14T03:00:00Z'), 'UTC')).toBe('2025-03-14');
  });

  it('keeps date-only values as they are (never shifted by a zone)', () => {
    expect(comparableDate('2025-03-14', 'America/Chicago')).toBe('2025-03-14');
    expect(comparableDate('2025-03-14T05:00:00Z', 'America/Chicago')).toBe('2025-03-14');
    expect(comparableDate(' not a date ', 'UTC')).toBe('not a date');
    // regression: without an offset Date.parse used the process's zone; the mapping takes it as written
    expect(comparableDate('2025-03-14T00:30:00', 'America/Chicago')).toBe('2025-03-14');
    expect(comparableDate('2025-03-15T02:30:00Z', 'America/Chicago')).toBe('2025-03-14');
  });
});

describe('wall-clock times to instants', () => {
  it('finds the instant of a local time, across DST changes', () => {
    expect(zonedToUtc({ year: 2025, month: 3, day: 14, hour: 18, minute: 0 }, 'America/Chicago')).toBe(
      Date.parse('2025-03-14T23:00:00Z'),
    ); // CDT
    expect(zonedToUtc({ year: 2025, month: 1, day: 14, hour: 18, minute: 0 }, 'America/Chicago')).toBe(
      Date.parse('2025-01-15T00:00:00Z'),
    ); // CST
    // 02:30 does not exist on 2025-03-09 in Chicago: it resolves past the gap.
    expect(zonedToUtc({ year: 2025, month: 3, day: 9, hour: 2, minute: 30 }, 'America/Chicago')).toBe(
      Date.parse('2025-03-09T08:30:00Z'),
    );
    // Day overflow rolls into the next month.
    expect(zonedToUtc({ year: 2025, month: 1, day: 32 }, 'UTC')).toBe(Date.parse('2025-02-01T00:00:00Z'));
  });

  it('renders an instant for people with the zone abbreviation', () => {
    expect(localDateTime(Date.parse('2026-11-21T12:33:36Z'), 'America/Chicago')).toBe(
      '2026-11-21 06:33:36 CST',
    );
    expect(localDateTime(Date.parse('2026-07-01T00:00:00Z'), 'UTC')).toBe('2026-07-01 00:00:00 UTC');
  });
});

describe('wall-clock times around DST changes, east and west of UTC', () => {
  it('skipped times resolve past the gap; repeated times take the first occurrence', () => {
    expect(zonedToUtc({ year: 2025, month: 3, day: 30, hour: 2, minute: 30 }, 'Europe/Berlin')).toBe(
      Date.parse('2025-03-30T01:30:00Z'),
    ); // 03:30 CEST
    expect(zonedToUtc({ year: 2025, month: 10, day: 26, hour: 2, minute: 30 }, 'Europe/Berlin')).toBe(
      Date.parse('2025-10-26T00:30:00Z'),
    ); // first 02:30 (CEST)
    expect(zonedToUtc({ year: 2025, month: 11, day: 2, hour: 1, minute: 30 }, 'America/Chicago')).toBe(
      Date.parse('2025-11-02T06:30:00Z'),
    ); // first 01:30 (CDT)
  });
});

describe('the cached zone offsets', () => {
  /** The wall time Intl gives for an instant, asked directly (no cache). */
  function intlWall(ms: number, timeZone: string): WallTime {
    const parts: Record<string, number> = {};
    const f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    for (const p of f.formatToParts(new Date(ms))) if (p.type !== 'literal') parts[p.type] = Number(p.value);
    return {
      year: parts['year'] ?? 0,
      month: parts['month'] ?? 0,
      day: parts['day'] ?? 0,
      hour: parts['hour'] ?? 0,
      minute: parts['minute'] ?? 0,
      second: parts['second'] ?? 0,
    };
  }

  it('give Intl’s wall time at every quarter hour of transition days and at instants spread over two centuries', () => {
    // Half-hour and 45-minute offsets, a half-hour DST shift, a zone that skipped a whole day (Apia, 2011).
    const zones = [
      'America/New_York',
      'Australia/Lord_Howe',
      'Asia/Kathmandu',
      'Pacific/Apia',
      'America/St_Johns',
      'Europe/London',
    ];
    const days = [
      '2011-12-29',
      '2011-12-30',
      '2011-12-31',
      '2024-03-10',
      '2024-04-07',
      '2024-10-06',
      '2024-11-03',
      '1916-05-21',
    ];
    for (const timeZone of zones) {
      const instants: number[] = [];
      for (const d of days) {
        const start = Date.parse(`${d}T00:00:00Z`);
        for (let q = -8; q < 104; q++) instants.push(start + q * 15 * 60_000 + 7_000);
      }
      // A fixed spread over 1900–2100 (same instants every run), and each asked twice (the second from the cache).
      for (let i = 0; i < 400; i++)
        instants.push(Date.UTC(1900, 0, 1) + Math.floor(((i * 7919) % 400) * 15_778_800_000 + i * 3_601_013));
      for (const ms of [...instants, ...instants])
        expect(wallTimeAt(ms, timeZone), `${timeZone} ${new Date(ms).toISOString()}`).toEqual(
          intlWall(ms, timeZone),
        );
    }
  });
});
