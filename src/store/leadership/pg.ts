import type { Logger } from '../../lib/logger.js';
import {
  holderParts,
  Leadership,
  type LeadershipOptions,
  type LeaseBackend,
  type LeaseRow,
  type LeaseTerm,
} from './leadership.js';
import { inTransaction, type PgPool, type Queryable } from '../pg/pool.js';
import { sessionName } from '../pg/url.js';

export { type LeaseRow, type LeaseTerm } from './leadership.js';
export { FencedOut } from './fence.js';

/**
 * The PostgreSQL side of leadership with fencing (src/store/leadership/leadership.ts has the rules): the lease
 * row is `leader_lease` (migration 15), every decision on the database's clock (clock_timestamp()).
 * A takeover locks that row FOR UPDATE, so it waits for a fenced transaction in progress (which
 * holds the row FOR KEY SHARE) to commit: the old leader's write is ordered before the takeover, and
 * a fenced transaction that starts after it finds a different holder/epoch and changes nothing.
 * A renewal is a plain UPDATE of the expiry (FOR NO KEY UPDATE): it does not wait for fenced
 * transactions, so the leader's own writes never hold its renewals back.
 * Never a session advisory lock: behind a pooler (PgBouncer) a session lock can outlive or miss its
 * session, which is how split brain happens.
 */

export const LEASE_CHANNEL = 'boarding_lease';

const msInterval = (ms: number): string => `${Math.max(0, Math.round(ms))} milliseconds`;

// ---- the statements (exported so tests can run them inside their own transactions) ----

/**
 * One statement: takes the lease when free or expired, epoch + 1. null when someone else holds it.
 * Its own holder may take it again (a new epoch): a replica that stepped down locally (its trust
 * deadline passed during a slow acquisition or renew) need not wait out its own lease, and the
 * new epoch fences whatever its old term still tries to write.
 * `previous`: the holder it was taken from (null when it was free: released, or never held).
 */
export async function acquireLease(
  q: Queryable,
  name: string,
  holder: string,
  ttlMs: number,
): Promise<{ epoch: number; expiresAt: Date; previous: string | null } | null> {
  // The row FOR UPDATE first: it conflicts with the fence's FOR KEY SHARE (fence.ts), so the
  // takeover waits for a fenced transaction in progress, and fence checks that come while it is
  // uncommitted wait for it and then see the new holder. The upsert alone (FOR NO KEY UPDATE) would
  // not wait for them; a renewal, which is that kind of update only, must not.
  const locked = await q.query<{ holder: string | null }>(
    'SELECT holder FROM leader_lease WHERE name = $1 FOR UPDATE',
    [name],
  );
  const previous = locked.rows[0]?.holder ?? null;
  const r = await q.query<{ epoch: string; expires_at: Date }>(
    `INSERT INTO leader_lease AS l (name, holder, epoch, acquired_at, renewed_at, expires_at)
       VALUES ($1, $2, 1, clock_timestamp(), clock_timestamp(), clock_timestamp() + $3::interval)
     ON CONFLICT (name) DO UPDATE
       SET holder = excluded.holder, epoch = l.epoch + 1, acquired_at = clock_timestamp(),
           renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $3::interval
       WHERE l.holder IS NULL OR l.expires_at <= clock_timestamp() OR l.holder = excluded.holder
     RETURNING epoch, expires_at`,
    [name, holder, msInterval(ttlMs)],
  );
  const row = r.rows[0];
  return row ? { epoch: Number(row.epoch), expiresAt: row.expires_at, previous } : null;
}

/**
 * Ends every session of a stale holder's process (its store's application_name, sql.ts instance):
 * its open write transactions roll back at once, releasing the shared write lock and the lease
 * row, instead of each waiting out the idle timeout in turn (a SIGSTOPped leader with four write
 * transactions queued held the write lock for a minute). Only ever called for a holder whose lease
 * has expired on the database's clock: its writes are fenced out anyway. Returns how many ended.
 */
export async function evictHolder(q: Queryable, holder: string): Promise<number> {
  const instance = holderParts(holder).instance;
  if (instance === null) return 0;
  const r = await q.query<{ ended: boolean }>(
    `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()`,
    [sessionName(instance)],
  );
  return r.rows.filter((x) => x.ended).length;
}

/** One statement: extends the lease only for the same holder and epoch, before expiry. */
export async function renewLease(q: Queryable, term: LeaseTerm, ttlMs: number): Promise<boolean> {
  const r = await q.query(
    `UPDATE leader_lease SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $4::interval
      WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > clock_timestamp()`,
    [term.name, term.holder, term.epoch, msInterval(ttlMs)],
  );
  return r.rowCount === 1;
}

