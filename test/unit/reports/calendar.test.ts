import { describe, expect, it } from 'vitest';
import { ageBucket, businessDaysBetween, comparableDate, localDate } from '../../../src/reports/calendar.js';

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
