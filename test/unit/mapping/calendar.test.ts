import { describe, expect, it } from 'vitest';
import { formatPattern, isFormattedDate } from '../../../src/lib/calendar.js';
import { bankDate } from '../../../src/mapping/helpers.js';

describe('$date in the bank time zone', () => {
  it('derives the calendar day in the bank zone, not UTC', () => {
    expect(bankDate('2025-03-14T03:30:00Z', undefined, 'America/Chicago')).toBe('2025-03-13');
    expect(bankDate('2025-03-14T03:30:00Z', undefined, 'UTC')).toBe('2025-03-14');
    expect(bankDate('2025-03-14T03:30:00Z', undefined, 'Asia/Tokyo')).toBe('2025-03-14');
    expect(bankDate('2025-03-13T23:30:00-05:00', undefined, 'Europe/Berlin')).toBe('2025-03-14');
  });

  it('crosses DST boundaries correctly', () => {
    // 2025-03-09 is the US spring-forward day: 07:59Z is 01:59 CST, 08:00Z is 03:00 CDT
    expect(bankDate('2025-03-09T07:59:00Z', 'yyyy-MM-dd HH:mm', 'America/Chicago')).toBe('2025-03-09 01:59');
    expect(bankDate('2025-03-09T08:00:00Z', 'yyyy-MM-dd HH:mm', 'America/Chicago')).toBe('2025-03-09 03:00');
    expect(bankDate('2025-11-02T05:30:00Z', 'yyyy-MM-dd HH:mm', 'America/Chicago')).toBe('2025-11-02 00:30');
  });

  it('takes date-only values and offset-less date-times as written (never new Date(dateOnly))', () => {
    expect(bankDate('2025-03-14', undefined, 'America/Chicago')).toBe('2025-03-14');
    expect(bankDate('2025-03-14T00:00:00', undefined, 'America/Los_Angeles')).toBe('2025-03-14');
  });

  it('formats with pictures', () => {
    expect(bankDate('2025-03-04T12:00:00Z', 'yyyyMMdd', 'UTC')).toBe('20250304');
    expect(bankDate('2025-03-04T12:00:00Z', 'M/d/yy', 'UTC')).toBe('3/4/25');
    expect(bankDate('2025-03-04T12:00:00Z', "dd 'of' MM", 'UTC')).toBe('04 of 03');
  });

  it('gives nothing for nothing and an issue for garbage', () => {
    expect(bankDate(undefined, undefined, 'UTC')).toBeUndefined();
    expect(bankDate(null, undefined, 'UTC')).toBeUndefined();
    expect(() => bankDate('2025-02-30T00:00:00Z', undefined, 'UTC')).toThrow(/ISO 8601/);
    expect(() => bankDate('yesterday', undefined, 'UTC')).toThrow(/ISO 8601/);
    expect(() => bankDate(20250314, undefined, 'UTC')).toThrow(/ISO 8601/);
  });

  it('validates formatted dates (output schema)', () => {
    const p = formatPattern('yyyy-MM-dd');
    expect(isFormattedDate('2024-02-29', p)).toBe(true);
    expect(isFormattedDate('2025-02-29', p)).toBe(false);
    expect(isFormattedDate('2025-2-28', p)).toBe(false);
  });
});

describe('$date agrees with Intl for any instant (property)', () => {
  it('matches a direct Intl conversion in several zones', async () => {
    const fc = (await import('fast-check')).default;
    const zones = [
      'America/Chicago',
      'America/St_Johns',
      'Asia/Kathmandu',
      'Australia/Lord_Howe',
      'Europe/London',
      'Pacific/Chatham',
      'UTC',
    ];
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2060, 0, 1) }),
        fc.constantFrom(...zones),
        (ms, tz) => {
          const iso = new Date(Math.floor(ms / 1000) * 1000).toISOString();
          const f = new Intl.DateTimeFormat('en-CA', {
            timeZone: tz,
            year: 'numeric',
            month: '2-digit',
            day: '2-digit',
            hour: '2-digit',
            minute: '2-digit',
            second: '2-digit',
            hourCycle: 'h23',
          });
          const p = Object.fromEntries(f.formatToParts(new Date(iso)).map((x) => [x.type, x.value]));
          expect(bankDate(iso, 'yyyy-MM-dd HH:mm:ss', tz)).toBe(
            `${p['year']}-${p['month']}-${p['day']} ${p['hour']}:${p['minute']}:${p['second']}`,
          );
        },
      ),
      { numRuns: 3000 },
    );
  });
});
