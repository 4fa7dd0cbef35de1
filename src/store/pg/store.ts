import { StoreDb } from '../sql.js';
import { pgDialect } from './dialect.js';
import type { PgPool } from './pool.js';

/** The StoreDb of a pg pool; location is the redacted URL (messages), instance the sessions' name. */
export function pgStore(pool: PgPool, location: string, instance: string | null = null): StoreDb {
  return new StoreDb({ dialect: pgDialect(pool), pool, location, instance });
}
