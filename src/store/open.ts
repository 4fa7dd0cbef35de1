import { randomUUID } from 'node:crypto';
import type pgModule from 'pg';
import { ConfigError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { OpenDbOptions } from './sqlite/db.js';
import { pgClientConfig, type PgSslMode } from './pg/connection.js';
import { poolerProblem } from './pg/pooler.js';
import { redactUrl } from '../lib/redact.js';
import { sessionName } from './pg/url.js';
import type { StoreDb } from './sql.js';
import { openSqliteStore } from './sqlite/store.js';
import { pgStore } from './pg/store.js';

/** Where the state lives: store.engine and its settings (src/config). */
export type StoreTarget =
  | { engine: 'sqlite'; path: string }
  | {
      engine: 'postgres';
      url: string;
      /** store.postgres.password or BOARDING_STORE_PASSWORD; else the URL's own (never both: pgClientConfig). */
      password?: string;
      ssl: PgSslMode;
      sslRootCert?: string;
      poolSize: number;
      connectTimeoutMs: number;
    };

export type OpenStoreOptions = Pick<OpenDbOptions, 'onWarning' | 'busyTimeoutMs'> & {
  logger?: Logger;
  applicationName?: string;
};

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
        if (!Number.isSafeInteger(n) && oid === 20)
          throw new Error(`state store: integer ${v} does not fit a JavaScript number exactly`);
        return n;
      };
    }
    return pg.types.getTypeParser(oid, format ?? 'text') as (v: string) => unknown;
  },
});

/**
 * A client that closes its socket when its connection attempt fails. node-postgres (and its pool)
 * leave the socket open when the failure is on the client's side mid-handshake (the server asked
 * for a password and none was given: the server then waits up to its authentication_timeout, 60 s
 * by default): a one-shot command that had said why it failed stayed up until then.
 */
function closingClient(pg: typeof pgModule): typeof pgModule.Client {
  return class ClosingClient extends pg.Client {
    override connect(): Promise<pgModule.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pgModule.Client) => void)): void;
    override connect(
      callback?: ((err: Error) => void) | ((err: null, c: pgModule.Client) => void),
    ): Promise<pgModule.Client> | void {
      const close = (): void => {
        (this as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      };
      if (callback === undefined) {
        return super.connect().catch((err: unknown) => {
          close();
          throw err;
        });
      }
      super.connect(((err: Error | null, c?: pgModule.Client) => {
        if (err) close();
        (callback as (e: Error | null, c?: pgModule.Client) => void)(err, c);
      }) as (err: Error) => void);
    }
  };
}

/**
 * The PostgreSQL server could not be reached or refused the login (unreachable, wrong password,
 * no such database): the message names the key to fix. A ConfigError, so a one-shot command exits
 * 1; `run` waits and retries instead (src/app/store-wait.ts): the database may come back, or the
 * password be fixed on the server, without restarting the connector.
 */
export class StoreUnavailableError extends ConfigError {}

const CERT_ERRORS =
  /^(SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_|ERR_TLS_CERT_ALTNAME_INVALID|CERT_SIGNATURE_FAILURE|HOSTNAME_MISMATCH)/;

/**
 * Why a PostgreSQL store could not be opened, in one sentence naming the config key to fix (issue
 * 33): the login (password or role), the database, TLS (refused, or a certificate that does not
 * verify), or the server not answering within store.postgres.connectTimeoutMs. The URL is shown
 * without its password or query string.
 */
