import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

/**
 * The imaging layouts are mapping files like the others (issue 45): `mappings lint` checks every
 * `imaging/*.yaml` of the set (file and line for each problem), and `mappings preview` shows the
 * index records a loan's documents would get in the layout in use, tax ids masked.
 */
describe('mappings lint and preview with imaging layouts', () => {
  let p: TestPlatform;
  let released: string[];
  beforeAll(async () => {
    p = await startTestPlatform({ loans: 6, releaseRatio: 1, seed: 45, windowMs: 2000 });
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    released = list.data.map((l) => l.id);
  });
  afterAll(async () => {
    await p.close();
  });

  it('lint names a broken imaging layout with its file and line; the shipped set lints clean', async () => {
    const clean = await runCli(['mappings', 'lint', '--dir', join(process.cwd(), 'mappings/generic')]);
    expect(clean.error).toBeNull();
    const dir = join(mkdtempSync(join(tmpdir(), 'imaging-lint-')), 'generic');
    cpSync(join(process.cwd(), 'mappings/generic'), dir, { recursive: true });
    const file = join(dir, 'imaging/onbase-tagged.yaml');
    const text = readFileSync(file, 'utf8');
    const line = text.split('\n').findIndex((l) => l.includes("'Account Number: '")) + 1;
    writeFileSync(file, text.replace("'Account Number: '", "'Customer Account Number: '"));
    const r = await runCli(['mappings', 'lint', '--dir', dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`${join(dir, 'imaging/onbase-tagged.yaml')}:${line}:`);
    expect(r.stdout).toMatch(/an imaging tag is at most 20/);
  });

  it('mappings test compares a fixture’s expected-imaging records with the layout; --update rewrites them', async () => {
    const clean = await runCli(['mappings', 'test', '--dir', join(process.cwd(), 'mappings/generic')]);
    expect(clean.error).toBeNull();
    const dir = join(mkdtempSync(join(tmpdir(), 'imaging-fixtures-')), 'generic');
    cpSync(join(process.cwd(), 'mappings/generic'), dir, { recursive: true });
    // The bank renames a keyword in its layout but not in the fixture: the fixture fails on that line.
    const layout = join(dir, 'imaging/onbase-tagged.yaml');
    writeFileSync(layout, readFileSync(layout, 'utf8').replace("'Loan Number: '", "'Loan No: '"));
    const rel = 'fixtures/business-annual/expected-imaging/onbase-tagged.txt';
    const want = readFileSync(join(dir, rel), 'utf8').split('\n');
    const line = want.findIndex((l) => l.includes('Loan Number: ')) + 1;
    expect(line).toBeGreaterThan(1);
    const r = await runCli(['mappings', 'test', '--dir', dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`${rel}:${line}: expected "${want[line - 1]}"`);
    expect(r.stdout).toContain('Loan No: LN-010001');
    const u = await runCli(['mappings', 'test', '--dir', dir, '--update']);
    expect(u.error).toBeNull();
    expect(readFileSync(join(dir, rel), 'utf8')).toContain('  Loan No: LN-010001\n');
    expect((await runCli(['mappings', 'test', '--dir', dir])).error).toBeNull();
  });

  it('preview shows the index records of the loan’s documents in the layout in use', async () => {
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
      extra: {
        imaging: { enabled: true, dir: join(tmpdir(), 'unused-dip'), layout: 'imaging/onbase-tagged.yaml' },
      },
    });
    // A loan with documents (the sandbox gives most loans some).
    let loanId = '';
    for (const id of released) {
      const j = await runCli(['--config', cfg.configPath, 'mappings', 'preview', '--loan', id, '--json']);
      const recs = (JSON.parse(j.stdout) as { imagingIndex?: { records: unknown[] } }).imagingIndex?.records;
      if ((recs?.length ?? 0) > 0) {
        loanId = id;
        break;
      }
    }
    expect(loanId).not.toBe('');
    const r = await runCli(['--config', cfg.configPath, 'mappings', 'preview', '--loan', loanId]);
    expect(r.error).toBeNull();
    const m = /imaging index \(imaging\/onbase-tagged\.yaml\): (\d+) document\(s\)/.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    const n = Number(m![1]);
    expect(n).toBeGreaterThan(0);
    expect(r.stdout.match(/^ {2}BEGIN:$/gm)).toHaveLength(n);
    expect(r.stdout).toMatch(/^ {2}>>DocTypeName: LOAN - /m);
    expect(r.stdout).toMatch(/^ {2}>>DocDate: \d{2}\/\d{2}\/\d{4}$/m);
    expect(r.stdout).toMatch(/^ {2}>>FullPath: \\\\imaging-server\\dip\\loans\\YYYY-MM-DD-NNNN\\doc_/m);

    const j = await runCli(['--config', cfg.configPath, 'mappings', 'preview', '--loan', loanId, '--json']);
    const parsed = JSON.parse(j.stdout) as {
      imagingIndex: { layout: string; records: Array<{ documentId: string; lines: string[] }> };
    };
    expect(parsed.imagingIndex.layout).toBe('imaging/onbase-tagged.yaml');
    expect(parsed.imagingIndex.records).toHaveLength(n);
    for (const rec of parsed.imagingIndex.records)
      expect(rec.lines).toContain(`Platform Doc ID: ${rec.documentId}`);
  });
});
