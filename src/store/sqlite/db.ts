import { chmodSync, closeSync, existsSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { migrate } from '../migrations/sqlite.js';

export type Db = Database.Database;

export const WAL_SIZE_LIMIT_BYTES = 16 * 1024 * 1024;

/*
 * Write transactions on the state database are BEGIN IMMEDIATE (`db.transaction(fn).immediate`):
 * the database has other writers (the webhook inbox thread, a second process such as a
 * `sync --once` run by hand). A deferred transaction that reads first upgrades to a write lock at
 * its first write, and SQLite fails that upgrade at once (SQLITE_BUSY, or SQLITE_BUSY_SNAPSHOT
 * when another connection committed since the read) instead of waiting in busy_timeout. IMMEDIATE
 * takes the write lock up front, so it waits like any single write. Nested calls join (sql.ts).
 */

export interface OpenDbOptions {
  busyTimeoutMs?: number;
  readonly?: boolean;
  /** Told when an existing state file was readable by others and has been tightened. */
  onWarning?: (message: string) => void;
}

/** The state database holds loan data, webhook deliveries and the idempotency keys: owner only. */
export const STATE_FILE_MODE = 0o600;
export const STATE_DIR_MODE = 0o750;
const STATE_FILES = ['', '-wal', '-shm'];

/**
 * Creates the database file owner-only before SQLite opens it (SQLite gives its -wal and -shm the
 * main file's mode), and tightens a file created by an older version or by hand.
 */
function secureStateFiles(path: string, warn: (message: string) => void): void {
  mkdirSync(dirname(path), { recursive: true, mode: STATE_DIR_MODE });
  if (!existsSync(path)) closeSync(openSync(path, 'a', STATE_FILE_MODE));
  for (const suffix of STATE_FILES) {
    const file = `${path}${suffix}`;
    let mode: number;
    try {
      mode = statSync(file).mode & 0o777;
    } catch {
      continue;
    }
    if ((mode & 0o077) !== 0) {
      chmodSync(file, STATE_FILE_MODE);
      warn(`state file ${file} was readable by others (mode ${mode.toString(8)}); tightened to 600`);
    }
  }
}

/**
 * Switches a new database to WAL (a no-op once it is: the mode is stored in the file). The switch
 * needs the file to itself and SQLite does not wait for it (no busy handler), so two processes
 * opening a new install together (the daemon and an operator's command) retry for up to the busy
 * timeout instead of failing.
 */
function enableWal(db: Db, busyTimeoutMs: number): void {
  const deadline = Date.now() + busyTimeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= deadline) throw err;
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}

/** Opens (creating if needed) the state database: WAL, busy_timeout, migrations applied. */
export function openDatabase(path: string, opts: OpenDbOptions = {}): Db {
  const file = path !== ':memory:' && path !== '' && !path.startsWith('file:');
  if (file && !opts.readonly) secureStateFiles(path, opts.onWarning ?? ((m) => process.emitWarning(m)));
  const db = new Database(path, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
  const busyTimeoutMs = opts.busyTimeoutMs ?? 5000;
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  if (!opts.readonly) {
    enableWal(db, busyTimeoutMs);
    // FULL: a transition that returned is on disk even if the machine loses power.
    db.pragma('synchronous = FULL');
    // Deleted and overwritten content is zeroed, not left in free pages and freed cells: the
    // rendered lines of a batch (full tax ids) must not outlive the seal that clears them.
    db.pragma('secure_delete = ON');
    db.pragma('foreign_keys = ON');
    // A WAL that a burst grew is cut back to this size when it next restarts.
    db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    migrate(db);
  }
  return db;
}

/**
 * Why the database would refuse a write now, or null when it would take one: BEGIN IMMEDIATE
 * takes the write lock, then rolls back (the readiness check).
 */
export function writeBlocker(db: Db): string | null {
  if (!db.open) return 'state database is closed';
  if (db.readonly) return 'state database is read-only';
  try {
    db.exec('BEGIN IMMEDIATE');
    db.exec('ROLLBACK');
    return null;
  } catch (err) {
    return `state database not writable: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/**
 * Copies every WAL frame into the database file and truncates the WAL to zero bytes, so frames
 * holding content that was since cleared (the seal's rendered lines) are gone from the -wal file
 * too. Waits for readers up to a second; `done: false` when one still held an old snapshot
 * (the frames then go at the next checkpoint).
 */
export function truncateWal(db: Db): { done: boolean; frames: number } {
  if (db.memory || db.readonly) return { done: true, frames: 0 };
  // The connection is the process's only one: a unit of work of another caller (a board's step)
  // may hold a transaction open on it right now, and a checkpoint inside a transaction fails with
  // SQLITE_LOCKED ("database table is locked"). Not done: the next seal job run truncates it.
  if (db.inTransaction) return { done: false, frames: 0 };
  // The wait for readers blocks this thread (the daemon's event loop): a second at most, then
  // the caller retries later rather than stall webhook deliveries for the full busy timeout.
  const busyTimeoutMs = db.pragma('busy_timeout', { simple: true }) as number;
  db.pragma(`busy_timeout = ${Math.min(busyTimeoutMs, 1_000)}`);
  let r: Array<{ busy: number; log: number; checkpointed: number }>;
  try {
    r = db.pragma('wal_checkpoint(TRUNCATE)') as typeof r;
  } catch (err) {
    if ((err as { code?: unknown }).code === 'SQLITE_LOCKED') return { done: false, frames: 0 };
    throw err;
  } finally {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  }
  const row = r[0] ?? { busy: 0, log: 0, checkpointed: 0 };
  return { done: row.busy === 0, frames: row.checkpointed };
}
