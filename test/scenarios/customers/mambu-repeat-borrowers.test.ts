import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxState } from '../../../src/sandbox/state.js';
import { mambuRef } from '../../../src/core/mambu/ids.js';
import { startFakeMambu, type FakeMambu } from '../../support/fake-mambu.js';
import {
  runCli,
  startTestPlatform,
  writeConnectorConfig,
  type TestPlatform,
} from '../../integration/pipeline/harness.js';

const SEED = 11;
const LOANS = 30;
const SHARE = 0.4;

/**
 * The whole pipeline (`sync --once`) from the sandbox into the strict fake Mambu, with repeat
 * borrowers (40 % of loans reuse a business or person under a new platform id) and a bank customer
 * already in Mambu: one client per SSN, one group per EIN, one loan and one disbursement per loan,
 * every loan acknowledged, and Mambu refused nothing the connector sent.
 */
describe('repeat borrowers into the strict fake Mambu (sync --once)', () => {
  let p: TestPlatform;
  let fake: FakeMambu;
  const state = new SandboxState(SEED, () => Date.UTC(2025, 5, 1), 'mixed', SHARE);
  state.generate(LOANS, { releaseRatio: 1 });

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: LOANS,
      releaseRatio: 1,
      seed: SEED,
      repeatBorrowers: SHARE,
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
    });
    fake = await startFakeMambu();
  });
  afterAll(async () => {
    await fake?.close();
    await p?.close();
  });

  it('boards every loan once; every repeat borrower is one client or group; 0 refused requests', async () => {
    const tins = new Map<string, Set<string>>();
    for (const loan of state.loans.values()) {
      for (const b of loan.businesses)
        if (b.ein)
          tins.set(b.ein.replace(/\D/g, ''), (tins.get(b.ein.replace(/\D/g, '')) ?? new Set()).add(b.id));
      for (const x of loan.people)
        tins.set(x.ssn.replace(/\D/g, ''), (tins.get(x.ssn.replace(/\D/g, '')) ?? new Set()).add(x.id));
    }
    expect([...tins.values()].some((s) => s.size > 1)).toBe(true);
    // A bank customer already in Mambu (made by a teller, dashed EIN): matched by tax id, not doubled.
    const firstLoan = [...state.loans.values()].find((l) => l.boarding !== null && l.businesses[0]?.ein)!;
    const banked = firstLoan.businesses[0]!;
    const teller = fake.seedGroup({ id: '7001', groupName: banked.name.toUpperCase(), taxId: banked.ein! });

    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
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
        customers: { tinHashKey: 'test-key-0123456789abcdef' },
      },
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.error).toBeNull();
    const summary = JSON.parse(r.stdout) as {
      states: Record<string, number>;
      problems: Array<{ loanId: string; code: string; message: string }>;
    };
    expect(fake.refused()).toEqual([]);
    expect(fake.contractViolations).toEqual([]);
    expect(summary.problems.filter((q) => q.code.startsWith('core.'))).toEqual([]);
    // One customer per tax id in Mambu.
    const taxIds = [
      ...fake.clients.map(
        (c) => (c.body['_taxInformation_Clients'] as { taxId?: string } | undefined)?.taxId,
      ),
      ...fake.groups.map((g) => (g.body['_taxInformation_Groups'] as { taxId?: string } | undefined)?.taxId),
    ]
      .filter((t): t is string => t !== undefined)
      .map((t) => t.replace(/\D/g, ''));
    expect(taxIds.length).toBe(new Set(taxIds).size);
    expect(
      fake.groups.filter(
        (g) =>
          (g.body['_taxInformation_Groups'] as { taxId: string }).taxId.replace(/\D/g, '') ===
          banked.ein!.replace(/\D/g, ''),
      ),
    ).toHaveLength(1);
    // The teller's group holds that loan.
    const loanOfTeller = fake.loans.find(
      (l) =>
        (l.body['_boarding_Loans'] as { platformLoanId: string }).platformLoanId ===
        mambuRef(firstLoan.fields.id),
    );
    expect(loanOfTeller?.body['accountHolderKey']).toBe(teller.encodedKey);
    // Every boarded loan: one account, approved by one user, disbursed once by the other.
    const acknowledged = summary.states['acknowledged'] ?? 0;
    expect(acknowledged).toBeGreaterThan(20);
    expect(fake.loans).toHaveLength(acknowledged);
    expect(
      new Set(fake.loans.map((l) => (l.body['_boarding_Loans'] as { platformLoanId: string }).platformLoanId))
        .size,
    ).toBe(fake.loans.length);
    expect(fake.transactions).toHaveLength(fake.loans.length);
    expect(fake.loans.every((l) => l.approvedBy === 'approver' && l.disbursedBy === 'disburser')).toBe(true);
    // A second pass finds everything boarded: nothing new is written.
    const writes = fake.writes().length;
    const again = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(again.error).toBeNull();
    expect(fake.writes()).toHaveLength(writes);

    // Reconciliation reads the loans back from Mambu: every acknowledged loan is there, none unknown.
    const out = join(cfg.dir, 'reports');
    const rec = await runCli(['--config', cfg.configPath, 'reconcile', '--out', out]);
    expect(rec.error).toBeNull();
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      exceptions: Array<{ reason: string; loanId: string; detail?: string }>;
    };
    const byReason = (r: string) => report.exceptions.filter((e) => e.reason === r);
    expect(byReason('acknowledged_missing_in_core')).toEqual([]);
    expect(byReason('in_core_unknown_to_connector')).toEqual([]);
    expect(byReason('in_core_not_acknowledged')).toEqual([]);

    // config check --connect reaches Mambu with these credentials, finds the set's products and custom fields.
    const check = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect']);
    expect(check.stdout).toMatch(
      /ok\s+core\s+Mambu at http:\/\/127\.0\.0\.1:\d+\/api accepts core\.mambu\.auth \(user approver\)/,
    );
    expect(check.stdout).toMatch(
      /ok\s+core\.products\s+loan products the mapping set uses exist: personal-loan \(Personal loan\), term-loan \(Term loan\), variable-term-loan/,
    );
    expect(check.stdout).toMatch(
      /ok\s+core\.customFields\s+custom field sets exist: _taxInformation_Clients \(taxId\)/,
    );
  }, 120_000);
});
