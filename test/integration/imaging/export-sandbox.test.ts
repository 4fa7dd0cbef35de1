import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { safeId } from '../../../src/core/safe-name.js';
import { readManifest } from '../../../src/core/file/manifest.js';
import { TestImporter } from '../../support/imaging-importer.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

/**
 * The imaging export end to end: the sandbox's default data, the shipped generic set with its
 * OnBase-style tagged layout, `sync --once` through the CLI, and a test importer that polls the
 * folder like a DIP process. Every document of every boarded loan is imported once, with the
 * loan's account number, its document type and the sha256 the file core recorded for the same
 * bytes; a second sync exports nothing more.
 */
describe('imaging export against the sandbox', () => {
  let p: TestPlatform;
  let released: string[];

  beforeAll(async () => {
    p = await startTestPlatform({ loans: 24, releaseRatio: 1, seed: 45, windowMs: 2000 });
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    released = list.data.map((l) => l.id);
  });
  afterAll(async () => {
    await p.close();
  });

  it('exports every document once, per loan, before its ack, with the right keywords and sha256', async () => {
    const imagingDir = join(mkdtempSync(join(tmpdir(), 'boarding-imaging-')), 'dip');
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
      extra: { imaging: { enabled: true, dir: imagingDir, layout: 'imaging/onbase-tagged.yaml' } },
    });
    const importer = new TestImporter({
      dir: imagingDir,
      indexFile: 'index.txt',
      format: 'tagged',
      begin: 'BEGIN:',
      fileKeyword: '>>FullPath',
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);

    // Nothing half-visible: every batch folder has its marker, nothing else lies in the folder.
    for (const name of readdirSync(imagingDir)) {
      expect(readdirSync(join(imagingDir, name))).toContain('READY');
      expect(readdirSync(join(imagingDir, name)).filter((f) => f.startsWith('.tmp-'))).toEqual([]);
    }
    importer.poll();

    const db = new Database(cfg.dbPath, { readonly: true });
    const loans = db.prepare(`SELECT id, account_number AS accountNumber, state FROM loans`).all() as Array<{
      id: string;
      accountNumber: string;
      state: string;
    }>;
    db.close();
    const acknowledged = loans.filter((l) => l.state === 'acknowledged');
    expect(acknowledged.length).toBeGreaterThan(15);
    let expected = 0;
    const byDoc = new Map(importer.imported.map((d) => [d.keywords['Platform Doc ID'], d]));
    expect(byDoc.size).toBe(importer.imported.length); // never a document twice
    for (const loan of acknowledged) {
      const manifest = (await readManifest(join(cfg.coreDir, 'packages', safeId(loan.id))))!;
      for (const d of manifest.documents) {
        expected += 1;
        const got = byDoc.get(d.documentId);
        expect(got, `${loan.id}/${d.documentId}`).toBeDefined();
        expect(got!.sha256).toBe(d.sha256);
        expect(got!.keywords['SHA256']).toBe(d.sha256);
        expect(got!.keywords['Account Number']).toBe(loan.accountNumber);
        expect(got!.keywords['Loan Number']).toBe(manifest.loanNumber ?? undefined);
        expect(got!.keywords['>>DocDate']).toMatch(/^\d{2}\/\d{2}\/\d{4}$/);
        expect(got!.keywords['>>DocTypeName']).toMatch(/^LOAN - /);
        expect(got!.keywords['>>FullPath']).toBe(
          `\\\\imaging-server\\dip\\loans\\${got!.batch}\\${got!.fileName}`,
        );
      }
    }
    expect(expected).toBeGreaterThan(10);
    expect(importer.imported).toHaveLength(expected);
    expect(released.length).toBe(24);
    // Each document downloaded once: the core write's copy is spooled for the export (no second download).
    expect((await p.counters()).downloads).toBe(expected);

    // A second sync: nothing new to export, nothing exported again.
    const again = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(again.code).toBe(0);
    expect(importer.poll()).toBe(0);

    // The reconciliation report ties documents listed = written to the core = exported, per loan.
    const out = join(cfg.dir, 'report');
    const rec = await runCli(['--config', cfg.configPath, 'reconcile', '--out', out]);
    expect(rec.error).toBeNull();
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      summary?: { imaging?: unknown };
      imaging?: unknown;
    };
    const section = (report.summary?.imaging ?? report.imaging) as {
      listed: number;
      writtenToCore: number;
      exported: number;
      published: number;
      ties: boolean;
      gaps: unknown[];
    };
    expect(section).toMatchObject({
      listed: expected,
      writtenToCore: expected,
      exported: expected,
      ties: true,
    });
    expect(section.published).toBe(expected);
    expect(section.gaps).toEqual([]);
  });
});
