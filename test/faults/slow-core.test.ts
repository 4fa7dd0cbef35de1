import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fineractExternalId } from '../../src/core/fineract/external-id.js';
import { runCli } from '../integration/pipeline/harness.js';
import { startFakeFineract, type FakeFineract } from '../support/fake-fineract.js';
import {
  gauge,
  logLines,
  readyzWhen,
  report,
  startSingle,
  until,
  type SingleSet,
} from './support/harness.js';

/**
 * A slow and failing core (issue 37), the fake Fineract (test/support/fake-fineract.ts, as strict
 * as the real one). Time is scaled down 10×: the core answers in 2–4 s against a 3 s timeout
 * (a bank's 20–40 s against 30 s), so about half the slow writes time out and commit later.
 *   1. a 503 storm: `sync --once` stops its pass and exits 5; the daemon stops its pass, /readyz
 *      fails (check `core`), boarding_core_outage is 1, one ALERT line;
 *   2. the storm ends, the core turns slow and drops connections after committing (client, loan,
 *      document) or answers 500 after committing: boarding resumes by itself;
 * then every loan is in Fineract once, every borrower is one client, no document twice, every loan
 * acknowledged once, 0 × 429. Prints the recovery time (storm over → next acknowledgement).
 */
const LOANS = Number(process.env['FAULTS_CORE_LOANS'] ?? 40);
const RATE = { windowMs: 1000, readsPerWindow: 100, writesPerWindow: 30 };
let fake: FakeFineract | null = null;
const sets: SingleSet[] = [];
afterAll(async () => {
  for (const s of sets) await s.close().catch(() => undefined);
  await fake?.close();
});

