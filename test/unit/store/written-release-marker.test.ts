import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../../src/store/migrations/sqlite.js';
import { MIGRATIONS, migrationSql } from '../../../src/store/migrations/migrations.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

describe('migration 4: written_release_marker (regression: a write for an old release made a retry ack-only)', () => {
  it('backfills written rows with their current marker, except skipped ones (those write again on retry)', async () => {
    const db = new Database(':memory:');
    for (const m of MIGRATIONS.slice(0, 3)) db.exec(migrationSql(m, 'sqlite'));
    db.pragma('user_version = 3');
    const ins = db.prepare(
      'INSERT INTO loans (id, state, release_marker, written_at, core_reference, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 0, 0)',
    );
    ins.run('W', 'retry_wait', 'b1', 10, 'CORE-W');
    ins.run('S', 'skipped', 'b2', 10, 'CORE-S');
    ins.run('Q', 'queued', 'b3', null, null);
    migrate(db);
    const loans = createBoardingStore(sqliteStore(db)).loans;
    expect((await loans.require('W')).writtenReleaseMarker).toBe('b1');
    expect((await loans.require('S')).writtenReleaseMarker).toBeNull();
    expect((await loans.require('Q')).writtenReleaseMarker).toBeNull();
    await loans.update('Q', { writtenReleaseMarker: 'b3' }, 1);
    expect((await loans.require('Q')).writtenReleaseMarker).toBe('b3');
  });
});
