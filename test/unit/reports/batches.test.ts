import { createReportReads } from '../../../src/store/index.js';
import { clockReading } from '../../support/fake-clock.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { batchTieNotes, computeBatchTie } from '../../../src/reports/batches.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { STORE_ENGINES, engineSkipped, openTestStore, type TestStore } from '../../support/store-engines.js';
import { testBatches } from '../core/batches-support.js';

let dir: string;
let db: StoreDb;
let now = Date.parse('2025-03-14T15:00:00Z');
const clock = clockReading(() => now);
const CUTOFF_14 = Date.parse('2025-03-14T23:00:00Z');

async function acknowledge(id: string, cents: number): Promise<void> {
  await db.run(
    `INSERT INTO loans (id, state, cents_amount, created_at, updated_at) VALUES (?, 'acknowledged', ?, 0, 0)`,
    [id, cents],
  );
}
const recs = (id: string) => [{ type: 'loan', externalId: id, fields: { principalCents: 1 } }];

describe.each(STORE_ENGINES)('on %s', (engine) => {
  let t: TestStore | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'batch-tie-'));
    now = Date.parse('2025-03-14T15:00:00Z');
    if (engineSkipped(engine)) return;
    // SQLite: a file, as the connector has it; PostgreSQL: a fresh database.
    t = await openTestStore(engine, join(dir, 'state.sqlite'));
    db = t.db;
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  describe.skipIf(engineSkipped(engine))('reconciliation: file batches', () => {
    it('is absent when the file core wrote no batches', async () => {
      expect(computeBatchTie(await createReportReads(db).batchTie(now))).toBeNull();
    });

    it('ties sealed and open batches to the acknowledged loans, count and principal (beyond 2^53 cents)', async () => {
      const b = testBatches(dir, clock, { db });
      const big = 9_007_199_254_740_000;
      for (const [id, cents] of [
        ['a', big],
        ['b', 100],
      ] as const) {
        await acknowledge(id, cents);
        await b.append(b.check(id, recs(id)), String(cents));
      }
      now = CUTOFF_14;
      await b.sealDue();
      await acknowledge('c', 50);
      await b.append(b.check('c', recs('c')), '50');
      await b.append(
        b.check(
          'a',
          recs('a').map((r) => ({ ...r, fields: { principalCents: 2 } })),
        ),
        String(big),
      ); // a correction
      now = CUTOFF_14 + 3600_000;
      const s = computeBatchTie(await createReportReads(db).batchTie(now))!;
      expect(s).toMatchObject({
        sealedBatches: 1,
        sealed: { count: 2, cents: String(big + 100) },
        open: { count: 1, cents: '50', batchId: '2025-03-15-001' },
        acknowledged: { count: 3, cents: (BigInt(big) + 150n).toString() },
        ties: true,
        notSealedPastCutoff: [],
      });
      expect(batchTieNotes(s)).toEqual([]);
    });

    it('counts a batch frozen by an early seal still being written (status sealing) with the sealed ones', async () => {
      const b = testBatches(dir, clock, { db });
      await acknowledge('a', 100);
      await b.append(b.check('a', recs('a')), '100');
      // Frozen by ops, before the cut-off; the crash left it in sealing.
      await db.run(`UPDATE file_batches SET status = 'sealing'`);
      const s = computeBatchTie(await createReportReads(db).batchTie(now))!;
      expect(s).toMatchObject({
        sealed: { count: 1, cents: '100' },
        open: { count: 0 },
        ties: true,
        notSealedPastCutoff: [],
      });
    });

    it('reports loans boarded but in no sealed batch past the cut-off, and loans in no batch at all', async () => {
      const b = testBatches(dir, clock, { db });
      await acknowledge('late', 10);
      await b.append(b.check('late', recs('late')), '10');
      await acknowledge('nowhere', 20);
      now = CUTOFF_14 + 60_000; // past the cut-off; nothing sealed it (no daemon, no board)
      const s = computeBatchTie(await createReportReads(db).batchTie(now))!;
      expect(s.ties).toBe(false);
      expect(s.notSealedPastCutoff).toEqual([
        { loanId: 'late', batchId: '2025-03-14-001', cutoffAt: new Date(CUTOFF_14).toISOString() },
        { loanId: 'nowhere', batchId: null, cutoffAt: null },
      ]);
      expect(batchTieNotes(s)[0]).toMatch(
        /^2 boarded loan\(s\) are in no sealed batch although the cut-off has passed .*: late, nowhere$/,
      );
    });
  });
});