/** One statement: frees the lease (same holder and epoch) and notifies the standbys. */
export async function releaseLease(q: Queryable, term: LeaseTerm): Promise<boolean> {
  const r = await q.query(
    `WITH freed AS (
       UPDATE leader_lease SET holder = NULL, expires_at = clock_timestamp()
        WHERE name = $1 AND holder = $2 AND epoch = $3 RETURNING name)
     SELECT pg_notify('${LEASE_CHANNEL}', name) FROM freed`,
    [term.name, term.holder, term.epoch],
  );
  return r.rowCount === 1;
}

export async function readLease(q: Queryable, name: string): Promise<LeaseRow | null> {
  const r = await q.query<{ name: string; holder: string | null; epoch: string; expires_in_ms: number }>(
    `SELECT name, holder, epoch, (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS expires_in_ms
       FROM leader_lease WHERE name = $1`,
    [name],
  );
  const row = r.rows[0];
  return row
    ? { name: row.name, holder: row.holder, epoch: Number(row.epoch), expiresInMs: row.expires_in_ms }
    : null;
}

// ---- the replica's view ----

/** How long an acquisition waits for the lease row (a stale leader's fenced transaction holds it FOR KEY SHARE). */
const ACQUIRE_LOCK_TIMEOUT_MS = 1_000;

export function pgLeaseBackend(pool: PgPool, logger?: Logger): LeaseBackend {
  const evict = async (holder: string, why: string): Promise<void> => {
    try {
      const ended = await evictHolder(pool, holder);
      if (ended > 0)
        logger?.warn(
          { previous: holder, sessions: ended },
          `leadership: ended the sessions of the previous leader (${why})`,
        );
    } catch (err) {
      logger?.warn(
        { err: { message: (err as Error).message }, previous: holder },
        "leadership: could not end the previous leader's sessions; they end at their idle timeout",
      );
    }
  };
  const tryAcquire = (name: string, holder: string, ttlMs: number) =>
    inTransaction(pool, async (tx) => {
      await tx.query(`SET LOCAL lock_timeout = ${ACQUIRE_LOCK_TIMEOUT_MS}`);
      return acquireLease(tx, name, holder, ttlMs);
    });
  return {
    async acquire(name, holder, ttlMs) {
      let got: Awaited<ReturnType<typeof acquireLease>>;
      try {
        got = await tryAcquire(name, holder, ttlMs);
      } catch (err) {
        if ((err as { code?: string }).code !== '55P03') throw err;
        // The row is locked: by a live leader's fenced write (it commits in milliseconds), or by a
        // stale one paused inside its transaction. Expired on the database's clock: end its sessions.
        const row = await readLease(pool, name);
        if (row === null || row.holder === null || row.holder === holder || row.expiresInMs > 0) return null;
        await evict(row.holder, 'its lease expired while it held the lease row');
        try {
          got = await tryAcquire(name, holder, ttlMs);
        } catch (again) {
          if ((again as { code?: string }).code === '55P03') return null;
          throw again;
        }
      }
      if (got === null) return null;
      // Taken over from a holder whose lease expired: its queued write transactions would each
      // hold the shared write lock until their idle timeout. End them now.
      if (got.previous !== null && got.previous !== holder)
        await evict(got.previous, 'taken over after its lease expired');
      return { epoch: got.epoch };
    },
    renew: (term, ttlMs) => renewLease(pool, term, ttlMs),
    release: (term) => releaseLease(pool, term),
    read: (name) => readLease(pool, name),
    async listen(name, fn, onDrop) {
      const client = await pool.connect();
      let dropped = false;
      const onNotification = (n: { channel: string; payload?: string | undefined }): void => {
        if (n.channel === LEASE_CHANNEL && n.payload === name) fn();
      };
      // The listening connection is destroyed, never handed back to the pool (it would carry the
      // LISTEN and these handlers to another user). A no-op error handler stays on it: a socket
      // error after the drop must not become an uncaught exception.
      const drop = (): void => {
        if (dropped) return;
        dropped = true;
        client.off('notification', onNotification);
        client.release(true);
        onDrop();
      };
      client.on('notification', onNotification);
      client.on('error', () => {
        logger?.debug('leadership: the LISTEN connection dropped; polling until it is back');
        drop();
      });
      try {
        await client.query(`LISTEN ${LEASE_CHANNEL}`);
      } catch (err) {
        drop();
        throw err;
      }
      return () => {
        if (dropped) return;
        dropped = true;
        client.off('notification', onNotification);
        client.release(true);
      };
    },
  };
}

export interface PgLeadershipOptions extends LeadershipOptions {
  pool: PgPool;
}

/**
 * Leadership on PostgreSQL: the leader_lease row. Its writes are fenced the one way every write is,
 * through the store (Leadership.guard + StoreDb.write: the dialect's fence check in the same
 * transaction).
 */
export class PgLeadership extends Leadership {
  constructor(o: PgLeadershipOptions) {
    super(pgLeaseBackend(o.pool, o.logger), o);
  }
}
