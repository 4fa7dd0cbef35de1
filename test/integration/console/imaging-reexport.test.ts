import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createConnectorDaemon } from '../../../src/app/daemon.js';
import { buildRuntime } from '../../../src/app/runtime.js';
import { loadConfig } from '../../../src/config/load.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { testHash } from '../../support/console-users.js';
import { TestImporter } from '../../support/imaging-importer.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

/**
 * The imaging export in the console (issue 45): the loan page shows where each document went (the
 * core write's count, each document's imaging batch and file), and a re-export is a four-eyes
 * request: an operator asks on the loan page, nothing is exported until an approver (not the
 * operator) approves, then the documents go out again into a new batch under both names.
 */
const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('console: where documents went, and the imaging re-export with four eyes', () => {
  it('shows each document’s batch on the loan page; an approved re-export sends them again, audited', async () => {
    const p: TestPlatform = await startTestPlatform({ loans: 4, releaseRatio: 1, seed: 45, windowMs: 2000 });
    cleanups.push(() => p.close());
    const reports = mkdtempSync(join(tmpdir(), 'console-imaging-reports-'));
    const imagingDir = join(mkdtempSync(join(tmpdir(), 'console-imaging-')), 'dip');
    const users = [
      { name: 'olga', passwordHash: await testHash('olga-pw-123456'), roles: ['operator'] },
      { name: 'ivan', passwordHash: await testHash('ivan-pw-123456'), roles: ['approver'] },
    ];
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 100,
      extra: {
        console: { users, upgradeHashes: false },
        admin: { host: '127.0.0.1', port: 0 },
        webhooks: { host: '127.0.0.1', port: 0 },
        reports: { dir: reports },
        schedule: { drain: '0 0 1 1 *', endpointCheck: '0 0 1 1 *', reconcile: '0 0 1 1 *' },
        imaging: { enabled: true, dir: imagingDir, layout: 'imaging/onbase-tagged.yaml' },
      },
    });
    cleanups.push(() => rmSync(cfg.dir, { recursive: true, force: true }));
    const sync = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(sync.code, sync.error ?? '').toBe(0);
    const importer = new TestImporter({
      dir: imagingDir,
      indexFile: 'index.txt',
      format: 'tagged',
      begin: 'BEGIN:',
      fileKeyword: '>>FullPath',
    });
    importer.poll();
    const first = importer.imported.length;
    expect(first).toBeGreaterThan(0);
    // A loan with documents.
    const byLoan = new Database(cfg.dbPath, { readonly: true })
      .prepare(`SELECT loan_id AS id, COUNT(*) AS n FROM imaging_documents GROUP BY loan_id ORDER BY n DESC`)
      .all() as Array<{ id: string; n: number }>;
    const loan = byLoan[0]!;

    const rt = await buildRuntime(
      loadConfig({ env: {}, fileText: readFileSync(cfg.configPath, 'utf8') }),
      silentLogger(),
      { clock: systemClock },
    );
    cleanups.push(() => rt.close());
    const daemon = createConnectorDaemon(rt);
    cleanups.push(() => daemon.stop());
    await daemon.start();
    await daemon.idle();
    const base = daemon.adminUrl() as string;
    const C = `${base}/console/api`;
    const as = (u: string, pw: string) => ({
      authorization: `Basic ${Buffer.from(`${u}:${pw}`).toString('base64')}`,
    });
    const olga = as('olga', 'olga-pw-123456');
    const ivan = as('ivan', 'ivan-pw-123456');

    // The loan page (an operator logged in): the documents' batches and the re-export form.
    const login = await fetch(`${base}/console/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
      body: new URLSearchParams({ name: 'olga', password: 'olga-pw-123456' }).toString(),
    });
    expect(login.status).toBe(303);
    const cookie = login.headers
      .getSetCookie()
      .find((c) => c.startsWith('bc_console_session='))!
      .split(';')[0]!;
    const page = await (
      await fetch(`${base}/console/loans/${encodeURIComponent(loan.id)}`, { headers: { cookie } })
    ).text();
    expect(page).toContain('data-testid="documents-imaging"');
    expect(page).toMatch(
      /data-testid="documents-tie">Listed by the platform: \d+ · written to the core: \d+ · exported to imaging: \d+ <span class="pill ok">ties/,
    );
    expect(page).toContain('data-testid="imaging-reexport"');
    const json = (await (
      await fetch(`${C}/loans/${encodeURIComponent(loan.id)}`, { headers: olga })
    ).json()) as {
      documents: {
        writtenToCore: number;
        imaging: Array<{ batchId: string; batchStatus: string; reexport: number }>;
      };
    };
    expect(json.documents.imaging).toHaveLength(loan.n);
    expect(json.documents.imaging.every((d) => d.batchStatus === 'sealed' && d.reexport === 0)).toBe(true);
    expect(json.documents.writtenToCore).toBe(loan.n);
    for (const d of json.documents.imaging) expect(page).toContain(d.batchId);

    // Four eyes: asked by the operator, nothing exported until the approver approves.
    const made = await fetch(`${C}/requests`, {
      method: 'POST',
      headers: { ...olga, 'content-type': 'application/json' },
      body: JSON.stringify({
        action: 'imaging_reexport',
        loans: [loan.id],
        reason: 'DIP lost the batch, OPS-77',
      }),
    });
    expect(made.status).toBe(202);
    const request = (await made.json()) as { id: string; status: string };
    expect(request.status).toBe('pending');
    const self = await fetch(`${C}/requests/${request.id}/approve`, {
      method: 'POST',
      headers: { ...olga, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(self.status).toBe(403);
    expect(importer.poll()).toBe(0);
    const approved = await fetch(`${C}/requests/${request.id}/approve`, {
      method: 'POST',
      headers: { ...ivan, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(approved.status).toBe(200);
    const result = (await approved.json()) as { status: string; result: { done: number; detail: string } };
    expect(result).toMatchObject({ status: 'executed', result: { done: 1 } });
    expect(result.result.detail).toMatch(new RegExp(`^${loan.n} document\\(s\\) re-exported into \\d{4}-`));
    expect(importer.poll()).toBe(1);
    expect(importer.imported).toHaveLength(first + loan.n);

    const after = (await (
      await fetch(`${C}/loans/${encodeURIComponent(loan.id)}`, { headers: olga })
    ).json()) as {
      documents: { imaging: Array<{ reexport: number; reexportBy: string | null }> };
      events: Array<{ kind: string; reason: string | null; actor: string }>;
    };
    const again = after.documents.imaging.filter((d) => d.reexport === 1);
    expect(again).toHaveLength(loan.n);
    expect(again.every((d) => d.reexportBy === 'olga (console, approved by ivan)')).toBe(true);
    expect(
      after.events.some((e) => e.kind === 'ops' && e.reason?.startsWith('imaging reexport: DIP lost')),
    ).toBe(true);

    // A filter is refused (re-exports name their loans).
    const byFilter = await fetch(`${C}/requests`, {
      method: 'POST',
      headers: { ...olga, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'imaging_reexport', filter: {}, reason: 'all of them' }),
    });
    expect(byFilter.status).toBe(400);
  });
});
