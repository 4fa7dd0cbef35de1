import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileImagingLayout, type ImagingLayout } from '../../../src/imaging/layout.js';
import {
  documentContext,
  evaluateRecord,
  ImagingRenderError,
  renderIndex,
} from '../../../src/imaging/render.js';

const SET = join(process.cwd(), 'mappings/generic');
const read = (rel: string): string | undefined => {
  try {
    return readFileSync(join(SET, rel), 'utf8');
  } catch {
    return undefined;
  }
};

function compile(file: string, text: string, files: Record<string, string> = {}) {
  return compileImagingLayout(file, text, (rel) => files[rel] ?? read(rel));
}

const shipped = (file: string): ImagingLayout => {
  const r = compile(file, read(file)!);
  expect(r.problems).toEqual([]);
  return r.layout!;
};

const input = {
  loan: { id: 'loan_1', loanNumber: 'LN-0001' },
  entities: {
    businesses: [{ id: 'biz_1', name: 'Acme | "Tools" LLC', role: 'borrower', ein: '123456789' }],
    people: [{ id: 'per_1', firstName: 'Ana', lastName: 'Diaz', role: 'guarantor', ssn: '111223333' }],
  },
  identity: {
    accountNumber: '4000123',
    customers: { biz_1: { cif: 'C900', matchedBy: 'created', existing: false } },
  },
} as never;

const doc = (over: Record<string, unknown> = {}) =>
  ({
    id: 'doc_1',
    name: 'Tax return 2024.pdf',
    category: 'financials',
    uploadedAt: '2025-03-01T02:30:00Z',
    requirement: { name: 'Business Tax Returns', entityID: 'loan_1' },
    ...over,
  }) as never;

