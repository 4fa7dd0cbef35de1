import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compileMapping } from '../../../src/mapping/compile.js';
import { idIntoLimitedFields } from '../../../src/mapping/id-flow.js';
import { cli } from '../../support/mappings-cli.js';

const repo = join(import.meta.dirname, '../../..');

function warnings(yaml: string): string[] {
  const r = compileMapping((p) => (p === 'mapping.yaml' ? yaml : undefined));
  expect(r.problems).toEqual([]);
  return idIntoLimitedFields(r.mapping!).map((w) => `${w.file}:${w.line}:${w.column}: ${w.message}`);
}

const head = `version: 1
name: t
targets:
  loan:
    for: loan
    externalId: id
    fields:
`;

describe('mappings lint: a platform id into a place of fixed size (issue 23)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'id-flow-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('warns with file:line:column for a field of maxLength fed by the loan id, naming $accountNumber()', () => {
    expect(
      warnings(
        `${head}      ref: { expr: id, type: string, maxLength: 20 }\n      n: { expr: $accountNumber(), type: string, maxLength: 20 }\n`,
      ),
    ).toEqual([
      "mapping.yaml:8:20: warning: loan.ref: the platform id id goes into a field of maxLength 20; platform ids have no fixed length or shape (UUIDs, opaque ids of 64 characters and more): use the loan's account number instead: $accountNumber() (identity.accountNumbers)",
    ]);
  });

  it("names $cif(...) for an entity's id, and sees ids through concatenation and conditions", () => {
    const w = warnings(
      `${head}      borrower: { expr: $borrower().id, type: string, maxLength: 30 }\n      key: { expr: '"L-" & $loan.id', type: string, maxLength: 40 }\n      other: { expr: 'purpose ? id : null', type: string, maxLength: 40 }\n      free: { expr: id, type: string }\n`,
    );
    expect(w).toHaveLength(3);
    expect(w[0]).toMatch(
      /^mapping\.yaml:8:25: warning: loan\.borrower: the platform id \$borrower\(\)\.id .*\$cif\(entity\), e\.g\. \$cif\(\$borrower\(\)\)/,
    );
    expect(w[1]).toMatch(
      /^mapping\.yaml:9:20: warning: loan\.key: the platform id \$loan\.id .*\$accountNumber\(\)/,
    );
    expect(w[2]).toMatch(/^mapping\.yaml:10:22: warning: loan\.other: the platform id id/);
  });

  it('the CLI prints the fixed-width column warning with layout.yaml:line:column and still passes', async () => {
    const dir = join(tmp, 'generic');
    cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
    const layout = join(dir, 'layout.yaml');
    // The layout as it shipped before issue 23: LNLOAD.DAT keyed on the platform loan id.
    writeFileSync(
      layout,
      readFileSync(layout, 'utf8').replace(
        '{ name: ACCOUNT_NO, start: 2, length: 20, field: accountNumber }',
        '{ name: LOAN_ID, start: 2, length: 20, source: externalId }',
      ),
    );
    const line =
      readFileSync(layout, 'utf8')
        .split('\n')
        .findIndex((l) => l.includes('LOAN_ID')) + 1;
    const r = await cli(['mappings', 'lint', '--dir', dir]);
    expect(r.error).toBeUndefined();
    expect(r.out).toContain(
      `${join(dir, 'layout.yaml')}:${line}:9: warning: LNLOAD.DAT LOAN_ID: the platform id id (source: externalId) goes into a fixed-width column of 20 bytes; platform ids have no fixed length or shape (UUIDs, opaque ids of 64 characters and more): use the loan's account number instead: $accountNumber() (identity.accountNumbers)`,
    );
    expect(r.out).toMatch(/ok \(mapping version [^)]+\), 1 warning\(s\)/);
  });

  it('the shipped sets lint without a warning', async () => {
    const r = await cli([
      'mappings',
      'lint',
      '--dir',
      join(repo, 'mappings/generic'),
      '--dir',
      join(repo, 'mappings/fineract'),
      '--dir',
      join(repo, 'mappings/mambu'),
    ]);
    expect(r.error).toBeUndefined();
    expect(r.out).not.toContain('warning');
  });
});
