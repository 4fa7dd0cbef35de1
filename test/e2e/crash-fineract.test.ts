import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fineractExternalId } from '../../src/core/fineract/external-id.js';
import { startFineractSimulator, type FineractSimulator } from '../../src/sandbox/cores/fineract/index.js';
import { crashSeed, runCrashLoop, startCrashPlatform, type CrashPlatform } from '../support/crash-loop.js';

const LOANS = 60;
const KILLS = 10;

/**
 * Crash safety against Apache Fineract (issue 42): the daemon boards into the Fineract simulator
 * (`sandbox --core fineract`'s, its default tenant and core block, approve and disburse on) and is
 * SIGKILLed at ten random moments, with Fineract also losing answers after it committed, on every
 * kind of write. Every loan must end acknowledged once, with exactly one Fineract loan (approved
 * and disbursed) per platform loan, one client per tax id, and 0 requests Fineract refused.
 */
describe('crash loop into Fineract', () => {
  let cp: CrashPlatform;
  let sim: FineractSimulator;
  const children = new Set<ChildProcess>();

  beforeAll(async () => {
    cp = await startCrashPlatform({ loans: LOANS, seed: 42, name: 'fineract' });
    sim = await startFineractSimulator();
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await sim?.close();
    await cp?.p.close();
  });

  it('loses nothing and boards nothing twice across ten SIGKILLs', async () => {
    expect(cp.released).toHaveLength(LOANS);
    const seed = crashSeed();
    // Fineract commits and the answer is lost (connection reset, or a 5xx from a proxy), now and
    // then, on every kind of write the adapter makes.
    for (const path of ['/clients', '/loans', /^\/clients\/\d+\/identifiers$/, /^\/loans\/\d+\/guarantors$/])
      sim.inject({ method: 'POST', path, kind: 'reset-after-commit', times: 2 });
    sim.inject({ method: 'POST', path: /^\/loans\/\d+\/documents$/, kind: 'reset-after-commit', times: 2 });
    sim.inject({
      method: 'POST',
      path: /^\/loans\/\d+$/,
      kind: 'status-after-commit',
      status: 502,
      times: 3,
    });
    sim.inject({ method: 'POST', path: '/loans', kind: 'status-before', status: 503, times: 2 });
    const block = sim.coreBlock();
    const { kills } = await runCrashLoop(cp, {
      seed,
      kills: KILLS,
      children,
      mappingsDir: join(process.cwd(), 'mappings/fineract'),
      core: { ...block, http: { ...(block['http'] as object), disburse: true, timeoutMs: 5000 } },
    });

    // Fineract refused nothing: every failed write is a fault injected here, none a refusal.
    const refused = sim.writes().filter((w) => w.status >= 400 && w.fault === null);
    expect(refused, `refused (seed ${seed})`).toEqual([]);
    expect(sim.contractRefusals).toEqual([]);
    expect(sim.contractViolations).toEqual([]);
    // One loan per platform loan, approved and disbursed (300: active).
    expect(sim.loans.map((l) => l.externalId).sort()).toEqual(cp.released.map(fineractExternalId).sort());
    expect(sim.loans.filter((l) => l.statusId !== 300)).toEqual([]);
    // One client per borrower and per tax id.
    const clientRefs = sim.clients.map((c) => c.externalId);
    expect(clientRefs.length, `a borrower with two clients (seed ${seed})`).toBe(new Set(clientRefs).size);
    const taxIds = sim.identifiers.map((i) => `${i.documentTypeId}/${i.documentKey}`);
    expect(taxIds.length, `a tax id on two clients (seed ${seed})`).toBe(new Set(taxIds).size);
    const withTaxId = sim.identifiers.map((i) => i.clientId);
    expect(withTaxId.length, `a client with two tax ids (seed ${seed})`).toBe(new Set(withTaxId).size);
    // Repeat borrowers were met: some client holds more than one loan.
    const perClient = new Map<number, number>();
    for (const l of sim.loans) perClient.set(l.clientId, (perClient.get(l.clientId) ?? 0) + 1);
    expect([...perClient.values()].some((n) => n > 1)).toBe(true);
    const docKeys = sim.documents.map(
      (d) => `${d.loanId} ${/\[doc:[^\]]*\]/.exec(d.description)?.[0] ?? d.description}`,
    );
    expect(docKeys.length, `a document twice (seed ${seed})`).toBe(new Set(docKeys).size);
    const guarantors = sim.guarantors.map(
      (g) => `${g.loanId} ${g.entityId ?? `${g.firstname} ${g.lastname}`}`,
    );
    expect(guarantors.length, 'a guarantor twice').toBe(new Set(guarantors).size);
    console.log(
      JSON.stringify({
        seed,
        kills,
        loans: sim.loans.length,
        clients: sim.clients.length,
        identifiers: sim.identifiers.length,
        guarantors: sim.guarantors.length,
        documents: sim.documents.length,
        cached: sim.requests.filter((r) => r.fromCache).length,
        inFlight425: sim.requests.filter((r) => r.status === 425).length,
      }),
    );
  });
});
