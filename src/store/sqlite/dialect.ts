import type Database from 'better-sqlite3';
import { CompiledQuery, SqliteDialect, type SqliteDatabase, type SqliteStatement } from 'kysely';
import type { Dialect } from '../dialect.js';
import { FencedOut } from '../leadership/fence.js';
import { truncateWal } from './db.js';

/**
 * Prepared statements are compiled once per SQL text (better-sqlite3's prepare parses the SQL
 * every time; the repositories send a few dozen distinct texts). Kysely's SqliteDialect asks
 * `database.prepare` for every query; this answers from the cache.
 */
function cachingDatabase(db: Database.Database): SqliteDatabase {
  const cache = new Map<string, SqliteStatement>();
  return {
    close: () => {
      db.close();
    },
    prepare: (text: string) => {
      let stmt = cache.get(text);
      if (stmt === undefined) {
        stmt = db.prepare(text);
        if (cache.size < 2000) cache.set(text, stmt);
      }
      return stmt;
    },
  };
}

/** Milliseconds since the epoch on the database host's clock, in SQL. */
export const SQLITE_NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;

/**
 * SQLite (one better-sqlite3 connection, which Kysely serialises with a mutex, so a transaction
 * that awaits keeps the connection to itself until it ends). Write transactions are BEGIN
 * IMMEDIATE (see db.ts); the fence reads the leases row under that write lock, which a takeover
 * also needs, so the two are serialised.
 */
export function sqliteDialect(handle: Database.Database): Dialect {
  return {
    name: 'sqlite',
    kysely: new SqliteDialect({ database: cachingDatabase(handle) }),
    hasServerClock: false,
    ifnull: 'IFNULL',
    position: (haystack, needle) => `instr(${haystack}, ${needle})`,
    limitAll: 'LIMIT -1',
    beginRead: 'BEGIN',
    compile: (text) => text,
    beginWrite: async (conn) => {
      await conn.executeQuery(CompiledQuery.raw('BEGIN IMMEDIATE'));
    },
    fenceCondition: (fence) => ({
      sql:
        'EXISTS (SELECT 1 FROM leases WHERE name = ? AND owner = ? AND epoch = ? AND ' +
        `(expires_at IS NULL OR expires_at > ${SQLITE_NOW_MS}))`,
      params: [fence.name, fence.holder, fence.epoch],
    }),
    checkFence: async (conn, fence) => {
      const row = (
        await conn.executeQuery<{ holder: string | null; epoch: number | string; live: number }>(
          CompiledQuery.raw(
            `SELECT owner AS holder, epoch, (expires_at IS NULL OR expires_at > ${SQLITE_NOW_MS}) AS live
               FROM leases WHERE name = ?`,
            [fence.name],
          ),
        )
      ).rows[0];
      const found =
        row === undefined ? null : { holder: row.holder, epoch: Number(row.epoch), live: row.live === 1 };
      if (found === null || !found.live || found.holder !== fence.holder || found.epoch !== fence.epoch)
        throw new FencedOut(fence, found);
    },
    // better-sqlite3's exec runs a multi-statement script on the (only) connection.
    exec: (_conn, text) => {
      handle.exec(text);
      return Promise.resolve();
    },
    scrubLog: () => truncateWal(handle),
    // BEGIN IMMEDIATE takes the write lock, then rolls back.
    writeBlocker: async (probe) => {
      if (handle.readonly) return 'state database is read-only';
      await probe.write();
      return null;
    },
  };
}