describe('imaging index layouts', () => {
  it('the shipped OnBase tagged layout writes a self-configuring index: banner, BEGIN:, tags, MM/DD/YYYY in the bank zone', async () => {
    const layout = shipped('imaging/onbase-tagged.yaml');
    const { context, choice } = documentContext(layout, input, doc());
    expect(choice).toEqual({ documentType: 'LOAN - TAX RETURN', fellBack: false });
    const values = await evaluateRecord(layout, context, 'America/New_York');
    const text = renderIndex(layout, '2025-03-01-0001', [
      { values, fileName: 'doc_1__Tax return 2024.pdf', sha256: 'ab'.repeat(32), bytes: 10 },
    ]).toString('utf8');
    expect(text.split('\r\n')).toEqual([
      '>>>>Self Configuring Tagged DIP<<<<',
      'BEGIN:',
      '>>DocTypeName: LOAN - TAX RETURN',
      // 02:30 UTC on March 1st is still February 28th in New York.
      '>>DocDate: 02/28/2025',
      'Account Number: 4000123',
      'CIF Number: C900',
      'Customer Name: Acme | "Tools" LLC',
      'Loan Number: LN-0001',
      'Platform Doc ID: doc_1',
      `SHA256: ${'ab'.repeat(32)}`,
      '>>FullPath: \\\\imaging-server\\dip\\loans\\2025-03-01-0001\\doc_1__Tax return 2024.pdf',
      '',
    ]);
    // No tax id unless the layout puts one there.
    expect(text).not.toContain('123456789');
    expect(text).not.toContain('111223333');
  });

  it('the delimited layout quotes a value holding the delimiter or a quote, and falls back to the default type', async () => {
    const layout = shipped('imaging/delimited.yaml');
    const { context, choice } = documentContext(layout, input, doc({ category: 'misc', requirement: null }));
    expect(choice).toEqual({ documentType: 'LOAN - MISCELLANEOUS', fellBack: true });
    const values = await evaluateRecord(layout, context, 'UTC');
    const text = renderIndex(layout, '2025-03-01-0001', [
      { values, fileName: 'f.pdf', sha256: 'cd'.repeat(32), bytes: 1 },
    ]).toString('utf8');
    expect(text.split('\r\n')[0]).toBe(
      'DocumentType|DocumentDate|AccountNumber|CIF|BorrowerName|LoanNumber|DocumentId|FileName|SHA256',
    );
    expect(text.split('\r\n')[1]).toBe(
      `LOAN - MISCELLANEOUS|2025-03-01|4000123|C900|"Acme | ""Tools"" LLC"|LN-0001|doc_1|f.pdf|${'cd'.repeat(32)}`,
    );
  });

  it('a document of a guarantor is indexed under its owner, not the borrower', () => {
    const layout = shipped('imaging/onbase-tagged.yaml');
    const { context } = documentContext(
      layout,
      input,
      doc({ requirement: { name: 'x', entityID: 'per_1' } }),
    );
    expect(context.owner).toMatchObject({ id: 'per_1', name: 'Ana Diaz', cif: null });
  });

  it('lint names file and line: a tag over 20 characters, a missing begin, a syntax error, an unknown key, a bad lookup', () => {
    const r = compile(
      'imaging/bad.yaml',
      [
        'format: tagged',
        'documentTypes: { lookup: types.csv, default: X }',
        'fields:',
        "  - { tag: 'A keyword tag that is too long: ', value: document.id }",
        "  - { tag: 'B: ', value: 'document.(' }",
        "  - { tag: 'F: ', file: path, colour: red }",
      ].join('\n'),
      { 'imaging/types.csv': 'category,documentType\nx,y\n' },
    );
    const messages = r.problems.map((p) => `${p.file}:${p.line}: ${p.message}`);
    expect(messages).toEqual(
      expect.arrayContaining([expect.stringMatching(/^imaging\/bad\.yaml:6: fields\.2: unknown key colour/)]),
    );
    const r2 = compile(
      'imaging/bad.yaml',
      [
        'format: tagged',
        'documentTypes: { lookup: types.csv, default: X }',
        'fields:',
        "  - { tag: 'A keyword tag that is too long: ', value: document.id }",
        "  - { tag: 'B: ', value: 'document.(' }",
        "  - { tag: 'F: ', file: path }",
      ].join('\n'),
      { 'imaging/types.csv': 'category,documentType\nx,y\n' },
    );
    const m2 = r2.problems.map((p) => `${p.file}:${p.line}: ${p.message}`);
    expect(m2).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^imaging\/bad\.yaml:1: begin: required/),
        expect.stringMatching(
          /^imaging\/bad\.yaml:4: fields\.0\.tag: .* is 31 characters; an imaging tag is at most 20/,
        ),
        expect.stringMatching(/^imaging\/bad\.yaml:5: fields\.1\.value: JSONata syntax error/),
        expect.stringMatching(/^imaging\/types\.csv:1: header must be category,requirement,documentType/),
      ]),
    );
    expect(r2.layout).toBeUndefined();
  });

  it('a value wider than its fixed-width field or outside the encoding stops the loan, naming the field', async () => {
    const r = compile(
      'imaging/fixed.yaml',
      [
        'format: fixed',
        'encoding: latin1',
        'fields:',
        '  - { name: ACCOUNT, value: identity.accountNumber, width: 5 }',
        '  - { name: NAME, value: owner.name, width: 40 }',
        '  - { name: FILE, file: name, width: 60 }',
      ].join('\n'),
    );
    expect(r.problems).toEqual([]);
    const layout = r.layout!;
    const { context } = documentContext(layout, input, doc());
    const values = await evaluateRecord(layout, context, 'UTC');
    expect(() => renderIndex(layout, 'b', [{ values, fileName: 'f', sha256: '', bytes: 0 }])).toThrow(
      /imaging\/fixed\.yaml:4: field ACCOUNT: "4000123" is wider than 5/,
    );
    const ok = renderIndex(layout, 'b', [
      { values: ['40001', 'Zoë', null], fileName: 'f', sha256: '', bytes: 0 },
    ]);
    expect(ok.length).toBe(105 + 2);
    expect(() =>
      renderIndex(layout, 'b', [{ values: ['1', 'Zoë 漢', null], fileName: 'f', sha256: '', bytes: 0 }]),
    ).toThrow(ImagingRenderError);
  });
});
