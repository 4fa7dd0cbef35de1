import { describe, expect, it } from 'vitest';
import { batchDay, cutoffRule, nextCutoff } from '../../../src/core/file/cutoff.js';

const iso = (ms: number): string => new Date(ms).toISOString();

describe('batch cut-off', () => {
  const chicago = cutoffRule({ cutoff: '18:00', timeZone: 'America/Chicago' });

  it('is the next 18:00 in the bank zone, across the DST change', () => {
    expect(iso(nextCutoff(Date.parse('2025-03-08T22:59:00Z'), chicago))).toBe('2025-03-09T00:00:00.000Z'); // 18:00 CST
    expect(iso(nextCutoff(Date.parse('2025-03-09T00:00:00Z'), chicago))).toBe('2025-03-09T23:00:00.000Z'); // 18:00 CDT
    expect(iso(nextCutoff(Date.parse('2025-11-02T12:00:00Z'), chicago))).toBe('2025-11-03T00:00:00.000Z'); // back to CST
  });

  it('names a batch after the bank day its cut-off ends (a midnight cut-off names the day before)', () => {
    const midnight = cutoffRule({ cutoff: '00:00', timeZone: 'America/Chicago' });
    const c = nextCutoff(Date.parse('2025-03-14T15:00:00Z'), midnight);
    expect(iso(c)).toBe('2025-03-15T05:00:00.000Z');
    expect(batchDay(c, 'America/Chicago')).toBe('2025-03-14');
  });

  it('an interval cuts on fixed instants; a bad time of day is refused with the value', () => {
    const hourly = cutoffRule({ cutoff: '18:00', intervalMinutes: 60, timeZone: 'UTC' });
    expect(iso(nextCutoff(Date.parse('2025-03-14T10:15:00Z'), hourly))).toBe('2025-03-14T11:00:00.000Z');
    expect(iso(nextCutoff(Date.parse('2025-03-14T11:00:00Z'), hourly))).toBe('2025-03-14T12:00:00.000Z');
    expect(() => cutoffRule({ cutoff: '25:00', timeZone: 'UTC' })).toThrow(/cut-off "25:00": expected HH:MM/);
  });
});
