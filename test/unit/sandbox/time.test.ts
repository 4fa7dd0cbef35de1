import { describe, expect, it } from 'vitest';
import { formatWithOffset, parseStrictDateTime } from '../../../src/sandbox/time.js';

describe('parseStrictDateTime', () => {
  it.each([
    '2025-01-31T10:00:00Z',
    '2024-02-29T23:59:59.999+14:00',
    '2025-06-01T00:00-05:30',
    '2025-12-31T23:59:59.123456789Z',
  ])('accepts %s', (v) => {
    expect(parseStrictDateTime(v)).not.toBeNull();
  });
  it.each([
    '2025-02-29T10:00:00Z',
    '2025-04-31T10:00:00Z',
    '2025-01-01',
    '2025-01-01T10:00:00',
    '2025-01-01T24:00:00Z',
    '2025-01-01T10:60:00Z',
    '2025-01-01T10:00:00+15:00',
    '2025-13-01T00:00:00Z',
    'yesterday',
    '2025-1-1T00:00:00Z',
  ])('refuses %s', (v) => {
    expect(parseStrictDateTime(v)).toBeNull();
  });
  it('keeps the instant when rendering with an offset', () => {
    const ms = Date.UTC(2025, 0, 1, 3, 30);
    const s = formatWithOffset(ms, -300);
    expect(s).toBe('2024-12-31T22:30:00-05:00');
    expect(parseStrictDateTime(s)).toBe(ms);
    expect(formatWithOffset(ms, 330)).toBe('2025-01-01T09:00:00+05:30');
  });
});
