import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { MIGRATIONS } from './migrations.js';

export type Db = Database.Database;

export const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024;

/*
 * Write transactions on the state database are BEGIN IMMEDIATE (`db.transaction(fn).immediate`):
 * the database has other writers (the webhook inbox thread, a second process such as a
 * `sync --once` run by hand). A deferred transaction that reads first upgrades to a write lock at
 * its first write, and SQLite fails that upgrade at once (SQLITE_BUSY, or SQLITE_BUSY_SNAPSHOT
 * when another connection committed since the read) instead of waiting in busy_timeout. IMMEDIATE
 * takes the write lock up front, so it waits like any single write. Nested calls are savepoints.
 */

export interface OpenDbOptions {
  busyTimeoutMs?: number;
  readonly?: boolean;
}

/** Opens (creating if needed) the state database: WAL, busy_timeout, migrations applied. */
export function openDatabase(path: string, opts: OpenDbOptions = {}): Db {
  if (path !== ':memory:' && !opts.readonly) mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
  db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
  if (!opts.readonly) {
    db.pragma('journal_mode = WAL');
    // FULL: a transition that returned is on disk even if the machine loses power.
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    // A WAL that a burst grew is cut back to this size when it next restarts.
    db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    migrate(db);
  }
  return db;
}

export function migrate(db: Db): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > MIGRATIONS.length) {
    throw new Error(
      `state database schema version ${current} is newer than this connector knows (${MIGRATIONS.length}); upgrade the connector`,
    );
  }
  for (let v = current; v < MIGRATIONS.length; v++) {
    const sql = MIGRATIONS[v] as string;
    db.transaction(() => {
      db.exec(sql);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  }
}
