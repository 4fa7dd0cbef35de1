import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createConnectorDaemon } from '../../../src/app/daemon.js';
import { buildRuntime } from '../../../src/app/runtime.js';
import { testHash } from '../../support/console-users.js';
import { loadConfig } from '../../../src/config/load.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

/**
 * The file core's batches through the console: loans boarded by `sync --once` with the shipped
 * generic set sit in the open batch; a seal requested by an operator runs only when an approver
 * approves it, and the batches page then lists the sealed batch with its files.
 */
const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('console: batch seal with four eyes (file core)', () => {
  it('an approved seal request seals the open batch and the batches page lists its files', async () => {
    const p: TestPlatform = await startTestPlatform({
      loans: 6,
      releaseRatio: 1,
      seed: 5,
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 100,
    });
    cleanups.push(() => p.close());
    const reports = mkdtempSync(join(tmpdir(), 'console-seal-reports-'));
    cleanups.push(() => rmSync(reports, { recursive: true, force: true }));
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
      },
    });
    cleanups.push(() => rmSync(cfg.dir, { recursive: true, force: true }));
    const sync = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(sync.code, sync.error ?? '').toBe(0);
    const boarded = JSON.parse(sync.stdout).states.acknowledged as number;
    expect(boarded).toBeGreaterThan(0);

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
    const C = `${daemon.adminUrl() as string}/console/api`;
    const as = (u: string, pw: string) => ({
      authorization: `Basic ${Buffer.from(`${u}:${pw}`).toString('base64')}`,
    });
    const olga = as('olga', 'olga-pw-123456');
    const ivan = as('ivan', 'ivan-pw-123456');

    const open = (await (await fetch(`${C}/batches`, { headers: olga })).json()) as {
      batches: Array<{ id: string; status: string; loanCount: number; files: unknown[] }>;
    };
    expect(open.batches).toHaveLength(1);
    expect(open.batches[0]).toMatchObject({ status: 'open', loanCount: boarded, files: [] });
    const id = open.batches[0]?.id as string;

    const made = await fetch(`${C}/requests`, {
      method: 'POST',
      headers: { ...olga, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'seal', batch: id, reason: 'core import runs early today' }),
    });
    expect(made.status).toBe(202);
    const request = (await made.json()) as { id: string; status: string };
    expect(request.status).toBe('pending');
    // Nothing sealed before the approval.
    expect(readdirSync(cfg.coreDir)).not.toContain('batches');

    const approved = await fetch(`${C}/requests/${request.id}/approve`, {
      method: 'POST',
      headers: { ...ivan, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(approved.status).toBe(200);
    expect(await approved.json()).toMatchObject({ status: 'executed', result: { detail: `sealed ${id}` } });

    const after = (await (await fetch(`${C}/batches`, { headers: olga })).json()) as {
      batches: Array<{
        id: string;
        status: string;
        sealReason: string;
        sealedBy: string;
        files: Array<{ name: string; bytes: number }>;
      }>;
    };
    expect(after.batches[0]).toMatchObject({
      id,
      status: 'sealed',
      sealReason: 'ops: core import runs early today',
      sealedBy: 'olga (console, approved by ivan)',
    });
    expect(after.batches[0]?.files.map((f) => f.name)).toEqual([
      'LNLOAD.DAT',
      'READY',
      'control.csv',
      'crossref.csv',
      'customer.csv',
      'document.csv',
      'loan.csv',
      'relationship.csv',
    ]);
    expect(after.batches[0]?.files.every((f) => f.bytes >= 0)).toBe(true);
  });
});
