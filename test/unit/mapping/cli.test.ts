import { mkdtempSync, rmSync, writeFileSync, cpSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli } from '../../support/mappings-cli.js';

const repo = join(import.meta.dirname, '../../..');

describe('mappings CLI', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'mappings-cli-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('lint passes on both shipped sets', async () => {
    const r = await cli([
      'mappings',
      'lint',
      '--dir',
      join(repo, 'mappings/generic'),
      '--dir',
      join(repo, 'mappings/fineract'),
    ]);
    expect(r.error).toBeUndefined();
    expect(r.out).toMatch(/generic: ok \(mapping version 1\.0\.0\+[0-9a-f]{12}\)/);
    expect(r.out).toMatch(/fineract: ok/);
  });

  it('lint fails (exit 1) with file:line:column for a syntax error, an unknown helper and a missing lookup key', async () => {
    const dir = join(tmp, 'broken');
    cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
    const yaml = readFileSync(join(dir, 'mapping.yaml'), 'utf8')
      .replace(
        'principal: { expr: $centsToDecimal(centsAmount),',
        'principal: { expr: "$centsToDecimal(centsAmount",',
      )
      .replace(
        'interestRate: { expr: $bpsToPercent(bpsRate),',
        'interestRate: { expr: $bpsToPercentage(bpsRate),',
      )
      .replace(
        `rateType: { expr: '$lookup("rateType", rateType)',`,
        `rateType: { expr: '$lookup("rateType", "floating")',`,
      );
    writeFileSync(join(dir, 'mapping.yaml'), yaml);
    const r = await cli(['mappings', 'lint', '--dir', dir]);
    expect(r.error).toMatchObject({ exitCode: 1 });
    const lines = r.out.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /broken\/mapping\.yaml:\d+:\d+: targets\.loan\.fields\.principal\.expr: JSONata syntax error/,
    );
    expect(lines[1]).toMatch(
      /broken\/mapping\.yaml:\d+:\d+: targets\.loan\.fields\.rateType\.expr: lookup table "rateType" has no key "floating"/,
    );
    expect(lines[2]).toMatch(
      /broken\/mapping\.yaml:\d+:\d+: targets\.loan\.fields\.interestRate\.expr: unknown function \$bpsToPercentage/,
    );
  });

  it('test passes on the shipped fixtures and prints a field-level diff (exit 1) on a mismatch', async () => {
    const ok = await cli(['mappings', 'test', '--dir', join(repo, 'mappings/fineract')]);
    expect(ok.error).toBeUndefined();
    expect(ok.out).toMatch(/fineract: (\d+)\/\1 fixture\(s\) passed/);

    const dir = join(tmp, 'changed');
    cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
    writeFileSync(
      join(dir, 'mapping.yaml'),
      readFileSync(join(dir, 'mapping.yaml'), 'utf8').replace('monthly: M', 'monthly: MO'),
    );
    const bad = await cli(['mappings', 'test', '--dir', dir, '--case', 'business-monthly-fixed']);
    expect(bad.error).toMatchObject({ exitCode: 1 });
    expect(bad.out).toContain('FAIL');
    expect(bad.out).toContain('loan/loan_0001.paymentFrequency: expected "M", got "MO"');
  });

  it('schema prints the shipped JSON Schema', async () => {
    const r = await cli(['mappings', 'schema']);
    expect(JSON.parse(r.out)).toEqual(JSON.parse(readFileSync(join(repo, 'mappings/schema.json'), 'utf8')));
  });
});
