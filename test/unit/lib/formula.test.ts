import { describe, expect, it } from 'vitest';
import { neutraliseFormula } from '../../../src/lib/formula.js';

describe('formula injection', () => {
  it('prefixes what a spreadsheet would run, and leaves plain numbers and text alone', () => {
    expect(["=cmd|' /C calc'!A0", '+1+1', '-1+2', '@SUM(A1)', '\tx', '\rx'].map(neutraliseFormula)).toEqual([
      "'=cmd|' /C calc'!A0",
      "'+1+1",
      "'-1+2",
      "'@SUM(A1)",
      "'\tx",
      "'\rx",
    ]);
    expect(['-12.50', '-5', '100', 'Acme LLC', ''].map(neutraliseFormula)).toEqual([
      '-12.50',
      '-5',
      '100',
      'Acme LLC',
      '',
    ]);
  });
});
