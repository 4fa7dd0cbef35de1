import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type pgModule from 'pg';
import { ConfigError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { openDatabase, type OpenDbOptions } from './db.js';
import { redactUrl, sessionName } from './pg/url.js';
import { StoreDb } from './sql.js';

/** Where the state lives: store.engine and its settings (src/config). */
export type StoreTarget =
  | { engine: 'sqlite'; path: string }
  | {
      engine: 'postgres';
      url: string;
      /** store.postgres.password or BOARDING_STORE_PASSWORD; else the URL's own. */
      password?: string;
      ssl: 'disable' | 'require' | 'verify-full';
      sslRootCert?: string;
      poolSize: number;
      connectTimeoutMs: number;
    };

export type OpenStoreOptions = Pick<OpenDbOptions, 'onWarning' | 'busyTimeoutMs'> & { logger?: Logger; applicationName?: string };

/**
 * PostgreSQL answers int8 (BIGINT: the epoch-ms times, counts) as text; the repositories work
 * with numbers, as on SQLite. A value beyond 2^53 would lose digits as a number, so it is refused
 * loudly instead (amounts of any size are stored as text: file_batches.principal_cents).
 */
const storeTypes = (pg: typeof pgModule) => ({
  getTypeParser: (oid: number, format?: 'text' | 'binary') => {
    if (oid === 20 || oid === 1700) {
      return (v: string): number => {
        const n = Number(v);
        if (!Number.isSafeInteger(n) && oid === 20) throw new Error(`state store: integer ${v} does not fit a JavaScript number exactly`);
        return n;
      };
    }
    return pg.types.getTypeParser(oid, format ?? 'text') as (v: string) => unknown;
  },
});

/**
 * The PostgreSQL server could not be reached or refused the login (unreachable, wrong password,
 * no such database): the message names the key to fix. A ConfigError, so a one-shot command exits
 * 1; `run` waits and retries instead (src/app/store-wait.ts): the database may come back, or the
 * password be fixed on the server, without restarting the connector.
 */
export class StoreUnavailableError extends ConfigError {}

/** The CA bundle store.postgres.sslRootCert names; a file that cannot be read is a config error naming the key. */
function readRootCert(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`store.postgres.sslRootCert: cannot read ${path}: ${(err as Error).message}`);
  }
}

/** Why a PostgreSQL store could not be opened, naming the config key to fix. */
export function postgresOpenError(target: Extract<StoreTarget, { engine: 'postgres' }>, err: unknown): StoreUnavailableError {
  const e = err as { code?: string; message?: string };
  const where = redactUrl(target.url);
  const msg = (e.message ?? String(err)).replace(/postgres(ql)?:\/\/[^\s]+/g, (u) => redactUrl(u));
  if (e.code === '28P01' || e.code === '28000') {
    return new StoreUnavailableError(`store.postgres.password (or BOARDING_STORE_PASSWORD): the server at ${where} refused the login: ${msg}`);
  }
  if (e.code === '3D000') return new StoreUnavailableError(`store.postgres.url: ${where}: the database does not exist: ${msg}`);
  return new StoreUnavailableError(`store.postgres.url: cannot open the state store at ${where}: ${msg}`);
}

/**
 * Opens the state store (migrations applied) on the configured engine. SQLite: the file at
 * store.path. PostgreSQL: a pool on store.postgres.url; the first connection is made here, so a
 * wrong URL, password or an unreachable server fails now with an error naming the key (never a
 * fall-back to SQLite); the migrations run under an advisory lock (several replicas may start at
 * once).
 */
export async function openStore(target: StoreTarget, opts: OpenStoreOptions = {}): Promise<StoreDb> {
  if (target.engine === 'sqlite') return StoreDb.sqliteOn(openDatabase(target.path, opts));
  // Loaded only for PostgreSQL: an embedded (SQLite) connector does not carry the driver in memory.
  const [{ default: pg }, { migratePg }] = await Promise.all([import('pg'), import('./pg/schema.js')]);
  const ssl =
    target.ssl === 'disable'
      ? false
      : target.ssl === 'require'
        ? { rejectUnauthorized: false }
        : { rejectUnauthorized: true, ...(target.sslRootCert ? { ca: readRootCert(target.sslRootCert) } : {}) };
  // Named per process: a replica taking the lease over from this one, once its lease expired, can
  // end exactly these sessions (the stale leader's locks and queued writes go with them).
  const instance = randomUUID().slice(0, 8);
  const pool = new pg.Pool({
    connectionString: target.url,
    ...(target.password !== undefined ? { password: target.password } : {}),
    ssl,
    max: target.poolSize,
    application_name: opts.applicationName ?? sessionName(instance),
    connectionTimeoutMillis: target.connectTimeoutMs,
    types: storeTypes(pg),
  });
  pool.on('error', (err) => {
    opts.logger?.warn({ err: { message: err.message }, db: redactUrl(target.url) }, 'idle PostgreSQL connection lost; the pool reconnects');
  });
  // A connection the server ends while it is checked out (a restart, pg_terminate_backend) emits
  // 'error' on the client, which the pool does not handle for checked-out clients: unhandled, it
  // would end the process. The statement in progress fails with it anyway; here it is only logged.
  pool.on('connect', (client) => {
    client.on('error', (err) => {
      opts.logger?.warn({ err: { message: err.message }, db: redactUrl(target.url) }, 'PostgreSQL connection lost while in use; its statement fails and the pool reconnects');
    });
  });
  try {
    await migratePg(pool);
  } catch (err) {
    await pool.end().catch(() => undefined);
    if ((err as Error).message.startsWith('PostgreSQL migration')) throw err;
    throw postgresOpenError(target, err);
  }
  return StoreDb.postgresOn(pool, redactUrl(target.url), opts.applicationName === undefined ? instance : null);
}
