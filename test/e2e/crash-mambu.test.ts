import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mambuRef } from '../../src/core/mambu/ids.js';
import {
  startTestPlatform,
  writeConnectorConfig,
  type TestPlatform,
} from '../integration/pipeline/harness.js';
import { rng } from '../support/failover.js';
import { startFakeMambu, type FakeMambu } from '../support/fake-mambu.js';

const MAIN = join(process.cwd(), 'dist/main.js');
const LOANS = 60;
const KILLS = 10;

function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
}

/**
 * Crash safety against Mambu (issue 35): the daemon boards into the strict fake Mambu (approve with
 * one user, disburse with another) and is SIGKILLed at ten random moments, with Mambu also losing
 * some answers after it committed. Every loan must end acknowledged once, with exactly one loan
 * account, one disbursement, one customer per tax id, and 0 requests Mambu refused.
 */
describe('crash loop into Mambu', () => {
  let p: TestPlatform;
  let fake: FakeMambu;
  let released: string[];
  let logDir: string;
  const children = new Set<ChildProcess>();

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error('dist/main.js missing: run `npm run test:e2e` (it builds first)');
    p = await startTestPlatform({
      loans: LOANS,
      releaseRatio: 1,
      seed: 35,
      repeatBorrowers: 0.4,
      windowMs: 1000,
      readsPerWindow: 40,
      writesPerWindow: 10,
    });
    fake = await startFakeMambu();
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    released = list.data.map((l) => l.id);
    logDir = mkdtempSync(join(tmpdir(), 'crash-mambu-logs-'));
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await fake?.close();
    await p?.close();
  });

  it('loses nothing and boards nothing twice across ten SIGKILLs', async () => {
    expect(released).toHaveLength(LOANS);
    const seed = Number(process.env['CRASH_SEED'] ?? Date.now() % 1_000_000);
    const random = rng(seed);
    // Mambu commits and the answer is lost, now and then, on every kind of write.
    for (const path of ['/api/clients', '/api/groups', '/api/loans', '/api/documents'])
      fake.inject({ method: 'POST', path, kind: 'reset-after-commit', times: 2 });
    fake.inject({
      method: 'POST',
      path: /:changeState$/,
      kind: 'status-after-commit',
      status: 502,
      times: 2,
    });
    fake.inject({ method: 'POST', path: /disbursement-transactions$/, kind: 'reset-after-commit', times: 2 });
    await p.setFaults([{ route: 'POST /public/v1/loans/:id/boarding', resetAfterCommitRate: 0.15 }], seed);
    const cfg = writeConnectorConfig(p, {
      windowMs: 1000,
      readsPerWindow: 40,
      writesPerWindow: 10,
      mappingsDir: join(process.cwd(), 'mappings/mambu'),
      extra: {
        core: {
          adapter: 'mambu',
          mambu: {
            baseUrl: fake.url,
            auth: { username: 'approver', password: 'approver-pass' },
            disburseAuth: { username: 'disburser', password: 'disburser-pass' },
            approve: true,
            disburse: true,
            timeoutMs: 5000,
          },
        },
        customers: { tinHashKey: 'crash-test-key-0123456789' },
        schedule: { drain: '*/1 * * * * *' },
        boarding: {
          concurrency: 4,
          retryBaseMs: 100,
          retryMaxMs: 500,
          maxAttempts: 50,
          shutdownTimeoutMs: 5000,
          documentHosts: { allow: ['127.0.0.1'] },
        },
        webhooks: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        log: { level: 'info' },
      },
    });

    let run = 0;
    const start = (): ChildProcess => {
      run += 1;
      const child = spawn(process.execPath, [MAIN, 'run', '--config', cfg.configPath], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, LOG_LEVEL: 'info' },
      });
      child.stderr?.pipe(createWriteStream(join(logDir, `run-${run}.log`)));
      children.add(child);
      child.once('exit', () => children.delete(child));
      return child;
    };
    const acked = async (): Promise<number> => Object.keys((await p.counters()).acks).length;
    const kills: Array<{ afterAcks: number; delayMs: number; acksAtKill: number }> = [];
    for (let i = 0; i < KILLS; i++) {
      const before = await acked();
      const child = start();
      const wantAcks = 1 + Math.floor(random() * 3);
      const delayMs = Math.floor(random() * 150);
      await vi.waitFor(
        async () =>
          expect(
            await acked(),
            `run ${run} to acknowledge ${wantAcks} loan(s) (logs in ${logDir})`,
          ).toBeGreaterThanOrEqual(Math.min(LOANS, before + wantAcks)),
        { timeout: 60_000, interval: 25 },
      );
      await new Promise((r) => setTimeout(r, delayMs));
      child.kill('SIGKILL');
      expect((await exited(child)).signal).toBe('SIGKILL');
      kills.push({ afterAcks: wantAcks, delayMs, acksAtKill: await acked() });
    }
    expect(
      kills.every((k) => k.acksAtKill < LOANS),
      JSON.stringify({ seed, kills }),
    ).toBe(true);

    const last = start();
    const db = new Database(cfg.dbPath, { readonly: true, fileMustExist: true });
    try {
      await vi.waitFor(
        () => {
          const r = db
            .prepare(
              "SELECT COUNT(*) AS n FROM loans WHERE state IN ('acknowledged', 'quarantined', 'skipped')",
            )
            .get() as { n: number };
          expect(r.n, `all ${LOANS} loans settled (seed ${seed}, logs in ${logDir})`).toBe(LOANS);
        },
        { timeout: 120_000, interval: 25 },
      );
      expect(
        db
          .prepare("SELECT id, state, last_error_message AS error FROM loans WHERE state <> 'acknowledged'")
          .all(),
        'every loan acknowledged',
      ).toEqual([]);
    } finally {
      db.close();
    }
    last.kill('SIGTERM');
    expect(await exited(last)).toEqual({ code: 0, signal: null });

    const c = await p.counters();
    expect(c.rateLimited).toBe(0);
    expect(c.duplicateAcks).toEqual({});
    for (const id of released) expect(c.acks[id], `${id} (seed ${seed})`).toBe(1);
    // Mambu: refused nothing; one loan account and one disbursement per loan; one customer per tax id.
    expect(fake.refused(), `refused (seed ${seed})`).toEqual([]);
    expect(fake.contractViolations).toEqual([]);
    const refs = fake.loans
      .map((l) => (l.body['_boarding_Loans'] as { platformLoanId: string }).platformLoanId)
      .sort();
    expect(refs).toEqual(released.map(mambuRef).sort());
    expect(fake.loans.every((l) => l.accountState === 'ACTIVE')).toBe(true);
    expect(fake.transactions.map((t) => t.loanId).sort()).toEqual(fake.loans.map((l) => l.id).sort());
    const taxIds = [
      ...fake.clients.map((x) => (x.body['_taxInformation_Clients'] as { taxId: string }).taxId),
      ...fake.groups.map((x) => (x.body['_taxInformation_Groups'] as { taxId: string }).taxId),
    ];
    expect(taxIds.length, `a tax id with two customers (seed ${seed})`).toBe(new Set(taxIds).size);
    const docKeys = fake.documents.map((d) => `${d.ownerKey} ${d.notes ?? ''}`);
    expect(docKeys.length).toBe(new Set(docKeys).size);
    console.log(
      JSON.stringify({
        seed,
        kills,
        loans: fake.loans.length,
        clients: fake.clients.length,
        groups: fake.groups.length,
        documents: fake.documents.length,
        cached: fake.requests.filter((r) => r.fromCache).length,
        inFlight409: fake.requests.filter((r) => r.status === 409).length,
      }),
    );
  });
});
