import { describe, expect, it } from 'vitest';
import {
  CsvError,
  csvField,
  csvRecord,
  neutraliseControls,
  parseCsv,
  parseCsvLine,
  spreadsheetField,
} from '../../../src/lib/csv.js';
import { exceptionCsvRow } from '../../../src/reports/csv.js';

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
    expect(parseCsvLine('80000001|12-3456789|"Acme | Co"', '|')).toEqual([
      '80000001',
      '12-3456789',
      'Acme | Co',
    ]);
    expect(parseCsvLine('a,,', ',')).toEqual(['a', '', '']);
    expect(parseCsvLine('"open,b', ',')).toBe('a quoted cell is not closed');
    expect(parseCsvLine('"a\nb"', ',')).toBe('a line break inside the line');
  });
});

describe('control characters in CSV exports (regression: raw ESC and BEL reached report.csv and the audit CSV)', () => {
  const controls = '\u001b[31mred\u0007 nul\u0000 del\u007f c1\u0085\u009b end';

  it('every field neutralises C0 (but TAB, LF, CR), DEL and C1: visible pictures, U+FFFD for C1', () => {
    expect(neutraliseControls(controls)).toBe('\u241b[31mred\u2407 nul\u2400 del\u2421 c1\ufffd\ufffd end');
    expect(neutraliseControls('a\tb\nc\r\nd')).toBe('a\tb\nc\r\nd');
    // eslint-disable-next-line no-control-regex
    expect(csvField(controls)).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/);
    expect(csvRecord(['id', controls])).toBe(`id,${neutraliseControls(controls)}`);
    // A quoted line break stays a line break inside the cell.
    expect(csvField('one\ntwo')).toBe('"one\ntwo"');
  });

  it('spreadsheet fields also defuse formulas, after the controls are gone', () => {
    expect(spreadsheetField('=HYPERLINK("x")\u0007')).toBe('"\'=HYPERLINK(""x"")\u2407"');
    expect(spreadsheetField('-12.50')).toBe('-12.50');
    expect(spreadsheetField(42)).toBe('42');
    expect(spreadsheetField(null)).toBe('');
  });

  it('the report CSV row goes through it', () => {
    const row = exceptionCsvRow('rec-1', {
      reason: 'quarantined',
      loanId: 'ln_\u001b]0;x\u0007',
      loanNumber: null,
      field: null,
      platformValue: null,
      coreValue: null,
      connectorState: 'quarantined',
      centsAmount: null,
      since: null,
      ageBusinessDays: null,
      ageBucket: null,
      detail: 'name \u001b[2J',
    } as unknown as Parameters<typeof exceptionCsvRow>[1]);
    // eslint-disable-next-line no-control-regex
    expect(row).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/);
    expect(row).toContain('ln_\u241b]0;x\u2407');
  });
});
