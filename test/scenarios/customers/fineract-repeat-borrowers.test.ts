import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { SandboxState } from '../../../src/sandbox/state.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import {
  runCli,
  startTestPlatform,
  writeConnectorConfig,
  type TestPlatform,
} from '../../integration/pipeline/harness.js';
import { fineractExternalId } from '../../../src/core/fineract/external-id.js';

const SEED = 11;
const LOANS = 40;
const SHARE = 0.4;

/** The sandbox's data for these options, rebuilt here (the generator is deterministic per seed). */
function sandboxData() {
  const state = new SandboxState(SEED, () => Date.UTC(2025, 5, 1), 'mixed', SHARE);
  state.generate(LOANS, { releaseRatio: 1 });
  return state;
}

/**
 * Repeat borrowers into a Fineract as strict as the real one: one (document type, key) per client
 * identifier across all clients. The adapter before customer matching created a second client for a
 * repeat borrower under a new platform entity id, and Fineract then refused its tax id
 * (error.msg.clientIdentifier.identityKey.duplicate): 10 of 40 loans quarantined as core_rejected,
 * each leaving a second client behind.
 */
describe('repeat borrowers into a strict fake Fineract', () => {
  let p: TestPlatform;
  let fake: FakeFineract;
  const data = sandboxData();
  const tinOf = new Map<string, string>();
  for (const loan of data.loans.values()) {
    for (const b of loan.businesses) if (b.ein) tinOf.set(b.id, b.ein);
    for (const x of loan.people) tinOf.set(x.id, x.ssn);
  }

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
    fake = await startFakeFineract();
  });
  afterAll(async () => {
    await fake.close();
    await p.close();
  });

  it('boards every repeat borrower onto one client: no second client, no refused identifier', async () => {
    // The sandbox really repeats: some TIN is on several loans, under several entity ids.
    const entitiesPerTin = new Map<string, Set<string>>();
    for (const [id, tin] of tinOf) entitiesPerTin.set(tin, (entitiesPerTin.get(tin) ?? new Set()).add(id));
    expect([...entitiesPerTin.values()].some((s) => s.size > 1)).toBe(true);
    // A bank customer already in Fineract (created by a teller, no external id): reused, not duplicated.
    const firstLoan = [...data.loans.values()].find((l) => l.boarding !== null && l.businesses[0]?.ein)!;
    const banked = firstLoan.businesses[0]!;
    const teller = fake.seedClient({
      fullname: banked.name.toUpperCase(),
      identifiers: [{ documentTypeId: 2, documentKey: banked.ein! }],
    });

    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
      mappingsDir: join(process.cwd(), 'mappings/fineract'),
      extra: {
        core: {
          adapter: 'http',
          http: {
            baseUrl: fake.url,
            username: fake.username,
            password: fake.password,
            tenantId: fake.tenantId,
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
      problems: Array<{ loanId: string; state: string; code: string; message: string }>;
    };
    // Fineract refused nothing the connector sent: no duplicate identifier, no duplicate external id.
    expect(fake.writes().filter((w) => w.status >= 400)).toEqual([]);
    expect(summary.problems.filter((q) => q.code === 'core.rejected')).toEqual([]);
    // One client per distinct TIN: every client holds exactly one identifier, no two clients share a TIN.
    const clientsPerKey = new Map<string, number>();
    for (const i of fake.identifiers)
      clientsPerKey.set(i.documentKey, (clientsPerKey.get(i.documentKey) ?? 0) + 1);
    expect([...clientsPerKey.values()].every((n) => n === 1)).toBe(true);
    const withIdentifier = new Set(fake.identifiers.map((i) => i.clientId));
    expect(fake.clients.filter((c) => !withIdentifier.has(c.id)).map((c) => c.externalId)).toEqual([]);
    // The teller's client is the borrower of that loan: no second client for it.
    expect(
      fake.clients.filter((c) =>
        fake.identifiers.some((i) => i.clientId === c.id && i.documentKey === banked.ein),
      ),
    ).toHaveLength(1);
    const boardedFirst = fake.loans.find((l) => l.externalId === fineractExternalId(firstLoan.fields.id));
    expect(boardedFirst?.clientId).toBe(teller.id);
    expect(summary.states['acknowledged'] ?? 0).toBeGreaterThan(25);
    // New clients per distinct TIN: exactly 1 for each TIN on a boarded loan, 0 for the teller's.
    const boardedTins = new Set<string>();
    // Fineract holds path-safe externalIds (a digest for a long or odd platform id).
    const byExternalId = new Map(
      [...data.loans.entries()].map(([id, loan]) => [fineractExternalId(id), loan]),
    );
    for (const l of fake.loans) {
      const loan = byExternalId.get(l.externalId!)!;
      for (const b of loan.businesses) if (b.ein) boardedTins.add(b.ein);
      for (const x of loan.people) boardedTins.add(x.ssn);
    }
    expect(fake.clients.length).toBe(boardedTins.size);
    expect(fake.clients.filter((c) => c.externalId !== null)).toHaveLength(boardedTins.size - 1);
  });
});
