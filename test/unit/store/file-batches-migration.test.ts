import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { migrate } from '../../../src/store/migrations/sqlite.js';
import { FileBatchStore } from '../../../src/store/file-batches.js';
import { MIGRATIONS, migrationSql } from '../../../src/store/migrations/migrations.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const columns = (db: Database.Database): string[] =>
  (db.prepare(`PRAGMA table_info(file_batches)`).all() as Array<{ name: string }>).map((c) => c.name);

describe('migration 12: file_batches.loan_count and record_count (written at the seal, never read) are dropped', () => {
  it('drops both columns on a database that has them and keeps every batch and its audit fields', async () => {
    const db = new Database(':memory:');
    for (const m of MIGRATIONS.slice(0, 11)) db.exec(migrationSql(m, 'sqlite'));
    db.pragma('user_version = 11');
    expect(columns(db)).toEqual(expect.arrayContaining(['loan_count', 'record_count', 'sealing_at']));
    db.prepare(
      `INSERT INTO file_batches (id, status, opened_at, cutoff_at, sealing_at, sealed_at, seal_reason, sealed_by, loan_count, record_count, principal_cents, layout)
       VALUES ('2025-03-14-001', 'sealed', 1, 2, 3, 4, 'cutoff', 'connector', 5, 10, '625000250', 'files: []')`,
    ).run();
    db.prepare(
      `INSERT INTO file_batch_loans (batch_id, loan_id, kind, principal_cents, digest, rows_json, record_count, boarded_at) VALUES ('2025-03-14-001', 'loan_1', 'new', '100', 'd', '{}', 2, 1)`,
    ).run();

    migrate(db);

    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(columns(db)).not.toContain('loan_count');
    expect(columns(db)).not.toContain('record_count');
    const store = new FileBatchStore(sqliteStore(db));
    expect(await store.get('2025-03-14-001')).toEqual({
      id: '2025-03-14-001',
      status: 'sealed',
      openedAt: 1,
      cutoffAt: 2,
      sealingAt: 3,
      sealedAt: 4,
      sealReason: 'cutoff',
      sealedBy: 'connector',
      principalCents: '625000250',
      layout: 'files: []',
    });
    // The counts the CLI shows come from the batch's loans, which the seal keeps.
    expect(await store.counts('2025-03-14-001')).toEqual({ loans: 1, corrections: 0, records: 2 });
  });
});
