import { readFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildRuntime, type BoardingRuntime } from '../../../src/app/runtime.js';
import { loadConfig } from '../../../src/config/load.js';
import { FileCore } from '../../../src/core/file/file-core.js';
import type { CoreSystem } from '../../../src/core/port.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

/**
 * Two loans with the same tax id in flight at once: the first one's core write is held until the
 * second one has been fetched from the platform (and so is resolving its customers). The second waits for the first
 * (the per-tax-id lock) and then references the customer it created: one customer record, both
 * loans boarded in the same cycle, none parked in retry_wait.
 */
describe('loans sharing a tax id in flight together', () => {
  let p: TestPlatform;
  let rt: BoardingRuntime | undefined;

  beforeAll(async () => {
    // Every loan after the first takes an earlier loan's borrower: they all share one tax id.
    p = await startTestPlatform({
      loans: 6,
      releaseRatio: 1,
      seed: 3,
      repeatBorrowers: 1,
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
    });
  });
  afterAll(async () => {
    await rt?.close();
    await p.close();
  });

  it('creates one customer; the second loan waits for the first write and references it', async () => {
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
      extra: { customers: { tinHashKey: 'in-flight-test-key-0123456789' } },
    });
    const config = loadConfig({
      env: {},
      filePath: cfg.configPath,
      fileText: readFileSync(cfg.configPath, 'utf8'),
    });
    const inner = new FileCore({
      clock: systemClock,
      dir: cfg.coreDir,
      timeZone: 'America/Chicago',
      logger: silentLogger(),
    });
    let held = false;
    const core: CoreSystem = {
      name: 'file',
      async board(pkg, o) {
        if (!held) {
          held = true;
          // Hold the first write until another loan has been fetched: it is resolving now (or waiting
          // for the tax id's lock). Seen at the platform: a loan's fetched state now commits with its
          // mapping (issue 44 item 5), after the lock, so no state shows it.
          await vi.waitFor(
            async () =>
              expect((await p.counters()).requests['GET /public/v1/loans/:id/entities'] ?? 0).toBeGreaterThan(
                1,
              ),
            { timeout: 15_000, interval: 20 },
          );
        }
        return inner.board(pkg, o);
      },
      findLoan: (id) => inner.findLoan(id),
      health: () => inner.health(),
      close: () => inner.close(),
    };
    rt = await buildRuntime(config, silentLogger(), { clock: systemClock, core });
    const summary = await rt.runner.run({ reason: 'test', settleMs: 0 });
    expect(summary.problems.filter((q) => q.code.startsWith('customer'))).toEqual([]);
    const rows = await rt.store.loans.list({});
    expect(rows.length).toBeGreaterThan(2);
    const boarded = rows.filter((r) => r.state === 'acknowledged').map((r) => r.id);
    // Per tax id hash: exactly one loan created the customer, every other loan references it.
    const perTin = new Map<string, { created: number; referenced: number }>();
    for (const id of boarded) {
      for (const c of await rt.store.customers.forLoan(id)) {
        const t = perTin.get(c.tinHash!) ?? { created: 0, referenced: 0 };
        if (c.existing) t.referenced += 1;
        else t.created += 1;
        perTin.set(c.tinHash!, t);
      }
    }
    expect([...perTin.values()].every((t) => t.created === 1)).toBe(true);
    expect([...perTin.values()].some((t) => t.referenced >= 1)).toBe(true);
    // And in the core: one customer record per tax id across the packages.
    const records = new Map<string, number>();
    for (const id of boarded) {
      const m = JSON.parse(readFileSync(join(inner.packageDir(id), 'records.json'), 'utf8')) as {
        records: Array<{ type: string; fields: Record<string, unknown> }>;
      };
      for (const r of m.records.filter((x) => x.type === 'customer'))
        records.set(String(r.fields['taxId']), (records.get(String(r.fields['taxId'])) ?? 0) + 1);
    }
    expect([...records.values()].every((n) => n === 1)).toBe(true);
  });
});
