import pg from 'pg';
import type { Logger } from '../../lib/logger.js';
import { redactUrl } from '../../lib/redact.js';

export type PgPool = pg.Pool;
export type PgClient = pg.PoolClient;
/** Anything a single statement can run on: a pool (autocommit) or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

export interface PgPoolOptions {
  url: string;
  /** The connection itself (password, TLS): when given, the URL only names the server in messages. */
  client?: pg.ClientConfig;
  /** Connections in the pool. Default 5. */
  max?: number;
  /** Shows in pg_stat_activity: which replica a backend belongs to. */
  applicationName?: string;
  logger?: Logger;
}

/**
 * A node-postgres pool for the shared state. An idle connection the server closes (a restart, a
 * failover, pg_terminate_backend) makes the pool emit 'error'; unhandled, that event would kill
 * the process, so it is logged here and the pool opens a fresh connection on the next query.
 * Nothing about leadership is tied to a connection (no session advisory locks): losing one loses
 * no lease.
 */
export function openPgPool(opts: PgPoolOptions): PgPool {
  const pool = new pg.Pool({
    ...(opts.client ?? { connectionString: opts.url }),
    max: opts.max ?? 5,
    application_name: opts.applicationName ?? 'boarding-connector',
    connectionTimeoutMillis: 10_000,
  });
  pool.on('error', (err) => {
    opts.logger?.warn(
      { err: { message: err.message }, db: redactUrl(opts.url) },
      'idle PostgreSQL connection lost; the pool reconnects',
    );
  });
  return pool;
}

/** Runs fn in one transaction on one connection: COMMIT when it resolves, ROLLBACK when it throws. */
export async function inTransaction<T>(
  pool: PgPool,
  fn: (tx: PgClient) => Promise<T>,
  begin = 'BEGIN',
): Promise<T> {
  const client = await pool.connect();
  let broken: unknown = null;
  // A checked-out connection the server ends between statements (pg_terminate_backend, an idle
  // transaction timeout, a failover) emits 'error' on the client, which the pool does not handle
  // for checked-out clients: without a listener it would crash the process. The next statement
  // fails with it anyway, so here it is only remembered.
  const onError = (err: Error): void => {
    broken = err;
  };
  client.on('error', onError);
  try {
    await client.query(begin);
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch (rollbackErr) {
      broken = rollbackErr; // the connection is gone: do not hand it back to the pool
    }
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken instanceof Error ? broken : undefined);
  }
}
