import { describe, expect, it } from 'vitest';
import { compileLayout } from '../../../../src/core/file/layout/layout.js';
import {
  encodeLine,
  renderRows,
  summaryLine,
  transliterate,
} from '../../../../src/core/file/layout/render.js';
import { lintMappingDir } from '../../../../src/mapping-sets/loader.js';
import { compileMapping, DEFAULT_MAPPER_OPTIONS } from '../../../../src/mapping/compile.js';
import { layoutCatalogue } from '../../../../src/mapping-sets/layout-catalogue.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const GENERIC = join(import.meta.dirname, '../../../../mappings/generic');
const mapping = compileMapping((rel) => {
  try {
    return readFileSync(join(GENERIC, rel), 'utf8');
  } catch {
    return undefined;
  }
}, DEFAULT_MAPPER_OPTIONS).mapping!;
const catalogue = layoutCatalogue(mapping);

const fixed = (columns: string, extra = '') => `files:
  - name: L.DAT
    record: loan
    format: fixed
    recordLength: 20${extra}
    columns:
${columns}`;

describe('layout lint', () => {
  it('the shipped generic set has a valid layout', () => {
    const r = lintMappingDir(GENERIC);
    expect(r.problems).toEqual([]);
    expect(r.layout?.files.map((f) => f.name)).toEqual([
      'customer.csv',
      'loan.csv',
      'relationship.csv',
      'crossref.csv',
      'document.csv',
      'LNLOAD.DAT',
    ]);
  });

  it('reports overlaps, gaps, unknown fields and a maxLength wider than the column with line:column', () => {
    const text = fixed(`      - { name: A, start: 1, length: 5, source: externalId }
      - { name: B, start: 4, length: 5, field: principal }
      - { name: C, start: 12, length: 5, field: nosuch }
      - { name: D, start: 17, length: 4, field: purpose }
`);
    const r = compileLayout(text, catalogue);
    const msgs = r.problems.map((p) => `${p.file}:${p.line}:${p.column} ${p.message}`);
    expect(msgs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^layout\.yaml:8:27 B: bytes 4-8 overlap the previous column \(which ends at 5\)/,
        ),
        expect.stringMatching(/^layout\.yaml:9:27 C: gap at bytes 9-11/),
        expect.stringMatching(/^layout\.yaml:9:9 C: loan has no field nosuch/),
        expect.stringMatching(
          /^layout\.yaml:10:39 D: field loan\.purpose has maxLength 100, wider than the column \(4 bytes\)/,
        ),
      ]),
    );
    expect(r.layout).toBeUndefined();
  });

  it('reports a record type the mapping does not produce, a gap at the end and unknown keys', () => {
    const r = compileLayout(
      `files:
  - name: X.DAT
    record: lone
    format: fixed
    recordLength: 10
    colour: red
    columns:
      - { name: A, start: 1, length: 5, value: "" }
`,
      catalogue,
    );
    const msgs = r.problems.map((p) => `${p.line}:${p.column} ${p.message}`);
    expect(msgs.some((m) => /^6:5 .*colour/.test(m))).toBe(true);
    const r2 = compileLayout(
      fixed(`      - { name: A, start: 1, length: 5, value: "" }\n`).replace('record: loan', 'record: lone'),
      catalogue,
    );
    const m2 = r2.problems.map((p) => `${p.line}:${p.column} ${p.message}`);
    expect(m2).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^3:13 record type lone is not produced by the mapping/),
        expect.stringMatching(/gap at bytes 6-20 before the end/),
      ]),
    );
  });

  it('refuses a file named like the batch control file', () => {
    const r = compileLayout(
      `files:\n  - name: CONTROL.csv\n    record: loan\n    format: csv\n    columns:\n      - { name: id, source: loanId }\n`,
      catalogue,
    );
    expect(r.problems.map((p) => `${p.line}:${p.column} ${p.message}`)).toEqual([
      expect.stringMatching(/^2:11 CONTROL\.csv is the batch's own control file/),
    ]);
  });
});

describe('the shipped layout', () => {
  it('takes every generic fixture that boards, in every file (legal data never quarantines: regression, 2^53 - 1 cents overflowed LNLOAD.DAT)', async () => {
    const { loadFixtures, loadMapper } = await import('../../../../src/mapping-sets/loader.js');
    const layout = lintMappingDir(GENERIC).layout!;
    let rendered = 0;
    for (const c of loadFixtures(GENERIC).cases) {
      const m = await loadMapper(GENERIC, { timeZone: 'America/Chicago', ...(c.options ?? {}) });
      const out = await m.map(c.input as never);
      if (!out.ok) continue;
      for (const f of layout.files) {
        for (const kind of ['new', 'correction'] as const)
          expect(
            () => renderRows(f, out.records, { loanId: 'x', timeZone: 'America/Chicago', kind }),
            `${c.name} ${f.name}`,
          ).not.toThrow();
      }
      rendered += 1;
    }
    expect(rendered).toBeGreaterThan(15);
  });
});

