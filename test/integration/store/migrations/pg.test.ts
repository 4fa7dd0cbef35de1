/** The PostgreSQL schema (src/store/migrations/pg.ts) on a real server: replicas starting at once. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PG_MIGRATIONS, migratePg } from '../../../../src/store/migrations/pg.js';
import { createTestDatabase, pgSkipReason, type TestDatabase } from '../../../support/pg.js';

let db: TestDatabase;
beforeAll(async () => {
  if (pgSkipReason) return;
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  if (!pgSkipReason) await db.drop();
});

describe.skipIf(pgSkipReason !== null)('PostgreSQL migrations', () => {
  it('six replicas migrating a fresh database at once: every one succeeds and each migration is applied once', async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => migratePg(db.pool(`migrate-${i}`, 1))),
    );
    const applied = results.flat();
    expect(applied.sort()).toEqual(PG_MIGRATIONS.map((m) => m.version).sort());
    const rows = await db
      .pool('check', 1)
      .query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.rows.map((r) => r.version)).toEqual(PG_MIGRATIONS.map((m) => m.version));
    // And again: nothing left to do.
    expect(await migratePg(db.pool('again', 1))).toEqual([]);
  });

  it('a failing migration leaves nothing behind (one transaction) and names itself', async () => {
    const other = await createTestDatabase({ migrate: false });
    try {
      const pool = other.pool('bad', 1);
      const bad = [
        ...PG_MIGRATIONS,
        { version: 99, name: 'broken', sql: 'CREATE TABLE t99 (x int); SELECT nonsense FROM nowhere;' },
      ];
      await expect(migratePg(pool, bad)).rejects.toThrow(/migration 99 \(broken\)/);
      const t = await pool.query(
        "SELECT to_regclass('public.leader_lease') AS t, to_regclass('public.t99') AS t99",
      );
      expect(t.rows[0]).toEqual({ t: null, t99: null });
    } finally {
      await other.drop();
    }
  });
});
