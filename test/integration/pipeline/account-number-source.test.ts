import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRuntime, type BoardingRuntime } from '../../../src/app/runtime.js';
import { loadConfig } from '../../../src/config/load.js';
import type { BoardingPackage, CoreSystem } from '../../../src/core/port.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

const RATE = { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 60 };

/** A core that takes every board and keeps the packages it was given (the account number among them). */
function recordingCore(): CoreSystem & { packages: BoardingPackage[] } {
  const packages: BoardingPackage[] = [];
  return {
    name: 'recording',
    packages,
    board(pkg) {
      packages.push(pkg);
      return Promise.resolve({
        coreReference: `CORE-${pkg.loanId}`,
        loanExternalId: pkg.loanId,
        mappingVersion: pkg.mappingVersion,
        records: [],
        documents: [],
        boardedAt: new Date().toISOString(),
        accountNumber: null,
      });
    },
    findLoan: () => Promise.resolve(null),
    health: () => Promise.resolve({ ok: true }),
    close: () => Promise.resolve(),
  };
}

/**
 * Regression: the loan boarder fell back to `createAccountNumbers({source: 'pool'})` when it was
 * not given the account numbers, whatever identity.accountNumbers.source said. The boarder now
 * requires them; the app hands it the configured source.
 */
describe('identity.accountNumbers.source reaches the boarder the app builds', () => {
  let p: TestPlatform;
  const runtimes: BoardingRuntime[] = [];
  beforeAll(async () => {
    p = await startTestPlatform({ loans: 4, releaseRatio: 1, seed: 34, ...RATE });
  });
  afterAll(async () => {
    for (const rt of runtimes) await rt.close();
    await p.close();
  });

  async function runWith(source: 'pool' | 'core') {
    const cfg = writeConnectorConfig(p, {
      ...RATE,
      extra: {
        identity: { accountNumbers: { source } },
        customers: { tinHashKey: 'account-number-source-key-0123' },
      },
    });
    const config = loadConfig({
      env: {},
      filePath: cfg.configPath,
      fileText: readFileSync(cfg.configPath, 'utf8'),
    });
    const core = recordingCore();
    const rt = await buildRuntime(config, silentLogger(), { clock: systemClock, core });
    runtimes.push(rt);
    await rt.runner.run({ reason: 'test', settleMs: 0 });
    const rows = await rt.store.loans.list({});
    return { rt, core, rows };
  }

  it('with source core no loan takes a number from the pool', async () => {
    const { rt, rows } = await runWith('core');
    expect(rt.accountNumbers.source).toBe('core');
    // Every loan was fetched (the step that allocates from the pool) ...
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) expect(r.attempts).toBeGreaterThan(0);
    // ... and none holds a pool number.
    expect((await rt.store.numbers.usage('account')).used).toBe(0);
    for (const r of rows) {
      expect(r.accountNumber).toBeNull();
      expect(await rt.store.numbers.get('account', r.id)).toBeNull();
    }
  });

  it('with source pool (the same harness) every loan fetched holds a pool number', async () => {
    const { rt, core, rows } = await runWith('pool');
    expect(rows.length).toBeGreaterThan(0);
    expect((await rt.store.numbers.usage('account')).used).toBe(rows.length);
    expect(core.packages.length).toBeGreaterThan(0);
    for (const pkg of core.packages) expect(pkg.accountNumber).toMatch(/^\d+$/);
  });
});