export function postgresOpenError(
  target: Extract<StoreTarget, { engine: 'postgres' }>,
  err: unknown,
): StoreUnavailableError {
  const e = err as { code?: string; message?: string };
  const where = redactUrl(target.url);
  const msg = (e.message ?? String(err))
    .replace(/postgres(ql)?:\/\/[^\s]+/g, (u) => redactUrl(u))
    .replace(/\s+/g, ' ')
    .trim();
  const code = e.code ?? '';
  if (code === '28000' && /no encryption|SSL off/i.test(msg)) {
    return new StoreUnavailableError(
      `store.postgres.ssl: the server at ${where} refuses a connection without TLS (ssl: disable): set ` +
        `store.postgres.ssl to verify-full (with store.postgres.sslRootCert for a private CA) (${msg})`,
    );
  }
  if (/does not support SSL/i.test(msg)) {
    return new StoreUnavailableError(
      `store.postgres.ssl: the server at ${where} does not offer TLS, and store.postgres.ssl is ${target.ssl}: ` +
        `enable TLS on the server (or, for a local socket only, set store.postgres.ssl: disable)`,
    );
  }
  if (CERT_ERRORS.test(code) || /certificate|altnames|self[- ]signed/i.test(msg)) {
    return new StoreUnavailableError(
      `store.postgres.sslRootCert: the certificate of the server at ${where} does not verify (ssl: ` +
        `${target.ssl}): give the CA that signed it in store.postgres.sslRootCert, or use the host name the ` +
        `certificate names in store.postgres.url (${msg})`,
    );
  }
  if (/client password must be a string|password must be a string/i.test(msg)) {
    // node-postgres's words when the server asks for a password and none was given.
    return new StoreUnavailableError(
      `store.postgres.password (or BOARDING_STORE_PASSWORD): the server at ${where} asks for a password and none ` +
        `is configured: set BOARDING_STORE_PASSWORD (or store.postgres.password)`,
    );
  }
  if (code === '28P01' || code === '28000') {
    return new StoreUnavailableError(
      `store.postgres.password (or BOARDING_STORE_PASSWORD): the server at ${where} refused the login of the ` +
        `role in store.postgres.url (a wrong password or an unknown role): ${msg}`,
    );
  }
  if (code === '3D000')
    return new StoreUnavailableError(`store.postgres.url: ${where}: the database does not exist: ${msg}`);
  if (/timeout/i.test(msg) || code === 'ETIMEDOUT') {
    return new StoreUnavailableError(
      `store.postgres.url: the server at ${where} did not answer within store.postgres.connectTimeoutMs ` +
        `(${target.connectTimeoutMs} ms): check the host and ` +
        `port, and that a firewall lets this host through (${msg})`,
    );
  }
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
  if (target.engine === 'sqlite') return openSqliteStore(target.path, opts);
  // Loaded only for PostgreSQL: an embedded (SQLite) connector does not carry the driver in memory.
  const [{ default: pg }, { migratePg }] = await Promise.all([import('pg'), import('./migrations/pg.js')]);
  // Never the URL as connectionString: the driver would let its sslmode and password win.
  const connection = pgClientConfig(target);
  // Named per process: a replica taking the lease over from this one, once its lease expired, can
  // end exactly these sessions (the stale leader's locks and queued writes go with them).
  const instance = randomUUID().slice(0, 8);
  const pool = new pg.Pool({
    ...connection,
    Client: closingClient(pg),
    max: target.poolSize,
    application_name: opts.applicationName ?? sessionName(instance),
    types: storeTypes(pg),
  });
  pool.on('error', (err) => {
    opts.logger?.warn(
      { err: { message: err.message }, db: redactUrl(target.url) },
      'idle PostgreSQL connection lost; the pool reconnects',
    );
  });
  // A connection the server ends while it is checked out (a restart, pg_terminate_backend) emits
  // 'error' on the client, which the pool does not handle for checked-out clients: unhandled, it
  // would end the process. The statement in progress fails with it anyway; here it is only logged.
  pool.on('connect', (client) => {
    client.on('error', (err) => {
      opts.logger?.warn(
        { err: { message: err.message }, db: redactUrl(target.url) },
        'PostgreSQL connection lost while in use; its statement fails and the pool reconnects',
      );
    });
  });
  let pooler: string | null;
  try {
    pooler = await poolerProblem(
      pool,
      () => new (closingClient(pg))({ ...connection, application_name: 'boarding-connector pooler check' }),
    );
    if (pooler === null) await migratePg(pool);
  } catch (err) {
    await pool.end().catch(() => undefined);
    if ((err as Error).message.startsWith('PostgreSQL migration')) throw err;
    throw postgresOpenError(target, err);
  }
  if (pooler !== null) {
    await pool.end().catch(() => undefined);
    throw new ConfigError(`store.postgres.url: ${redactUrl(target.url)}: ${pooler}`);
  }
  return pgStore(pool, redactUrl(target.url), opts.applicationName === undefined ? instance : null);
}

/**
 * The TLS of a PostgreSQL store's session as the server saw it (pg_stat_ssl), for `config check
 * --connect`: protocol, cipher and what was verified (store.postgres.ssl). null on SQLite. Behind a
 * pooler this is the pooler's own session to the server.
 */
export async function describeStoreTls(db: StoreDb, ssl: PgSslMode): Promise<string | null> {
  if (db.pool === null) return null;
  const r = await db.get<{ ssl: boolean; version: string | null; cipher: string | null }>(
    'SELECT ssl, version, cipher FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
  );
  if (r === undefined || !r.ssl) return `no TLS (store.postgres.ssl: ${ssl})`;
  const checked =
    ssl === 'verify-full'
      ? 'certificate verified, host name checked'
      : ssl === 'verify-ca'
        ? 'certificate verified, host name not checked'
        : 'certificate NOT verified';
  return `TLS ${r.version ?? '?'} (${r.cipher ?? '?'}), ${checked} (store.postgres.ssl: ${ssl})`;
}
