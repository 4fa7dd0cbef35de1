import { describe, expect, it } from 'vitest';
import { mambuDateTime } from '../../../src/core/mambu/dates.js';

describe('mambuDateTime: a day as Mambu types it (date-time with the tenant offset of that day)', () => {
  it('writes the day at midnight with the offset in force then, DST-correct', () => {
    expect(mambuDateTime('2025-08-19', 'America/Chicago')).toBe('2025-08-19T00:00:00-05:00');
    expect(mambuDateTime('2025-01-15', 'America/Chicago')).toBe('2025-01-15T00:00:00-06:00');
    // The spring-forward day: midnight is still standard time; the next day is daylight time.
    expect(mambuDateTime('2025-03-09', 'America/Chicago')).toBe('2025-03-09T00:00:00-06:00');
    expect(mambuDateTime('2025-03-10', 'America/Chicago')).toBe('2025-03-10T00:00:00-05:00');
    // The fall-back day: midnight is still daylight time.
    expect(mambuDateTime('2025-11-02', 'America/Chicago')).toBe('2025-11-02T00:00:00-05:00');
    expect(mambuDateTime('2025-11-03', 'America/Chicago')).toBe('2025-11-03T00:00:00-06:00');
    expect(mambuDateTime('2025-07-01', 'Europe/Berlin')).toBe('2025-07-01T00:00:00+02:00');
    expect(mambuDateTime('2025-07-01', 'Asia/Kolkata')).toBe('2025-07-01T00:00:00+05:30');
    expect(mambuDateTime('2025-07-01', 'UTC')).toBe('2025-07-01T00:00:00+00:00');
  });

  it('starts a day whose midnight does not exist at its first wall time (Santiago, DST at 00:00)', () => {
    // 2024-09-08 00:00 in America/Santiago is skipped: the day starts at 01:00 -03:00.
    expect(mambuDateTime('2024-09-08', 'America/Santiago')).toBe('2024-09-08T01:00:00-03:00');
  });

  it('keeps a date-time with offset, refuses what names no instant or no real day', () => {
    expect(mambuDateTime('2025-08-19T00:00:00-05:00', 'America/Chicago')).toBe('2025-08-19T00:00:00-05:00');
    expect(mambuDateTime('2025-08-19T00:00:00', 'America/Chicago')).toBeNull();
    expect(mambuDateTime('2025-02-30', 'America/Chicago')).toBeNull();
    expect(mambuDateTime('19/08/2025', 'America/Chicago')).toBeNull();
  });
});
