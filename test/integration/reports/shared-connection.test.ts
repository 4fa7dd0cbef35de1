import { createReportReads } from '../../../src/store/index.js';
import { describe, expect, it } from 'vitest';
import type { CoreSystem } from '../../../src/core/port.js';
import type { PlatformApi, QueuePage } from '../../../src/platform/api.js';
import { computeReconciliation } from '../../../src/reports/compute.js';
import { createReconcileSources } from '../../../src/reports/sources.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

/**
 * Regression: the nightly reconcile runs inside the daemon on the pipeline's own SQLite
 * connection. Reading the loans table through one iterator held open across awaits made every
 * pipeline statement that ran meanwhile fail with "This database connection is busy".
 */
describe('reconciliation on a connection the pipeline is using', () => {
  it('lets other statements run on the same connection while it reads the store', async () => {
    const db = openDatabase(':memory:');
    const insert = db.prepare(
      "INSERT INTO loans (id, state, cents_amount, created_at, updated_at) VALUES (?, 'acknowledged', 100, 1, 1)",
    );
    db.transaction(() => {
      for (let i = 0; i < 7000; i++) insert.run(`loan_${String(i).padStart(5, '0')}`);
    })();

    // The hazard itself: an open iterator blocks the connection.
    const it = db.prepare('SELECT id FROM loans').iterate();
    it.next();
    expect(() => db.prepare('UPDATE loans SET updated_at = 2 WHERE id = ?').run('loan_00000')).toThrow(
      /busy/,
    );
    it.return?.();

    const platform = {
      async *boardingQueue(): AsyncGenerator<QueuePage> {
        await Promise.resolve();
        yield { cursor: null, nextCursor: null, hasMore: false, items: [], invalid: [] };
      },
    } as unknown as PlatformApi;
    const core = { name: 'none', findLoan: () => Promise.resolve(null) } as unknown as CoreSystem;
    const sources = createReconcileSources({
      platform,
      reads: createReportReads(sqliteStore(db)),
      core,
      since: null,
    });

    // "The pipeline": writes on the same connection in every microtask while the report runs.
    let writes = 0;
    let done = false;
    const touch = db.prepare('UPDATE loans SET updated_at = updated_at + 1 WHERE id = ?');
    const pipeline = (async () => {
      while (!done) {
        touch.run('loan_00001');
        writes += 1;
        await Promise.resolve();
      }
    })();
    const outcome = await computeReconciliation(sources, {
      asOfMs: Date.now(),
      timeZone: 'UTC',
      fundedNotReleasedDays: 5,
      since: null,
    });
    done = true;
    await pipeline;
    expect(outcome.totals.released.count).toBe(7000);
    expect(writes).toBeGreaterThan(100);
    db.close();
  });
});
