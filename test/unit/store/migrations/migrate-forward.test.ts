import { sqliteLeaseBackend } from '../../../../src/store/leadership/leases.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../../src/store/sqlite/db.js';
import { MIGRATIONS, migrationSql } from '../../../../src/store/migrations/migrations.js';
import { createBoardingStore } from '../../../../src/store/index.js';
import { createWebhookInbox } from '../../../../src/store/inbox.js';
import { sqliteStore } from '../../../../src/store/sqlite/store.js';

describe('a state file from before issue 26 migrates forward untouched', () => {
  it('opens a schema-13 file (what main wrote before issue 26: file core 12, console 13) at the new version and keeps its rows', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'migrate-forward-')), 'state.sqlite');
    const old = new Database(path);
    for (const m of MIGRATIONS.slice(0, 13)) old.exec(migrationSql(m, 'sqlite'));
    old.pragma('user_version = 13');
    old
      .prepare(
        "INSERT INTO loans (id, state, cents_amount, created_at, updated_at) VALUES ('L1', 'acknowledged', 4200, 1, 2)",
      )
      .run();
    old
      .prepare(
        "INSERT INTO leases (name, owner, pid, host, acquired_at, heartbeat_at) VALUES ('boarding', 'h:1:x', 1, 'h', 1, 2)",
      )
      .run();
    old
      .prepare(
        "INSERT INTO webhook_inbox (webhook_id, event_type, loan_id, occurred_at, received_at, payload) VALUES ('w1', 'loan.funded', 'L1', 5, 6, '{}')",
      )
      .run();
    old.close();

    const db = openDatabase(path);
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    const s = createBoardingStore(sqliteStore(db));
    expect(await s.loans.require('L1')).toMatchObject({
      state: 'acknowledged',
      centsAmount: 4200,
      createdAt: 1,
      updatedAt: 2,
    });
    // A lease row from before leadership (no expiry, heartbeat long ago): free to take, epoch on from 0.
    expect(await sqliteLeaseBackend(sqliteStore(db)).read('boarding')).toMatchObject({
      holder: null,
      epoch: 0,
    });
    expect(await sqliteLeaseBackend(sqliteStore(db)).acquire('boarding', 'h:2:y', 15_000)).toEqual({
      epoch: 1,
    });
    expect((await createWebhookInbox(sqliteStore(db)).pending(10)).map((r) => r.webhookId)).toEqual(['w1']);
    db.close();
  });
});
