import type Database from 'better-sqlite3';
import { StoreDb } from '../sql.js';
import { openDatabase, type OpenDbOptions } from './db.js';
import { sqliteDialect } from './dialect.js';

const HANDLES = new WeakMap<Database.Database, StoreDb>();

/**
 * The StoreDb of a better-sqlite3 connection: always the same one for the same connection (its
 * transactions must share one queue, or two units of work would interleave on the connection).
 * The one way a raw handle (a test's, the backup's, the SQLite→PostgreSQL copy's source) reaches
 * the repositories, which take a StoreDb only.
 */
export function sqliteStore(db: Database.Database): StoreDb {
  let s = HANDLES.get(db);
  if (s === undefined) {
    s = new StoreDb({ dialect: sqliteDialect(db), sqlite: db, location: db.name });
    HANDLES.set(db, s);
  }
  return s;
}

/** Opens (creating if needed) the state database at path, migrated, as a StoreDb (db.ts openDatabase). */
export function openSqliteStore(path: string, opts: OpenDbOptions = {}): StoreDb {
  return sqliteStore(openDatabase(path, opts));
}
