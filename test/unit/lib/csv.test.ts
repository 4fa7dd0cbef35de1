import { describe, expect, it } from 'vitest';
import { CsvError, parseCsv, parseCsvLine } from '../../../src/lib/csv.js';

/** The one CSV reader: mapping lookups (whole files) and the customer extract (line by line). */
describe('parseCsv', () => {
  it('reads RFC 4180: quoted delimiters, doubled quotes, line breaks in quotes, CRLF, a BOM, empty lines skipped', () => {
    const rows = parseCsv('\uFEFFa,b\r\n"x, y","say ""hi"""\n\n"multi\nline",0012\n');
    expect(rows).toEqual([
      { line: 1, cells: ['a', 'b'] },
      { line: 2, cells: ['x, y', 'say "hi"'] },
      { line: 4, cells: ['multi\nline', '0012'] },
    ]);
  });

  it('takes another delimiter', () => {
    expect(parseCsv('a;"b;c";d\n', { delimiter: ';' })).toEqual([{ line: 1, cells: ['a', 'b;c', 'd'] }]);
    expect(() => parseCsv('a', { delimiter: '"' })).toThrow(CsvError);
  });

  it.each([
    ['a,b\nc,"open', 'a quoted cell is not closed', 2],
    ['a,"b"x', 'unexpected "x" after a closing quote', 1],
    ['a\nb"c,d', 'a quote inside an unquoted cell', 2],
  ])('%j is refused with its line', (text, message, line) => {
    try {
      parseCsv(text);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(CsvError);
      expect((err as CsvError).message).toContain(message);
      expect((err as CsvError).line).toBe(line);
    }
  });
});

describe('parseCsvLine', () => {
  it('splits one line, or says what is wrong, and never reads past the line', () => {
    expect(parseCsvLine('80000001|12-3456789|"Acme | Co"', '|')).toEqual(['80000001', '12-3456789', 'Acme | Co']);
    expect(parseCsvLine('a,,', ',')).toEqual(['a', '', '']);
    expect(parseCsvLine('"open,b', ',')).toBe('a quoted cell is not closed');
    expect(parseCsvLine('"a\nb"', ',')).toBe('a line break inside the line');
  });
});
