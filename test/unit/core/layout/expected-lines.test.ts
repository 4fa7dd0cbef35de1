import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderExpectedLines } from '../../../../src/core/file/layout/expected-lines.js';
import { compileLayout } from '../../../../src/core/file/layout/layout.js';
import { fixtureTimeZone } from '../../../../src/mapping/fixtures.js';
import { cli } from '../../../support/mappings-cli.js';

const repo = join(import.meta.dirname, '../../../..');

describe('mappings test with expected file lines', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'layout-fixtures-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('the shipped generic fixtures match their expected CSV and fixed-width lines', async () => {
    const r = await cli([
      'mappings',
      'test',
      '--dir',
      join(repo, 'mappings/generic'),
      '--case',
      'business-monthly-fixed',
    ]);
    expect(r.error).toBeUndefined();
    expect(r.out).toMatch(/ok {3}\S+ business-monthly-fixed/);
  });

  it('a fixed-width line one byte off fails with the file, the line, the length and the first column that moved', async () => {
    const dir = join(tmp, 'generic');
    cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
    const file = join(dir, 'fixtures/business-monthly-fixed/expected-lines/LNLOAD.DAT');
    writeFileSync(file, readFileSync(file, 'latin1').replace('CRE300  ', 'CRE300 '), 'latin1');
    const r = await cli(['mappings', 'test', '--dir', dir, '--case', 'business-monthly-fixed']);
    expect(r.error).toBeDefined();
    expect(r.out).toMatch(
      /FAIL \S+ business-monthly-fixed\n\s+expected-lines\/LNLOAD\.DAT line 1: expected 119 byte\(s\), the layout writes 120\n/,
    );
    expect(r.out).toContain(
      'expected-lines/LNLOAD.DAT line 1, column PRODUCT: expected "CRE300 0", got "CRE300  "',
    );
  });
});

describe('mappings test --update and per-column mismatches (issue 24 point 8)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'layout-update-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  function editedSet(name: string, edit: (layout: string) => string): string {
    const dir = join(tmp, name);
    cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
    const layout = join(dir, 'layout.yaml');
    const before = readFileSync(layout, 'utf8');
    const after = edit(before);
    expect(after).not.toBe(before);
    writeFileSync(layout, after);
    return dir;
  }

  it('an edited CSV and fixed-width layout fails naming the column; --update rewrites expected-lines; then the test passes', async () => {
    // CSV: the principal gets 3 decimals. Fixed width: the rate gets 5 implied decimals (same width).
    const dir = editedSet('edited', (y) =>
      y
        .replace(
          '{ name: principal, field: principal, decimals: 2, neutralise: false }',
          '{ name: principal, field: principal, decimals: 3, neutralise: false }',
        )
        .replace(
          '{ name: RATE, start: 96, length: 7, field: interestRate, decimals: 4,',
          '{ name: RATE, start: 96, length: 7, field: interestRate, decimals: 5,',
        ),
    );
    const caseDir = join(dir, 'fixtures/business-monthly-fixed');
    const expectedJsonBefore = readFileSync(join(caseDir, 'expected.json'), 'utf8');
    const failed = await cli(['mappings', 'test', '--dir', dir, '--case', 'business-monthly-fixed']);
    expect(failed.error).toBeDefined();
    expect(failed.out).toContain(
      'expected-lines/loan.csv line 1, column principal: expected "1250000.50", got "1250000.500"',
    );
    expect(failed.out).toContain(
      'expected-lines/LNLOAD.DAT line 1, column RATE: expected "0072500", got "0725000"',
    );
    // Only the columns that differ, not the whole line.
    expect(failed.out).not.toMatch(/expected "A,loan_0001,/);
    expect(failed.out).not.toMatch(/column (loan_number|LOAN_NUMBER)/);

    const updated = await cli([
      'mappings',
      'test',
      '--dir',
      dir,
      '--case',
      'business-monthly-fixed',
      '--update',
    ]);
    expect(updated.out).toMatch(
      /FAIL \S+ business-monthly-fixed \(updated: expected\.json, expected-lines\/LNLOAD\.DAT, expected-lines\/customer\.csv, expected-lines\/loan\.csv\)/,
    );
    expect(readFileSync(join(caseDir, 'expected-lines/loan.csv'), 'utf8')).toContain(',1250000.500,');
    const fixed = readFileSync(join(caseDir, 'expected-lines/LNLOAD.DAT'), 'latin1');
    expect(fixed.slice(95, 102)).toBe('0725000');
    expect(fixed.endsWith('\r\n')).toBe(true);
    expect(fixed.length).toBe(122);
    // The records did not change: expected.json is written with the same content.
    expect(readFileSync(join(caseDir, 'expected.json'), 'utf8')).toBe(expectedJsonBefore);

    const passed = await cli(['mappings', 'test', '--dir', dir, '--case', 'business-monthly-fixed']);
    expect(passed.error).toBeUndefined();
    expect(passed.out).toMatch(/ok {3}\S+ business-monthly-fixed/);
  });

  it('a column added to a CSV layout says how many columns each side has and names the new one', async () => {
    const dir = editedSet('added', (y) =>
      y.replace(
        '      - { name: borrower_cif, field: borrowerCif }',
        '      - { name: borrower_cif, field: borrowerCif }\n      - { name: extra_flag, value: "Y" }',
      ),
    );
    const r = await cli(['mappings', 'test', '--dir', dir, '--case', 'business-monthly-fixed']);
    expect(r.error).toBeDefined();
    expect(r.out).toContain('expected-lines/loan.csv line 1: expected 27 column(s), the layout writes 28');
    expect(r.out).toContain(
      'expected-lines/loan.csv line 1, column extra_flag: expected (no column), got "Y"',
    );
  });

  it('a line ending changed in the layout is reported as such', async () => {
    const dir = editedSet('eol', (y) =>
      y.replace('    encoding: latin1\n    lineEnding: crlf', '    encoding: latin1\n    lineEnding: lf'),
    );
    const r = await cli(['mappings', 'test', '--dir', dir, '--case', 'business-monthly-fixed']);
    expect(r.out).toContain('expected-lines/LNLOAD.DAT line 1: line ending: expected CRLF, got LF');
  });
});

describe("expected-lines are rendered in the case's time zone", () => {
  it("an instant's date follows the case's options.json timeZone (default America/Chicago), as its mapping ran", () => {
    const layout = compileLayout(`files:
  - name: d.csv
    record: loan
    format: csv
    headerRow: false
    columns:
      - { name: funded, field: fundedAt, dateFormat: yyyy-mm-dd }
`).layout!;
    const records = [{ type: 'loan', externalId: 'L', fields: { fundedAt: '2026-03-08T05:30:00Z' } }];
    const text = (timeZone: string) =>
      new TextDecoder().decode(renderExpectedLines(layout, 'L', records, 'd.csv', timeZone) as Uint8Array);
    expect(fixtureTimeZone({ options: undefined })).toBe('America/Chicago');
    expect(fixtureTimeZone({ options: { timeZone: 'Asia/Tokyo' } })).toBe('Asia/Tokyo');
    expect(text(fixtureTimeZone({ options: undefined }))).toBe('2026-03-07\n');
    expect(text(fixtureTimeZone({ options: { timeZone: 'Asia/Tokyo' } }))).toBe('2026-03-08\n');
  });
});
