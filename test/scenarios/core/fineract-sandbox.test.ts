import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import {
  runCli,
  startTestPlatform,
  writeConnectorConfig,
  type TestPlatform,
} from '../../integration/pipeline/harness.js';

/**
 * Acceptance for the Fineract profile: sandbox loans through the real pipeline, the shipped
 * fineract mapping set and the adapter into a fake as strict as Fineract (approve on). Every loan
 * either boards whole, or is quarantined before Fineract refused anything: Fineract never answers
 * a write with a refusal other than the duplicate the adapter recovers from.
 */
describe('sync --once with the fineract set into a strict fake Fineract', () => {
  let p: TestPlatform;
  let fake: FakeFineract;

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 40,
      releaseRatio: 1,
      seed: 7,
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

  it('boards what Fineract can hold, quarantines the rest with a reason, and Fineract refuses nothing', async () => {
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
      mappingsDir: join(process.cwd(), 'mappings/fineract'),
      extra: {
        // The block `sandbox --core fineract` prints, as a user pastes it.
        core: { ...fake.coreBlock(), http: { ...(fake.coreBlock()['http'] as object), timeoutMs: 5000 } },
      },
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.error).toBeNull();
    const summary = JSON.parse(r.stdout) as {
      fatal: unknown;
      states: Record<string, number>;
      problems: Array<{ loanId: string; state: string; code: string; message: string }>;
    };
    expect(summary.fatal).toBeNull();
    const acknowledged = summary.states['acknowledged'] ?? 0;
    expect(acknowledged).toBeGreaterThan(20);
    expect(acknowledged + summary.problems.length).toBe(40);
    for (const q of summary.problems) {
      expect(q.state).toBe('quarantined');
      expect(q.message.length).toBeGreaterThan(10);
    }
    // What boarded is whole, once: one loan per external id, approved, with its identifiers.
    const loanIds = fake.loans.map((l) => l.externalId);
    expect(new Set(loanIds).size).toBe(loanIds.length);
    expect(loanIds.length).toBe(acknowledged);
    expect(fake.loans.every((l) => l.statusId === 200)).toBe(true);
    expect(fake.identifiers.length).toBeGreaterThan(0);
    // Nothing the connector sent was refused by Fineract's rules (keys, documents, grace, ...).
    const refused = fake.writes().filter((w) => w.status >= 400);
    expect(refused).toEqual([]);
    // Every request fits Fineract's published contract; every answer fits its response schemas.
    expect(fake.contractRefusals).toEqual([]);
    expect(fake.contractViolations).toEqual([]);
    // Every key fits Fineract's column.
    expect(fake.requests.filter((q) => (q.idempotencyKey?.length ?? 0) > 50)).toEqual([]);
  });
});