describe('layout rendering', () => {
  const layout = compileLayout(
    fixed(
      `      - { name: CODE, start: 1, length: 1, code: { new: A, correction: C } }
      - { name: NAME, start: 2, length: 12, field: name, transliterate: true }
      - { name: AMT, start: 14, length: 7, field: amount, decimals: 2, implied: true, align: right, pad: "0" }
`,
      '\n    encoding: ascii',
    ).replace('record: loan', 'record: r'),
  ).layout!;
  const f = layout.files[0]!;

  it('folds names to ASCII and strips control characters; every record is exactly recordLength bytes', () => {
    expect(transliterate('CAFÉ OLÉ Straße Æbelø Łódź')).toBe('CAFE OLE Strasse AEbelo Lodz');
    const r = renderRows(f, [{ type: 'r', externalId: 'x', fields: { name: 'Jörg\nßÆ', amount: '-1.5' } }], {
      loanId: 'l',
      timeZone: 'America/Chicago',
      kind: 'correction',
    });
    expect(r.lines).toEqual(['CJorg ssAE   -000150']);
    for (const l of r.lines) expect(encodeLine(f, l).length).toBe(21); // + LF
  });

  it('totals are exact beyond 2^53 (BigInt), never floats', () => {
    const recs = [
      { type: 'r', externalId: 'a', fields: { name: 'a', amount: '90071992547409.93' } },
      { type: 'r', externalId: 'b', fields: { name: 'b', amount: '0.01' } },
    ];
    const withTrailer = compileLayout(
      `files:
  - name: T.CSV
    record: r
    format: csv
    columns:
      - { name: amount, field: amount, decimals: 2 }
    trailer:
      - { name: TYPE, value: T }
      - { name: COUNT, count: records }
      - { name: TOTAL, total: amount, decimals: 2 }
      - { name: IMPLIED, total: amount, decimals: 2, implied: true }
`,
    ).layout!.files[0]!;
    const r = renderRows(withTrailer, recs, { loanId: 'l', timeZone: 'America/Chicago', kind: 'new' });
    const totals = new Map(Object.entries(r.amounts).map(([k, v]) => [k, BigInt(v)]));
    expect(
      summaryLine(withTrailer, 'trailer', {
        batchId: 'b',
        timeZone: 'America/Chicago',
        batchDate: '2025-03-14',
        records: 2,
        loans: 1,
        totals,
      }),
    ).toBe('T,2,90071992547409.94,9007199254740994');
  });

  it('refuses a value that would lose money digits or a character the encoding lacks', () => {
    expect(() =>
      renderRows(f, [{ type: 'r', externalId: 'x', fields: { name: 'a', amount: '1.005' } }], {
        loanId: 'l',
        timeZone: 'America/Chicago',
        kind: 'new',
      }),
    ).toThrow(/more than 2 decimal/);
    const strict = compileLayout(
      fixed(`      - { name: NAME, start: 1, length: 20, field: name }\n`, '\n    encoding: ascii').replace(
        'record: loan',
        'record: r',
      ),
    ).layout!.files[0]!;
    expect(() =>
      renderRows(strict, [{ type: 'r', externalId: 'x', fields: { name: 'CAFÉ' } }], {
        loanId: 'l',
        timeZone: 'America/Chicago',
        kind: 'new',
      }),
    ).toThrow(/"É" cannot be written in ascii \(set transliterate: true\)/);
  });

  it("writes an instant's date in the bank's time zone, never its UTC day (regression: 2026-03-08T05:30Z printed 2026-03-08 in Chicago)", () => {
    const dates = compileLayout(`files:
  - name: D.CSV
    record: r
    format: csv
    columns:
      - { name: iso, field: at, dateFormat: yyyy-mm-dd }
      - { name: us, field: at, dateFormat: mm/dd/yyyy }
      - { name: packed, field: at, dateFormat: yyyymmdd }
`).layout!.files[0]!;
    const line = (at: string, timeZone = 'America/Chicago') =>
      renderRows(dates, [{ type: 'r', externalId: 'x', fields: { at } }], {
        loanId: 'l',
        timeZone,
        kind: 'new',
      }).lines[0];
    // 05:30Z is 23:30 CST the evening before (DST starts at 08:00Z that day).
    expect(line('2026-03-08T05:30:00Z')).toBe('2026-03-07,03/07/2026,20260307');
    expect(line('2026-03-08T08:30:00.000Z')).toBe('2026-03-08,03/08/2026,20260308');
    expect(line('2026-03-07T23:30:00-06:00', 'Asia/Tokyo')).toBe('2026-03-08,03/08/2026,20260308');
    expect(line('2026-03-08T05:30:00Z', 'UTC')).toBe('2026-03-08,03/08/2026,20260308');
    // A date, or a date-time without offset, is the bank's calendar value already: written as it is.
    expect(line('2026-03-08')).toBe('2026-03-08,03/08/2026,20260308');
    expect(line('2026-03-08T00:30:00')).toBe('2026-03-08,03/08/2026,20260308');
    expect(() => line('2026-02-30')).toThrow(/D\.CSV iso: a value of 10 characters is not a date/);
    expect(() => line('next tuesday')).toThrow(/not a date/);
  });
});
