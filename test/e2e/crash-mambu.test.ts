import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mambuRef } from '../../src/core/mambu/ids.js';
import { crashSeed, runCrashLoop, startCrashPlatform, type CrashPlatform } from '../support/crash-loop.js';
import { startFakeMambu, type FakeMambu } from '../support/fake-mambu.js';

const LOANS = 60;
const KILLS = 10;

/**
 * Crash safety against Mambu (issue 35): the daemon boards into the strict fake Mambu (approve with
 * one user, disburse with another) and is SIGKILLed at ten random moments, with Mambu also losing
 * some answers after it committed. Every loan must end acknowledged once, with exactly one loan
 * account, one disbursement, one customer per tax id, and 0 requests Mambu refused.
 */
describe('crash loop into Mambu', () => {
  let cp: CrashPlatform;
  let fake: FakeMambu;
  const children = new Set<ChildProcess>();

  beforeAll(async () => {
    cp = await startCrashPlatform({ loans: LOANS, seed: 35, name: 'mambu' });
    fake = await startFakeMambu();
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await fake?.close();
    await cp?.p.close();
  });

  it('loses nothing and boards nothing twice across ten SIGKILLs', async () => {
    expect(cp.released).toHaveLength(LOANS);
    const seed = crashSeed();
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
    const { kills } = await runCrashLoop(cp, {
      seed,
      kills: KILLS,
      children,
      mappingsDir: join(process.cwd(), 'mappings/mambu'),
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
    });

    // Mambu: refused nothing; one loan account and one disbursement per loan; one customer per tax id.
    expect(fake.refused(), `refused (seed ${seed})`).toEqual([]);
    expect(fake.contractViolations).toEqual([]);
    const refs = fake.loans
      .map((l) => (l.body['_boarding_Loans'] as { platformLoanId: string }).platformLoanId)
      .sort();
    expect(refs).toEqual(cp.released.map(mambuRef).sort());
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
