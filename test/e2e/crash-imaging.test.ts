import type { ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readManifest } from '../../src/core/file/manifest.js';
import { safeId } from '../../src/core/safe-name.js';
import { crashSeed, runCrashLoop, startCrashPlatform, type CrashPlatform } from '../support/crash-loop.js';
import { TestImporter } from '../support/imaging-importer.js';

const LOANS = 60;
const KILLS = 10;
const IO_EXPR = `expr: 'paymentFrequency = "irregular payments" ? null : $interestOnlyPeriods(monthsInterestOnly, paymentFrequency)'`;

/**
 * Crash safety of the imaging export (issue 45): the daemon boards into the file core and exports
 * each loan's documents to an imaging folder (the shipped OnBase tagged layout, one folder per
 * loan) while a test importer polls the folder every 20 ms the way a DIP process does (only
 * folders with the ready marker, every file checked against the manifest, the index naming
 * exactly the manifest's documents, deleted after import). The daemon is SIGKILLed at ten random
 * moments. At the end every document of every loan was imported exactly once, with its loan's
 * account number, the file core's sha256 for the same bytes, and the importer never met a folder
 * with a marker that was not whole.
 */
describe('crash loop with the imaging importer', () => {
  let cp: CrashPlatform;
  const children = new Set<ChildProcess>();
  let timer: NodeJS.Timeout | undefined;

  beforeAll(async () => {
    cp = await startCrashPlatform({ loans: LOANS, seed: 45, name: 'imaging' });
  });
  afterAll(async () => {
    if (timer) clearInterval(timer);
    for (const c of children) c.kill('SIGKILL');
    await cp?.p.close();
  });

  it('imports every document once, never a half-visible folder, across ten SIGKILLs', async () => {
    expect(cp.released).toHaveLength(LOANS);
    const seed = crashSeed();
    const root = mkdtempSync(join(tmpdir(), 'crash-imaging-'));
    // A bank's fixed copy of the generic set, so every generated loan maps.
    const mappingsDir = join(root, 'generic');
    cpSync(join(process.cwd(), 'mappings/generic'), mappingsDir, { recursive: true });
    const mappingFile = join(mappingsDir, 'mapping.yaml');
    writeFileSync(mappingFile, readFileSync(mappingFile, 'utf8').replace(IO_EXPR, `expr: 'null'`));
    const coreDir = join(root, 'core');
    const imagingDir = join(root, 'dip');

    const importer = new TestImporter({
      dir: imagingDir,
      indexFile: 'index.txt',
      format: 'tagged',
      begin: 'BEGIN:',
      fileKeyword: '>>FullPath',
    });
    const problems = new Set<string>();
    const poll = (): void => {
      try {
        importer.poll();
      } catch (err) {
        problems.add((err as Error).message);
      }
    };
    timer = setInterval(poll, 20);

    const { kills, cfg } = await runCrashLoop(cp, {
      seed,
      kills: KILLS,
      children,
      mappingsDir,
      core: { adapter: 'file', file: { dir: coreDir } },
      extra: {
        imaging: {
          enabled: true,
          dir: imagingDir,
          layout: 'imaging/onbase-tagged.yaml',
          batch: { mode: 'loan' },
        },
      },
    });
    clearInterval(timer);
    timer = undefined;
    poll();
    expect([...problems], `what the importer met (seed ${seed})`).toEqual([]);
    // Nothing left behind for the importer: every folder was whole and taken.
    expect(existsSync(imagingDir) ? readdirSync(imagingDir) : [], `seed ${seed}`).toEqual([]);

    const db = new Database(cfg.dbPath, { readonly: true, fileMustExist: true });
    const loans = db.prepare(`SELECT id, account_number AS accountNumber FROM loans`).all() as Array<{
      id: string;
      accountNumber: string;
    }>;
    const unsealed = db.prepare(`SELECT id, status FROM imaging_batches WHERE status <> 'sealed'`).all();
    db.close();
    expect(unsealed, `imaging batches left unsealed (seed ${seed})`).toEqual([]);
    expect(loans).toHaveLength(LOANS);

    const byDoc = new Map<string, (typeof importer.imported)[number]>();
    for (const d of importer.imported) {
      const id = d.keywords['Platform Doc ID'] as string;
      expect(byDoc.has(id), `document ${id} imported twice (seed ${seed})`).toBe(false);
      byDoc.set(id, d);
    }
    let expected = 0;
    for (const loan of loans) {
      const manifest = await readManifest(join(coreDir, 'packages', safeId(loan.id)));
      expect(manifest, loan.id).not.toBeNull();
      for (const d of manifest!.documents) {
        expected += 1;
        const got = byDoc.get(d.documentId);
        expect(got, `${loan.id}/${d.documentId} never imported (seed ${seed})`).toBeDefined();
        expect(got!.sha256).toBe(d.sha256);
        expect(got!.keywords['SHA256']).toBe(d.sha256);
        expect(got!.keywords['Account Number']).toBe(loan.accountNumber);
        expect(got!.keywords['Loan Number']).toBe(manifest!.loanNumber ?? undefined);
        expect(got!.keywords['>>DocTypeName']).toMatch(/^LOAN - /);
      }
    }
    expect(expected).toBeGreaterThan(LOANS);
    expect(importer.imported, `documents imported (seed ${seed})`).toHaveLength(expected);
    console.log(JSON.stringify({ seed, kills, documents: expected, folders: importer.batches.length }));
  });
});
