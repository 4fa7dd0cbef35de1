import { hostname } from 'node:os';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import {
  holderParts,
  Leadership,
  newHolderId,
  type LeaseBackend,
  type LeaseRow,
  type Role,
  type LeaseTerm,
} from './leadership.js';
import type { StoreDb } from '../sql.js';

/**
 * The SQLite side of leadership (src/store/leadership/leadership.ts has the rules): the `leases` table
 * (migrations 3 and 14), every decision on the database host's clock inside one IMMEDIATE write
 * transaction, which a fenced write also takes (sql.ts): a takeover and a stale holder's write are
 * serialised, and the stale one finds another epoch. SQLite is one host, so one more rule keeps a
 * SIGKILLed daemon from blocking its own restart for a whole TTL: a holder on this host whose
 * process is gone has given the lease up.
 */

/** Milliseconds since the epoch on the database host's clock, in SQL. */
const NOW_MS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;

interface Raw {
  owner: string;
  pid: number;
  host: string;
  heartbeat_at: number;
  epoch: number;
  expires_at: number | null;
  now: number;
}

export function sqliteLeaseBackend(
  db: StoreDb,
  isAlive: (pid: number) => boolean = processAlive,
): LeaseBackend {
  const here = hostname();
  return {
    acquire: (name, holder, ttlMs) =>
      db.write(
        async () => {
          const cur = await db.get<Raw>(
            `SELECT owner, pid, host, heartbeat_at, epoch, expires_at, ${NOW_MS} AS now FROM leases WHERE name = ?`,
            [name],
          );
          if (cur !== undefined && cur.owner !== holder) {
            const now = Number(cur.now);
            // A row of a connector before leadership (no expiry): its heartbeat tells.
            const expired =
              cur.expires_at === null
                ? Number(cur.heartbeat_at) < now - ttlMs
                : Number(cur.expires_at) <= now;
            const gone = cur.host === here && !isAlive(Number(cur.pid));
            if (!expired && !gone) return null;
          }
          const { pid, host } = holderParts(holder);
          const epoch = (cur === undefined ? 0 : Number(cur.epoch)) + 1;
          await db.run(
            `INSERT INTO leases (name, owner, pid, host, acquired_at, heartbeat_at, epoch, expires_at)
               VALUES (?, ?, ?, ?, ${NOW_MS}, ${NOW_MS}, ?, ${NOW_MS} + ?)
             ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, pid = excluded.pid, host = excluded.host,
               acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at, epoch = excluded.epoch,
               expires_at = excluded.expires_at`,
            [name, holder, pid ?? 0, host ?? '', epoch, Math.round(ttlMs)],
          );
          return { epoch };
        },
        { unfenced: true },
      ),
    renew: async (term, ttlMs) =>
      (
        await db.write(
          () =>
            db.run(
              `UPDATE leases SET heartbeat_at = ${NOW_MS}, expires_at = ${NOW_MS} + ? WHERE name = ? AND owner = ` +
                `? AND epoch = ? AND expires_at > ${NOW_MS}`,
              [Math.round(ttlMs), term.name, term.holder, term.epoch],
            ),
          { unfenced: true },
        )
      ).changes === 1,
    release: async (term) =>
      (
        await db.write(
          () =>
            db.run(`UPDATE leases SET expires_at = ${NOW_MS} WHERE name = ? AND owner = ? AND epoch = ?`, [
              term.name,
              term.holder,
              term.epoch,
            ]),
          {
            unfenced: true,
          },
        )
      ).changes === 1,
    read: async (name): Promise<LeaseRow | null> => {
      const r = await db.get<{
        owner: string;
        epoch: number;
        expires_in_ms: number | null;
        heartbeat_at: number;
        now: number;
      }>(
        `SELECT owner, epoch, expires_at - ${NOW_MS} AS expires_in_ms, ` +
          `heartbeat_at, ${NOW_MS} AS now FROM leases WHERE name = ?`,
        [name],
      );
      if (r === undefined) return null;
      const expiresInMs =
        r.expires_in_ms === null ? Number(r.heartbeat_at) + 60_000 - Number(r.now) : Number(r.expires_in_ms);
      return { name, holder: expiresInMs > 0 ? r.owner : null, epoch: Number(r.epoch), expiresInMs };
    },
  };
}

export interface LeadershipSettings {
  /** The lease's name (one per leadership): 'boarding'. */
  name: string;
  clock: Clock;
  logger?: Logger;
  ttlMs?: number;
  renewEveryMs?: number;
  marginMs?: number;
  /** Default: host:pid:random (newHolderId). */
  holder?: string;
  onChange?: (role: Role, term: LeaseTerm | null) => void;
  /** SQLite: whether a pid on this host is alive (tests). */
  isAlive?: (pid: number) => boolean;
}

/**
 * The leadership of a store, on its engine: PostgreSQL's leader_lease (loaded only for that engine,
 * as the pg driver is) or SQLite's leases table.
 */
export async function openLeadership(db: StoreDb, s: LeadershipSettings): Promise<Leadership> {
  const holder = s.holder ?? newHolderId(db.instance ?? undefined);
  const common = {
    name: s.name,
    holder,
    clock: s.clock,
    ...(s.logger ? { logger: s.logger } : {}),
    ...(s.ttlMs !== undefined ? { ttlMs: s.ttlMs } : {}),
    ...(s.renewEveryMs !== undefined ? { renewEveryMs: s.renewEveryMs } : {}),
    ...(s.marginMs !== undefined ? { marginMs: s.marginMs } : {}),
    ...(s.onChange ? { onChange: s.onChange } : {}),
  };
  if (db.pool !== null) {
    const { PgLeadership } = await import('./pg.js');
    return new PgLeadership({ pool: db.pool, ...common });
  }
  return new Leadership(sqliteLeaseBackend(db, s.isAlive), common);
}

/** True unless the process is known to be gone (EPERM means it exists but is not ours). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}