describe('a slow and failing core (Fineract)', () => {
  it('no duplicate client, loan or document through slow answers, commits then drops, and a 503 storm; an outage stops the pass and resumes', async () => {
    fake = await startFakeFineract();
    const f = fake;
    const core = {
      adapter: 'http',
      http: {
        baseUrl: f.url,
        username: f.username,
        password: f.password,
        tenantId: f.tenantId,
        timeoutMs: 3000,
      },
    };
    const set = await startSingle({
      loans: LOANS,
      seed: 21,
      ...RATE,
      config: {
        core,
        mappings: { dir: join(process.cwd(), 'mappings/fineract') },
        customers: { tinHashKey: 'faults-test-key-0123456789abcdef' },
        boarding: {
          concurrency: 4,
          retryBaseMs: 300,
          retryMaxMs: 3000,
          maxAttempts: 1000,
          shutdownTimeoutMs: 5000,
          minFreeDiskMb: 1,
          documentHosts: { allow: ['127.0.0.1'] },
        },
      },
    });
    sets.push(set);
    const ctx = `slow core (logs in ${set.logDir})`;

    // 1. The storm.
    f.inject({ path: /.*/, kind: 'status-before', status: 503, times: 1_000_000 });
    const once = await runCli(['--config', set.configPath, 'sync', '--once', '--json', '--settle-ms', '0']);
    expect(once.code, `${ctx}: sync --once in a core outage: ${once.error}`).toBe(5);
    expect(once.error, ctx).toContain('core was unavailable');
    set.replica.start();
    const down = await readyzWhen(
      set.replica,
      `${ctx}: /readyz reports the outage`,
      (z) => z.checks['core']?.ok === false,
      60_000,
    );
    expect(down.ready, ctx).toBe(false);
    expect(down.checks['core']?.detail, ctx).toMatch(/^CORE OUTAGE since .*: \d+ writes in a row failed/);
    expect(
      gauge((await set.replica.metrics()) ?? '', 'boarding_core_outage'),
      `${ctx}: boarding_core_outage`,
    ).toBe(1);
    // A few drain ticks (every 2 s) meet the storm: still one ALERT line (once a minute).
    await new Promise((r) => setTimeout(r, 8000));
    const alerts = logLines(set.logDir).filter((l) => l['alert'] === 'core.outage' && l['level'] === 50);
    expect(alerts.length, `${ctx}: core outage ALERT lines`).toBe(1);
    expect(f.loans, `${ctx}: nothing written during the storm`).toHaveLength(0);

    // 2. Slow, and dropping answers after committing.
    f.faults.length = 0;
    const stormOverAt = Date.now();
    for (let i = 0; i < 8; i++) {
      const delayMs = 2000 + i * 285;
      f.inject({ method: 'POST', path: '/loans', kind: 'delay', delayMs, times: 2 });
      f.inject({ method: 'POST', path: '/clients', kind: 'delay', delayMs, times: 2 });
    }
    f.inject({ method: 'POST', path: '/loans', kind: 'reset-after-commit', times: 4 });
    f.inject({ method: 'POST', path: '/clients', kind: 'reset-after-commit', times: 3 });
    f.inject({ method: 'POST', path: /^\/loans\/\d+\/documents$/, kind: 'reset-after-commit', times: 3 });
    f.inject({ method: 'POST', path: '/loans', kind: 'status-after-commit', status: 500, times: 2 });
    const acked = async (): Promise<number> => set.acked();
    const resumedAt = await until(
      `${ctx}: boarding resumes by itself`,
      async () => ((await acked()) > 0 ? Date.now() : undefined),
      120_000,
      100,
    );
    await until(
      `${ctx}: all ${LOANS} acknowledged`,
      async () => ((await acked()) >= LOANS ? true : undefined),
      600_000,
      250,
    );
    const up = await readyzWhen(
      set.replica,
      `${ctx}: /readyz without the outage`,
      (z) => z.checks['core']?.ok === true,
      30_000,
    );
    expect(up.checks['core']?.ok, ctx).toBe(true);
    set.replica.signal('SIGTERM');
    expect(await set.replica.exited(), `${ctx}: SIGTERM`).toEqual({ code: 0, signal: null });

    const unused = f.faults
      .filter((x) => (x.times ?? 0) > 0)
      .map((x) => `${x.kind} ${String(x.path)} ×${x.times}`);
    const c = await set.platform.counters();
    expect(c.rateLimited, `${ctx}: 429s`).toBe(0);
    expect(c.duplicateAcks, ctx).toEqual({});
    expect(
      set.released.filter((id) => c.acks[id] !== 1),
      `${ctx}: loans not acknowledged exactly once`,
    ).toEqual([]);
    // One Fineract loan per platform loan.
    const loanIds = f.loans.map((l) => l.externalId);
    expect(loanIds.length, `${ctx}: Fineract loans`).toBe(LOANS);
    expect(new Set(loanIds).size, `${ctx}: distinct loan external ids`).toBe(LOANS);
    expect([...loanIds].sort(), ctx).toEqual(set.released.map(fineractExternalId).sort());
    // One client per borrower: no external id twice, no tax id on two clients.
    const clientIds = f.clients.map((x) => x.externalId).filter((x): x is string => x !== null);
    expect(clientIds.length - new Set(clientIds).size, `${ctx}: duplicate client external ids`).toBe(0);
    const perKey = new Map<string, number>();
    for (const i of f.identifiers)
      perKey.set(
        `${i.documentTypeId}:${i.documentKey}`,
        (perKey.get(`${i.documentTypeId}:${i.documentKey}`) ?? 0) + 1,
      );
    expect(
      [...perKey.values()].filter((n) => n > 1),
      `${ctx}: a tax id on two clients`,
    ).toEqual([]);
    // No document twice on a loan.
    // Fineract has no external id on documents: the connector marks each upload `[doc:<platform id>]`
    // in its description (two platform documents may well share a name and bytes).
    const docs = new Map<string, number>();
    for (const d of f.documents) {
      const marker = /\[doc:[^\]]+\]/.exec(d.description)?.[0] ?? `no marker: ${d.id}`;
      docs.set(`${d.loanId}/${marker}`, (docs.get(`${d.loanId}/${marker}`) ?? 0) + 1);
    }
    expect(
      [...docs].filter(([, n]) => n > 1),
      `${ctx}: documents uploaded twice`,
    ).toEqual([]);
    const faulted = f.requests.filter((r) => r.fault !== null);
    report('slow and failing core', {
      loans: LOANS,
      clients: f.clients.length,
      documents: f.documents.length,
      faults: Object.fromEntries(
        ['status-before', 'delay', 'reset-after-commit', 'status-after-commit'].map((k) => [
          k,
          faulted.filter((r) => r.fault === k).length,
        ]),
      ),
      unusedFaults: unused,
      recoveryMs: resumedAt - stormOverAt,
    });
  });
});
