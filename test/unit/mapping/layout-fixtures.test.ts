import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli } from '../../support/mappings-cli.js';

const repo = join(import.meta.dirname, '../../..');

describe('mappings test with expected file lines', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'layout-fixtures-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('the shipped generic fixtures match their expected CSV and fixed-width lines', async () => {
    const r = await cli(['mappings', 'test', '--dir', join(repo, 'mappings/generic'), '--case', 'business-monthly-fixed']);
    expect(r.error).toBeUndefined();
    expect(r.out).toMatch(/ok {3}\S+ business-monthly-fixed/);
  });

  it('a fixed-width line one byte off fails with the file, the line and both values', async () => {
    const dir = join(tmp, 'generic');
    cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
    const file = join(dir, 'fixtures/business-monthly-fixed/expected-lines/LNLOAD.DAT');
    writeFileSync(file, readFileSync(file, 'latin1').replace('CRE300  ', 'CRE300 '), 'latin1');
    const r = await cli(['mappings', 'test', '--dir', dir, '--case', 'business-monthly-fixed']);
    expect(r.error).toBeDefined();
    expect(r.out).toMatch(/FAIL \S+ business-monthly-fixed\n\s+expected-lines\/LNLOAD\.DAT line 1: expected "A1000000057 .*", got "A1000000057 .*"/);
  });
});
