import { describe, expect, it } from 'vitest';
import { hasFullTin, last4, tin, tinType } from '../../../src/mapping/tin.js';

describe('TIN helpers', () => {
  const full = { id: 'biz_1', ein: '12-3456789', einLast4: '6789' };
  const masked = { id: 'per_1', ssnLast4: '4321' };

  it('returns the full number when the key may read it', () => {
    expect(tin(full, undefined, false)).toBe('123456789');
    expect(tin(full, 'dashed', false)).toBe('12-3456789');
    expect(tin({ ssn: '123-45-6789' }, 'dashed', false)).toBe('123-45-6789');
    expect(hasFullTin(full)).toBe(true);
    expect(tinType(full)).toBe('EIN');
    expect(tinType(masked)).toBe('SSN');
    expect(last4(full)).toBe('6789');
  });

  it('raises tin_incomplete with only the last 4, unless allowed', () => {
    expect(() => tin(masked, undefined, false)).toThrow(expect.objectContaining({ code: 'tin_incomplete' }));
    expect(tin(masked, undefined, true)).toBe('*****4321');
    expect(hasFullTin(masked)).toBe(false);
    expect(last4(masked)).toBe('4321');
    expect(() => tin({ id: 'x' }, undefined, true)).toThrow(
      expect.objectContaining({ code: 'tin_incomplete' }),
    );
    expect(() => tin({ ein: '12-34' }, undefined, false)).toThrow(/not 9 digits/);
  });
});
