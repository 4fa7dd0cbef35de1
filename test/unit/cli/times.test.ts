import { describe, expect, it } from 'vitest';
import { isoWithOffset } from '../../../src/lib/calendar.js';
import { shownTime, zonedForText, zonedJson } from '../../../src/cli/times.js';

describe('CLI times in the bank zone', () => {
  it('isoWithOffset keeps the instant and carries the zone offset of that instant (DST, half hours, east and west)', () => {
    const winter = Date.parse('2026-01-15T12:00:00.120Z');
    const summer = Date.parse('2026-07-15T12:00:00Z');
    expect(isoWithOffset(winter, 'America/Chicago')).toBe('2026-01-15T06:00:00.120-06:00');
    expect(isoWithOffset(summer, 'America/Chicago')).toBe('2026-07-15T07:00:00.000-05:00');
    expect(isoWithOffset(winter, 'Asia/Kolkata')).toBe('2026-01-15T17:30:00.120+05:30');
    expect(isoWithOffset(winter, 'UTC')).toBe('2026-01-15T12:00:00.120+00:00');
    // Across midnight: the bank's date, not UTC's.
    expect(isoWithOffset(Date.parse('2026-01-16T03:00:00Z'), 'America/Chicago')).toBe(
      '2026-01-15T21:00:00.000-06:00',
    );
    for (const zone of ['America/Chicago', 'Asia/Kolkata', 'Pacific/Chatham', 'UTC'])
      expect(Date.parse(isoWithOffset(winter, zone))).toBe(winter);
  });

  it('rewrites every instant of a JSON value, and nothing else (dates, ids, numbers stay)', () => {
    const value = {
      at: '2026-01-15T12:00:00.000Z',
      day: '2026-01-15',
      id: 'ln_2026-01-15T12:00:00Z_x',
      n: 3,
      nested: [{ until: '2026-07-15T12:00:00Z' }, null],
    };
    expect(zonedJson(value, 'America/Chicago')).toEqual({
      at: '2026-01-15T06:00:00.000-06:00',
      day: '2026-01-15',
      id: 'ln_2026-01-15T12:00:00Z_x',
      n: 3,
      nested: [{ until: '2026-07-15T07:00:00.000-05:00' }, null],
    });
    expect(zonedForText(value, 'America/Chicago').nested[0]).toEqual({ until: '2026-07-15 07:00:00 CDT' });
    expect(shownTime(null, 'America/Chicago')).toBe('-');
    expect(shownTime('not a time', 'America/Chicago')).toBe('not a time');
    expect(shownTime(Date.parse('2026-01-15T12:00:00Z'), 'America/Chicago')).toBe('2026-01-15 06:00:00 CST');
  });
});
