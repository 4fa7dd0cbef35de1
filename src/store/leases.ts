import { toStoreDb, type AnyDb } from './sql.js';

export interface LeaseOwner {
  owner: string;
  pid: number;
  host: string;
}

export interface LeaseHolder extends LeaseOwner {
  acquiredAt: number;
  heartbeatAt: number;
  /** Incremented whenever the lease changes hands: the fencing token (sql.ts, Fence). */
  epoch: number;
}

/** Why a lease changed hands: its holder's process is gone (same host), or it stopped heartbeating. */
export type TakeoverReason = 'process_gone' | 'stalled';

export type LeaseResult =
  | { ok: true; tookOverFrom: LeaseHolder | null; takeoverReason?: TakeoverReason }
  | { ok: false; holder: LeaseHolder };

/**
 * A named lease in the state database: one holder at a time. A holder that stopped heartbeating
 * for ttlMs, or whose process is gone (same host), loses it — a SIGKILLed daemon must not block
 * its own restart.
 */
export interface LeaseStore {
  acquire(name: string, me: LeaseOwner, now: number, ttlMs: number, isAlive: (pid: number) => boolean): Promise<LeaseResult>;
  heartbeat(name: string, owner: string, now: number): Promise<boolean>;
  release(name: string, owner: string): Promise<void>;
  get(name: string): Promise<LeaseHolder | null>;
}

interface Raw {
  name: string;
  owner: string;
  pid: number;
  host: string;
  acquired_at: number;
  heartbeat_at: number;
  epoch: number;
}

const toHolder = (r: Raw): LeaseHolder => ({ owner: r.owner, pid: r.pid, host: r.host, acquiredAt: r.acquired_at, heartbeatAt: r.heartbeat_at, epoch: Number(r.epoch) });

export function createLeaseStore(anyDb: AnyDb): LeaseStore {
  const db = toStoreDb(anyDb);
  const SELECT = 'SELECT * FROM leases WHERE name = ?';
  // epoch: + 1 when the holder changes (a new holder's writes are fenced against the old one's).
  const UPSERT = `INSERT INTO leases (name, owner, pid, host, acquired_at, heartbeat_at, epoch, expires_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?)
     ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, pid = excluded.pid, host = excluded.host,
       acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at,
       epoch = CASE WHEN leases.owner = excluded.owner THEN leases.epoch ELSE leases.epoch + 1 END`;
  return {
    // One write transaction (IMMEDIATE on SQLite): two processes racing for the lease serialise on it.
    acquire: (name, me, now, ttlMs, isAlive) =>
      db.write(async (): Promise<LeaseResult> => {
        const cur = await db.get<Raw>(SELECT, [name]);
        if (cur && cur.owner !== me.owner) {
          const holder = toHolder(cur);
          const stale = cur.heartbeat_at < now - ttlMs;
          const dead = cur.host === me.host && !isAlive(cur.pid);
          if (!stale && !dead) return { ok: false, holder };
          await db.run(UPSERT, [name, me.owner, me.pid, me.host, now, now, now + ttlMs]);
          return { ok: true, tookOverFrom: holder, takeoverReason: dead ? 'process_gone' : 'stalled' };
        }
        await db.run(UPSERT, [name, me.owner, me.pid, me.host, cur?.acquired_at ?? now, now, now + ttlMs]);
        return { ok: true, tookOverFrom: null };
      }),
    // The expiry moves with the heartbeat, keeping the term's length.
    heartbeat: async (name, owner, now) =>
      (await db.run('UPDATE leases SET expires_at = expires_at + (? - heartbeat_at), heartbeat_at = ? WHERE name = ? AND owner = ?', [now, now, name, owner])).changes > 0,
    release: async (name, owner) => {
      await db.run('DELETE FROM leases WHERE name = ? AND owner = ?', [name, owner]);
    },
    get: async (name) => {
      const r = await db.get<Raw>(SELECT, [name]);
      return r ? toHolder(r) : null;
    },
  };
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
