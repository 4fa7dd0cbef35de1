import { randomBytes } from 'node:crypto';
import type pg from 'pg';

const PROBE = 'boarding.pooler_probe';

/**
 * Whether the connections go through a pooler mode the connector cannot work behind (issue 33),
 * asked once when the store opens: a sentence saying what and which mode works, or null.
 *
 * - Statement pooling refuses every transaction of more than one statement: nothing could be
 *   written. Told by the pooler's own refusal of BEGIN.
 * - Transaction pooling hands a server session to whichever client runs the next transaction:
 *   the standby's LISTEN (leadership releases) never hears anything, and the lease takeover's
 *   ending of a stale leader's sessions (by application_name) can end another client's. Told by a
 *   session setting made on one connection showing on another: PgBouncer gives the server session
 *   one client just released to the next one (LIFO, its default), which never happens on a server
 *   or a session-pooling PgBouncer (each client its own session; DISCARD ALL between clients).
 *
 * Costs two connections of the pool (kept for later use) at start, or one more when the pool has one.
 */
export async function poolerProblem(pool: pg.Pool, extraClient?: () => pg.Client): Promise<string | null> {
  const a = await pool.connect();
  let b: pg.PoolClient | pg.Client | null = null;
  let broken: Error | undefined;
  try {
    try {
      await a.query('BEGIN');
      await a.query('COMMIT');
    } catch (err) {
      const m = (err as Error).message;
      if (/pooling mode|transaction blocks not allowed/i.test(m)) {
        return (
          `the connections go through a statement-pooling pooler (${m}): the connector's writes are ` +
          `transactions; use PgBouncer's pool_mode = session (docs/deploy.md "Poolers")`
        );
      }
      throw err;
    }
    const token = randomBytes(8).toString('hex');
    await a.query(`SELECT set_config('${PROBE}', $1, false)`, [token]);
    if ((pool.options.max ?? 10) >= 2) {
      b = await pool.connect();
    } else if (extraClient !== undefined) {
      b = extraClient();
      await b.connect();
    } else {
      return null; // a pool of one cannot lend a second connection while holding the first
    }
    const seen =
      (await b.query<{ v: string | null }>(`SELECT current_setting('${PROBE}', true) AS v`)).rows[0]?.v ??
      null;
    await a.query(`SELECT set_config('${PROBE}', '', false)`);
    if (seen === token) {
      return (
        'the connections go through a transaction-pooling pooler (a session setting of one connection ' +
        'showed on another): leadership needs sessions of its own (LISTEN for releases, ending a stale ' +
        'leader\'s sessions); use PgBouncer\'s pool_mode = session (docs/deploy.md "Poolers")'
      );
    }
    return null;
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    a.release(broken);
    if (b !== null) {
      if ('release' in b) b.release(broken);
      else await b.end().catch(() => undefined);
    }
  }
}
