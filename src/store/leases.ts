import type { Db } from './db.js';

export interface LeaseOwner {
  owner: string;
  pid: number;
  host: string;
}

export interface LeaseHolder extends LeaseOwner {
  acquiredAt: number;
  heartbeatAt: number;
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
  acquire(name: string, me: LeaseOwner, now: number, ttlMs: number, isAlive: (pid: number) => boolean): LeaseResult;
  heartbeat(name: string, owner: string, now: number): boolean;
  release(name: string, owner: string): void;
  get(name: string): LeaseHolder | null;
}

interface Raw {
  name: string;
  owner: string;
  pid: number;
  host: string;
  acquired_at: number;
  heartbeat_at: number;
}

const toHolder = (r: Raw): LeaseHolder => ({ owner: r.owner, pid: r.pid, host: r.host, acquiredAt: r.acquired_at, heartbeatAt: r.heartbeat_at });

export function createLeaseStore(db: Db): LeaseStore {
  const select = db.prepare<[string], Raw>('SELECT * FROM leases WHERE name = ?');
  const upsert = db.prepare(
    `INSERT INTO leases (name, owner, pid, host, acquired_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT(name) DO UPDATE SET owner = excluded.owner, pid = excluded.pid, host = excluded.host,
       acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at`,
  );
  const beat = db.prepare('UPDATE leases SET heartbeat_at = ? WHERE name = ? AND owner = ?');
  const del = db.prepare('DELETE FROM leases WHERE name = ? AND owner = ?');
  // IMMEDIATE: two processes racing for the lease serialise on the write lock.
  const acquireTx = db.transaction(
    (name: string, me: LeaseOwner, now: number, ttlMs: number, isAlive: (pid: number) => boolean): LeaseResult => {
      const cur = select.get(name);
      if (cur && cur.owner !== me.owner) {
        const holder = toHolder(cur);
        const stale = cur.heartbeat_at < now - ttlMs;
        const dead = cur.host === me.host && !isAlive(cur.pid);
        if (!stale && !dead) return { ok: false, holder };
        upsert.run(name, me.owner, me.pid, me.host, now, now);
        return { ok: true, tookOverFrom: holder, takeoverReason: dead ? 'process_gone' : 'stalled' };
      }
      upsert.run(name, me.owner, me.pid, me.host, cur?.acquired_at ?? now, now);
      return { ok: true, tookOverFrom: null };
    },
  );
  return {
    acquire: (name, me, now, ttlMs, isAlive) => acquireTx.immediate(name, me, now, ttlMs, isAlive),
    heartbeat: (name, owner, now) => beat.run(now, name, owner).changes > 0,
    release: (name, owner) => {
      del.run(name, owner);
    },
    get: (name) => {
      const r = select.get(name);
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
