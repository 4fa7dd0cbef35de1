import { describe, expect, it } from 'vitest';
import {
  businessDaysBetween,
  comparableDate,
  localDate,
  localDateTime,
  zonedToUtc,
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
