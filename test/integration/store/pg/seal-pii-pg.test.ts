/**
 * No full tax id at rest in PostgreSQL (issue 33 point 4; regression: after a seal, VACUUM and
 * CHECKPOINT, 27 full SSNs/EINs were readable in the heap file of file_batch_loans and in pg_wal,
 * so every base backup and WAL archive kept them). The open batch's lines are stored encrypted with
 * a key kept beside the core's files and deleted at the seal: the seeded ids are never written to
 * the database, before or after the seal. The test greps the server's data directory (this
 * database's heap files and pg_wal) and shows first that it does find a value written in clear.
 */
import { randomInt } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileCore } from '../../../../src/core/file/file-core.js';
import { silentLogger } from '../../../../src/lib/logger.js';
import type { MappedRecord } from '../../../../src/mapping/types.js';
import { openStore } from '../../../../src/store/open.js';
import type { StoreDb } from '../../../../src/store/sql.js';
import { clockReading } from '../../../support/fake-clock.js';
import {
  asFixture,
  createTestDatabase,
  pgDataDir,
  pgSkipReason,
  pgTarget,
  type TestDatabase,
} from '../../../support/pg.js';
import { testBatches } from '../../../unit/core/batches-support.js';

// Fresh per run: the server's WAL outlives a test run.
const digits = (n: number): string => Array.from({ length: n }, () => String(randomInt(10))).join('');
const SSN = `9${digits(2)}-${digits(2)}-${digits(4)}`;
const EIN_BARE = `8${digits(8)}`;
const SENTINEL = `CLEAR-${digits(12)}`;

function records(loanId: string, version: number): MappedRecord[] {
  return [
    {
      type: 'customer',
      externalId: `${loanId}-c`,
      fields: { name: `Borrower ${loanId} SSN ${SSN} v${version}`, kind: 'person' },
    },
    // Short rows: PostgreSQL compresses a long value (TOAST), which would hide the ids from a byte grep.
    {
      type: 'loan',
      externalId: loanId,
      fields: {
        principalCents: 100_000,
        rateBps: 500,
        rateIndex: 'FIXED',
        note: `EIN ${EIN_BARE} v${version}`,
      },
    },
  ];
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    const st = statSync(p);
    return st.isDirectory() ? filesUnder(p) : st.isFile() ? [p] : [];
  });
}

/** Where a needle occurs among the database's heap files and the server's WAL. */
function found(dbOid: number, needles: string[]): string[] {
  const hits: string[] = [];
  for (const file of [
    ...filesUnder(join(pgDataDir, 'base', String(dbOid))),
    ...filesUnder(join(pgDataDir, 'pg_wal')),
  ]) {
    const bytes = readFileSync(file);
    for (const n of needles) if (bytes.includes(n)) hits.push(`${n} in ${file.slice(pgDataDir.length)}`);
  }
  return hits;
}

describe.skipIf(pgSkipReason !== null || !pgDataDir)(
  'full tax ids on PostgreSQL: never in the heap or the WAL',
  () => {
    let db: TestDatabase;
    let store: StoreDb;
    let dir: string;
    beforeAll(async () => {
      db = await createTestDatabase();
      store = await openStore(pgTarget(db.url, { poolSize: 2 }));
      dir = mkdtempSync(join(tmpdir(), 'seal-pii-pg-'));
    });
    afterAll(async () => {
      await store?.close();
      await db?.drop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('after a seal (and VACUUM, CHECKPOINT) no seeded full tax id is in the data directory; a value written in clear is found there', async () => {
      const oid = Number(
        (await store.get<{ oid: number }>(
          'SELECT oid::int AS oid FROM pg_database WHERE datname = current_database()',
        ))!.oid,
      );
      // The grep works: a value written in clear shows in the heap or the WAL once checkpointed.
      await store.run('CREATE TABLE scratch (v text)');
      await store.run('INSERT INTO scratch VALUES (?)', [SENTINEL]);
      await asFixture((c) => c.query('CHECKPOINT'));
      expect(found(oid, [SENTINEL]).length).toBeGreaterThan(0);

      let now = Date.parse('2025-03-14T15:00:00Z');
      const clock = clockReading(() => now);
      const core = new FileCore({
        dir: join(dir, 'core'),
        batches: testBatches(dir, clock, { db: store }),
        timeZone: 'America/Chicago',
        logger: silentLogger(),
        clock,
      });
      for (let i = 0; i < 30; i++)
        await core.batches!.append(core.batches!.check(`loan_${i}`, records(`loan_${i}`, 1)), '100000');
      // Re-boards replace rows (dead tuples the vacuum does not erase).
      for (let i = 0; i < 10; i++)
        await core.batches!.append(core.batches!.check(`loan_${i}`, records(`loan_${i}`, 2)), '100000');
      await asFixture((c) => c.query('CHECKPOINT'));
      expect(found(oid, [SSN, EIN_BARE]), 'while the batch is open').toEqual([]);

      now = Date.parse('2025-03-14T23:00:00Z');
      expect(await core.batches!.sealDue()).toEqual(['2025-03-14-001']);
      expect(readFileSync(join(dir, 'batches', '2025-03-14-001', 'customer.csv'), 'utf8')).toContain(SSN);
      expect(readFileSync(join(dir, 'batches', '2025-03-14-001', 'loan.csv'), 'utf8')).toContain(EIN_BARE);
      expect(core.batches!.keys.batchesWithKeys()).toEqual([]);
      await store.run('VACUUM file_batch_loans');
      await asFixture((c) => c.query('CHECKPOINT'));
      expect(found(oid, [SSN, EIN_BARE]), 'after the seal').toEqual([]);
      await core.close();
    });
  },
);
