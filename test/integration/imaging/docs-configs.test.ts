import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliSplit } from '../../support/cli-run.js';
import { TestImporter } from '../../support/imaging-importer.js';
import { ALL_PERMISSIONS, startTestPlatform, type TestPlatform } from '../pipeline/harness.js';

/**
 * The two configs of docs/imaging.md, exactly as written (their `imaging:` blocks appended to a
 * platform, store and core section pointing at the sandbox), run from a fresh working directory
 * (their relative folders land there): the OnBase tagged one boards and exports per loan, the
 * delimited one exports into a batch that `imaging list` shows open until it is sealed.
 */
function docBlocks(): string[] {
  const text = readFileSync(join(process.cwd(), 'docs/imaging.md'), 'utf8');
  return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .map((m) => m[1] as string)
    .filter((b) => /^imaging:/m.test(b));
}

describe('docs/imaging.md configs, run as written', () => {
  // One sandbox per config: a loan boarded under the first is no longer in the queue for the second.
  let platforms: TestPlatform[];
  beforeAll(async () => {
    platforms = await Promise.all(
      [9, 10].map((seed) => startTestPlatform({ loans: 8, releaseRatio: 1, seed, windowMs: 2000 })),
    );
  });
  afterAll(async () => {
    await Promise.all(platforms.map((x) => x.close()));
  });

  const configFor = (cwd: string, block: string, which: 0 | 1): string => {
    const p = platforms[which]!;
    const base = stringify({
      platform: {
        baseUrl: p.sandbox.baseUrl,
        apiKey: p.apiKey,
        environment: 'staging',
        rateLimit: { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 60 },
      },
      store: { path: join(cwd, 'state.sqlite') },
      core: { adapter: 'file', file: { dir: join(cwd, 'core') } },
      boarding: { documentHosts: { allow: ['127.0.0.1'] }, retryBaseMs: 200 },
      log: { level: 'error' },
    });
    const path = join(cwd, 'config.yaml');
    writeFileSync(path, `${base}${block}`);
    return path;
  };

  it('has the two documented configs, and the layouts they name are the shipped ones', () => {
    const blocks = docBlocks();
    expect(blocks).toHaveLength(2);
    expect(blocks.map((b) => (parse(b) as { imaging: { layout: string } }).imaging.layout)).toEqual([
      'imaging/onbase-tagged.yaml',
      'imaging/delimited.yaml',
    ]);
    expect(ALL_PERMISSIONS.length).toBeGreaterThan(0);
  });

  it('the OnBase tagged DIP config exports every document of every boarded loan, once', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'boarding-imaging-doc-'));
    const config = configFor(cwd, docBlocks()[0]!, 0);
    const r = await runCliSplit(['--config', config, 'sync', '--once', '--json'], { cwd });
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);
    const importer = new TestImporter({
      dir: join(cwd, 'var/imaging/dip'),
      indexFile: 'index.txt',
      format: 'tagged',
      fileKeyword: '>>FullPath',
    });
    expect(importer.poll()).toBeGreaterThan(0);
    const ids = importer.imported.map((d) => d.keywords['Platform Doc ID']);
    expect(new Set(ids).size).toBe(ids.length);
    const list = await runCliSplit(['--config', config, 'imaging', 'list', '--json'], { cwd });
    const batches = JSON.parse(list.stdout) as Array<{ status: string; documents: number }>;
    expect(batches.every((b) => b.status === 'sealed')).toBe(true);
    expect(batches.reduce((n, b) => n + b.documents, 0)).toBe(ids.length);
  });

  it('the delimited config fills one open batch the importer cannot see until it is sealed', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'boarding-imaging-doc-'));
    const config = configFor(cwd, docBlocks()[1]!, 1);
    const r = await runCliSplit(['--config', config, 'sync', '--once', '--json'], { cwd });
    expect(r.error).toBeNull();
    const importer = new TestImporter({
      dir: join(cwd, 'var/imaging/delimited'),
      indexFile: 'index.csv',
      format: 'delimited',
      delimiter: '|',
      fileKeyword: 'FileName',
    });
    expect(importer.poll()).toBe(0);
    const list = await runCliSplit(['--config', config, 'imaging', 'list', '--json'], { cwd });
    const batches = JSON.parse(list.stdout) as Array<{ id: string; status: string; documents: number }>;
    expect(batches).toHaveLength(1);
    expect(batches[0]).toMatchObject({ status: 'open' });
    expect(batches[0]!.documents).toBeGreaterThan(0);
    // A loan's documents: where each went.
    const show = await runCliSplit(['--config', config, 'imaging', 'show', batches[0]!.id, '--json'], {
      cwd,
    });
    const shown = JSON.parse(show.stdout) as { documents: Array<{ loanId: string; documentId: string }> };
    expect(shown.documents).toHaveLength(batches[0]!.documents);
    const loanId = shown.documents[0]!.loanId;
    const byLoan = await runCliSplit(['--config', config, 'imaging', 'show', loanId, '--json'], { cwd });
    expect((JSON.parse(byLoan.stdout) as { documents: unknown[] }).documents.length).toBeGreaterThan(0);
    // A re-export is refused without a reason, and skips documents still in the open batch.
    const re = await runCliSplit(
      [
        '--config',
        config,
        'imaging',
        'reexport',
        '--loan',
        loanId,
        '--reason',
        'lost by the importer',
        '--by',
        'ana',
      ],
      { cwd },
    );
    expect(re.code).toBe(0);
    expect(re.stdout).toMatch(/nothing re-exported/);
    expect(importer.poll()).toBe(0);
  });
});
