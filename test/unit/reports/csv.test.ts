import { readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createCsvExceptionWriter, csvCell, csvRow } from '../../../src/reports/csv.js';
import type { ReportException } from '../../../src/reports/types.js';

describe('Excel-safe CSV cells', () => {
  it('neutralises formula injection in text cells', () => {
    expect(csvCell('=HYPERLINK("http://x","y")')).toBe(`"'=HYPERLINK(""http://x"",""y"")"`);
    expect(csvCell('+1+1')).toBe("'+1+1");
    expect(csvCell('-2+3')).toBe("'-2+3");
    expect(csvCell('@SUM(A1)')).toBe("'@SUM(A1)");
    expect(csvCell('\tcmd')).toBe(`'\tcmd`);
  });

  it('leaves plain numbers (negative included) and ordinary text alone', () => {
    expect(csvCell('-12.50')).toBe('-12.50');
    expect(csvCell(-3)).toBe('-3');
    expect(csvCell('LN-1001')).toBe('LN-1001');
    expect(csvCell(null)).toBe('');
  });

  it('quotes commas, quotes and line breaks; ends rows with CRLF', () => {
    expect(csvRow(['a,b', 'say "hi"', 'two\nlines'])).toBe('"a,b","say ""hi""","two\nlines"\r\n');
  });

  it('streams a file with a UTF-8 BOM and a header row', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'csv-')), 'r.csv');
    const w = createCsvExceptionWriter(path, 'rec-1');
    const e: ReportException = {
      reason: 'quarantined',
      loanId: 'loan_1',
      loanNumber: '=cmd|calc',
      field: null,
      platformValue: null,
      coreValue: null,
      connectorState: 'quarantined',
      centsAmount: 123456,
      since: '2026-11-20T10:00:00.000Z',
      ageBusinessDays: 1,
      ageBucket: '0-1',
      detail: 'Quarantined (tin_incomplete: only last 4 digits)',
    };
    await w.write(e);
    await w.close();
    const text = readFileSync(path, 'utf8');
    expect(text.startsWith('\uFEFFrun_id,reason,loan_id')).toBe(true);
    const lines = text.slice(1).split('\r\n');
    expect(lines).toHaveLength(3); // header, row, trailing empty
    expect(lines[1]).toBe(
      "rec-1,quarantined,loan_1,'=cmd|calc,,,,quarantined,1234.56,2026-11-20T10:00:00.000Z,1,0-1,Quarantined (tin_incomplete: only last 4 digits),",
    ); // review_items empty
  });
});
