/**
 * The state store on either engine for a test: a fresh in-memory SQLite database, or a fresh
 * PostgreSQL database on the run's server (test/support/pg.ts), migrated. Store tests run with
 * `describe.each(STORE_ENGINES)`; the PostgreSQL half reports SKIPPED with its reason when the
 * server cannot run here.
 */
import { afterEach } from 'vitest';
import { openDatabase } from '../../src/store/sqlite/db.js';
import { openStore } from '../../src/store/open.js';
import type { StoreDb } from '../../src/store/sql.js';
import { createTestDatabase, pgSkipReason, pgTarget } from './pg.js';
import { sqliteStore } from '../../src/store/sqlite/store.js';

export const STORE_ENGINES = ['sqlite', 'postgres'] as const;
export type TestEngine = (typeof STORE_ENGINES)[number];

/** Whether the engine's tests are skipped here (PostgreSQL without a server). */
export const engineSkipped = (engine: TestEngine): boolean => engine === 'postgres' && pgSkipReason !== null;

export interface TestStore {
  db: StoreDb;
  /** The PostgreSQL URL of this store's database (postgres only). */
  url: string | null;
  close(): Promise<void>;
}

/** A fresh store on the engine; SQLite in memory, or in a file at `sqlitePath` (as the connector has it). */
export async function openTestStore(engine: TestEngine, sqlitePath = ':memory:'): Promise<TestStore> {
  if (engine === 'sqlite') {
    const db = sqliteStore(openDatabase(sqlitePath));
    return { db, url: null, close: () => db.close() };
  }
  const pg = await createTestDatabase({ migrate: false });
  const db = await openStore(pgTarget(pg.url, { poolSize: 4, connectTimeoutMs: 5000 }));
  return {
    db,
    url: pg.url,
    close: async () => {
      await db.close();
      await pg.drop();
    },
  };
}

/**
 * For a `describe.each(STORE_ENGINES)` block: a function that opens a fresh store on the engine,
 * each one closed (its PostgreSQL database dropped) after the test that opened it.
 */
export function testStores(engine: TestEngine): () => Promise<TestStore> {
  const opened: TestStore[] = [];
  afterEach(async () => {
    while (opened.length > 0) await opened.pop()?.close();
  });
  return async () => {
    const t = await openTestStore(engine);
    opened.push(t);
    return t;
  };
}

/** Why a test named after an engine (or another store: 'memory') is skipped here, or null. */
export const pgSkipReasonFor = (name: string): string | null => (name === 'postgres' ? pgSkipReason : null);
