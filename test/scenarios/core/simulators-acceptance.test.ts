import { join } from 'node:path';
import { request } from 'node:http';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { fineractExternalId } from '../../../src/core/fineract/external-id.js';
import { mambuRef } from '../../../src/core/mambu/ids.js';
import { startFineractSimulator } from '../../../src/sandbox/cores/fineract/index.js';
import { startMambuSimulator } from '../../../src/sandbox/cores/mambu/index.js';
import {
  runCli,
  startTestPlatform,
  writeConnectorConfig,
  type TestPlatform,
} from '../../integration/pipeline/harness.js';

const LOANS = 30;
const RATES = { windowMs: 1000, readsPerWindow: 200, writesPerWindow: 60 };

/**
 * Issue 42's acceptance, for both HTTP core simulators with the DEFAULT tenant (what `sandbox
 * --core NAME` users get) and the block they print: the sandbox with repeat borrowers, the widest
 * legal loans (`amounts: 'extreme'`) and platform faults (5xx, dropped connections, answers lost
 * after commit, slow bodies), `sync --once` until done. Every loan acknowledged (none
 * quarantined), 0 requests refused, one loan per platform loan, one customer per tax id.
 */
async function syncUntilDone(
  p: TestPlatform,
  core: Record<string, unknown>,
  mappings: string,
): Promise<void> {
  await p.setFaults(
    [
      { route: '*', status5xxRate: 0.05, resetRate: 0.03, slowBodyRate: 0.05, slowBodyMs: 300 },
      { route: 'POST /public/v1/loans/:id/boarding', resetAfterCommitRate: 0.15 },
    ],
    42,
  );
  const cfg = writeConnectorConfig(p, {
    ...RATES,
    mappingsDir: join(process.cwd(), 'mappings', mappings),
    extra: {
      core,
      customers: { tinHashKey: 'acceptance-key-0123456789' },
      boarding: {
        concurrency: 4,
        retryBaseMs: 10,
        retryMaxMs: 50,
        maxAttempts: 50,
        documentHosts: { allow: ['127.0.0.1'] },
      },
    },
  });
  let last: { states: Record<string, number>; problems: Array<{ state: string }> } = {
    states: {},
    problems: [],
  };
  for (let round = 0; round < 10; round++) {
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.error, r.stdout).toBeNull();
    last = JSON.parse(r.stdout) as typeof last;
    // A loan waiting after an injected fault (retry_wait) is expected here; the next round boards it.
    const decided = last.problems.filter((q) => q.state === 'quarantined' || q.state === 'skipped');
    expect(decided, 'nothing quarantined or skipped').toEqual([]);
    if ((last.states['acknowledged'] ?? 0) === LOANS) break;
  }
  expect(last.states['acknowledged'], JSON.stringify(last.states)).toBe(LOANS);
  const c = await p.counters();
  for (const id of Object.keys(c.acks)) expect(c.acks[id], id).toBe(1);
  expect(Object.keys(c.acks)).toHaveLength(LOANS);
}

async function platform(seed: number): Promise<{ p: TestPlatform; released: string[] }> {
  const p = await startTestPlatform({
    loans: LOANS,
    releaseRatio: 1,
    seed,
    repeatBorrowers: 0.3,
    amounts: 'extreme',
    ...RATES,
  });
  const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
  return { p, released: list.data.map((l) => l.id) };
}

describe('the core simulators, default tenant: every legal loan boards', () => {
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
  });

  it('Fineract: every loan boards once, nothing refused, one client per tax id', async () => {
    const { p, released } = await platform(4201);
    closers.push(() => p.close());
    const sim = await startFineractSimulator();
    closers.push(() => sim.close());
    const block = sim.coreBlock();
    await syncUntilDone(p, { ...block, http: { ...(block['http'] as object), timeoutMs: 5000 } }, 'fineract');
    expect(sim.writes().filter((w) => w.status >= 400)).toEqual([]);
    expect(sim.contractRefusals).toEqual([]);
    expect(sim.contractViolations).toEqual([]);
    expect(sim.loans.map((l) => l.externalId).sort()).toEqual(released.map(fineractExternalId).sort());
    const clients = sim.clients.map((c) => c.externalId);
    expect(clients.length).toBe(new Set(clients).size);
    const taxIds = sim.identifiers.map((i) => `${i.documentTypeId}/${i.documentKey}`);
    expect(taxIds.length).toBe(new Set(taxIds).size);
    // Repeat borrowers were met: a client holds more than one loan.
    const perClient = new Map<number, number>();
    for (const l of sim.loans) perClient.set(l.clientId, (perClient.get(l.clientId) ?? 0) + 1);
    expect([...perClient.values()].some((n) => n > 1)).toBe(true);
  }, 40_000);

  it('Mambu: every loan boards once, nothing refused, one customer per tax id', async () => {
    const { p, released } = await platform(4202);
    closers.push(() => p.close());
    const sim = await startMambuSimulator();
    closers.push(() => sim.close());
    await syncUntilDone(p, sim.coreBlock(), 'mambu');
    expect(sim.refused()).toEqual([]);
    const refs = sim.loans
      .map((l) => (l.body['_boarding_Loans'] as { platformLoanId: string }).platformLoanId)
      .sort();
    expect(refs).toEqual(released.map(mambuRef).sort());
    const taxIds = [
      ...sim.clients.map((x) => (x.body['_taxInformation_Clients'] as { taxId: string }).taxId),
      ...sim.groups.map((x) => (x.body['_taxInformation_Groups'] as { taxId: string }).taxId),
    ];
    expect(taxIds.length).toBe(new Set(taxIds).size);
  }, 40_000);
});

describe('the Fineract simulator, a client gone mid-body', () => {
  it('records no refusal for an upload whose client died before the body arrived', async () => {
    const sim = await startFineractSimulator();
    try {
      const url = new URL(`${sim.url}/loans/1/documents`);
      const req = request({
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: {
          'content-type': 'multipart/form-data; boundary=x',
          'content-length': '100000',
          'fineract-platform-tenantid': sim.tenantId,
          authorization: `Basic ${Buffer.from(`${sim.username}:${sim.password}`).toString('base64')}`,
        },
      });
      req.on('error', () => undefined);
      req.write('--x\r\ncontent-disposition: form-data; name="file"\r\n\r\npartial');
      await new Promise((r) => setTimeout(r, 100));
      req.destroy();
      await vi.waitFor(() => expect(sim.requests).toHaveLength(1), { timeout: 5000 });
      expect(sim.requests[0]).toMatchObject({
        path: '/fineract-provider/api/v1/loans/1/documents',
        status: 0,
      });
      expect(sim.writes().filter((w) => w.status >= 400)).toEqual([]);
    } finally {
      await sim.close();
    }
  });
});
