import { clockReading } from '../../support/fake-clock.js';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileCore } from '../../../src/core/file/file-core.js';
import { batchSealDaemonJob } from '../../../src/app/seal-job.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { testBatches } from '../core/batches-support.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

let dir: string;
let db: Db;
let now = Date.parse('2025-03-14T15:00:00Z');
const clock = clockReading(() => now);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'batches-plugin-'));
  db = openDatabase(join(dir, 'state.sqlite'));
});
afterEach(async () => {
  db.close();
  await rm(dir, { recursive: true, force: true });
});

describe("the daemon's batch seal job", () => {
  it('its job seals the open batch once the injected clock passes the cut-off, not before', async () => {
    const core = new FileCore({
      dir,
      batches: testBatches(dir, clock, { db: sqliteStore(db) }),
      timeZone: 'America/Chicago',
      logger: silentLogger(),
      clock,
    });
    await core.batches!.append(
      core.batches!.check('loan_1', [{ type: 'loan', externalId: 'loan_1', fields: {} }]),
      '100',
    );
    const job = batchSealDaemonJob(core, silentLogger());
    expect(job).toMatchObject({ name: 'batches.seal', schedule: '* * * * *' });
    await job!.run(new AbortController().signal);
    expect(db.prepare(`SELECT status FROM file_batches`).get()).toEqual({ status: 'open' });
    now = Date.parse('2025-03-14T23:00:00Z'); // 18:00 in Chicago
    await job!.run(new AbortController().signal);
    expect(db.prepare(`SELECT status FROM file_batches`).get()).toEqual({ status: 'sealed' });
    // The rendered lines (full tax ids) leave the state database once the files are written.
    expect(db.prepare(`SELECT rows_json AS r FROM file_batch_loans`).all()).toEqual([{ r: '{}' }]);
    expect((await readdir(join(dir, 'batches', '2025-03-14-001'))).sort()).toEqual([
      'READY',
      'control.csv',
      'customer.csv',
      'loan.csv',
    ]);
  });

  it('adds nothing for a core without batches', () => {
    const core = new FileCore({ dir, timeZone: 'UTC', logger: silentLogger(), clock });
    expect(batchSealDaemonJob(core, silentLogger())).toBeUndefined();
  });
});
