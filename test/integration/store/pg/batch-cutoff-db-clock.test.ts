/**
 * Batch cut-offs follow the state database's clock, not the leader host's (issue 43). With several
 * replicas on PostgreSQL, whichever host leads seals the open batch; a host whose clock is hours off
 * sealed early (ahead) or late (behind). The host's clock is skewed here by replacing Date.now (the
 * system clock the product runs on); PostgreSQL's clock_timestamp() is the true time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { FileCore } from '../../../../src/core/file/file-core.js';
import { systemClock } from '../../../../src/lib/clock.js';
import { silentLogger } from '../../../../src/lib/logger.js';
import { openStore } from '../../../../src/store/open.js';
import type { StoreDb } from '../../../../src/store/sql.js';
import { createTestDatabase, pgSkipReason, pgTarget, type TestDatabase } from '../../../support/pg.js';
import { testBatches } from '../../../unit/core/batches-support.js';
import { makePackage } from '../../../unit/core/support.js';

const HOUR = 3_600_000;
const realNow = Date.now.bind(Date);

describe.skipIf(pgSkipReason !== null)('batch cut-off on the state database clock (PostgreSQL)', () => {
  let db: TestDatabase;
  let store: StoreDb;
  let dir: string;
  beforeAll(async () => {
    db = await createTestDatabase();
    store = await openStore(pgTarget(db.url, { poolSize: 2 }));
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await store.run(`DELETE FROM file_batch_loans`);
    await store.run(`DELETE FROM file_batches`);
    rmSync(dir, { recursive: true, force: true });
  });

  /** A file core whose host clock is `skewMs` off the true time, with one loan boarded in the open batch. */
  async function boardedWithSkew(skewMs: number): Promise<{ core: FileCore; batchId: string }> {
    dir = mkdtempSync(join(tmpdir(), 'cutoff-db-clock-'));
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + skewMs);
    const core = new FileCore({
      dir,
      batches: testBatches(dir, systemClock, { db: store, cutoff: '18:00', timeZone: 'UTC' }),
      timeZone: 'UTC',
      logger: silentLogger(),
      clock: systemClock,
    });
    const loanId = 'ln_skew';
    await core.board(
      makePackage(
        loanId,
        [
          { type: 'customer', externalId: `c_${loanId}`, fields: { name: 'Skew Co', kind: 'business' } },
          { type: 'loan', externalId: loanId, fields: { principalCents: 100_000, rateBps: 500 } },
        ],
        [],
        { source: { centsAmount: 100_000 } },
      ),
    );
    const open = await store.get<{ id: string }>(`SELECT id FROM file_batches WHERE status = 'open'`);
    return { core, batchId: open!.id };
  }

  async function setCutoff(batchId: string, at: number): Promise<void> {
    await store.run(`UPDATE file_batches SET cutoff_at = ? WHERE id = ?`, [at, batchId]);
  }

  async function status(batchId: string): Promise<string | undefined> {
    return (await store.get<{ status: string }>(`SELECT status FROM file_batches WHERE id = ?`, [batchId]))
      ?.status;
  }

  it('a leader whose clock is 3 hours behind seals the batch when the database clock passes the cut-off (regression: sealed 3 hours late)', async () => {
    const { core, batchId } = await boardedWithSkew(-3 * HOUR);
    await setCutoff(batchId, realNow() - 60_000);
    expect(await core.sealDue()).toEqual([batchId]);
    expect(await status(batchId)).toBe('sealed');
    const row = await store.get<{ sealingAt: number }>(
      `SELECT sealing_at AS "sealingAt" FROM file_batches WHERE id = ?`,
      [batchId],
    );
    // Recorded on the database's time too, not the host's 3 hours earlier.
    expect(Math.abs(Number(row!.sealingAt) - realNow())).toBeLessThan(60_000);
  });

  it('a leader whose clock is 3 hours ahead does not seal before the database clock reaches the cut-off (regression: sealed 3 hours early)', async () => {
    const { core, batchId } = await boardedWithSkew(3 * HOUR);
    await setCutoff(batchId, realNow() + HOUR);
    expect(await core.sealDue()).toEqual([]);
    expect(await status(batchId)).toBe('open');
  });

  it('a batch opened by a skewed leader gets the cut-off of the database day, not the host day', async () => {
    // 14 hours ahead: on most of the real day the host is already past 18:00 UTC or on the next day.
    const { batchId } = await boardedWithSkew(14 * HOUR);
    const cutoff = Number(
      (await store.get<{ c: number }>(`SELECT cutoff_at AS c FROM file_batches WHERE id = ?`, [batchId]))!.c,
    );
    const now = realNow();
    const today1800 = Date.UTC(
      new Date(now).getUTCFullYear(),
      new Date(now).getUTCMonth(),
      new Date(now).getUTCDate(),
      18,
    );
    expect(cutoff).toBe(today1800 > now ? today1800 : today1800 + 24 * HOUR);
  });
});
