import type { StoreDb } from './sql.js';

/**
 * What running daemons tell other processes on the same state database: which mapping version each
 * boards with (a `sync --once` or `loans reboard` beside them must not board with another one), and
 * whether an operator asked for an early cycle (`loans retry --all`), which they poll for. The
 * boarding lease is only held during a cycle; these rows live as long as their daemon. Two daemons
 * may share a database (one drains at a time), so there is one row per daemon.
 */
export interface DaemonStatus {
  owner: string;
  pid: number;
  host: string;
  startedAt: number;
  updatedAt: number;
  mappingVersion: string;
  mappingDir: string;
  reloadError: string | null;
  cycleRequestedAt: number | null;
  cycleRequestedBy: string | null;
}

export interface DaemonStatusStore {
  /** A daemon starting: its row (replacing one of the same owner). */
  publish(s: Omit<DaemonStatus, 'cycleRequestedAt' | 'cycleRequestedBy'>): Promise<void>;
  /** Heartbeat and reload outcome; false when the row is gone (removed by an operator). */
  touch(
    owner: string,
    now: number,
    patch?: { mappingVersion?: string; reloadError?: string | null },
  ): Promise<boolean>;
  get(owner: string): Promise<DaemonStatus | null>;
  all(): Promise<DaemonStatus[]>;
  remove(owner: string): Promise<void>;
  /** An operator asks every running daemon for a cycle now; how many rows took the request. */
  requestCycle(by: string, now: number): Promise<number>;
}

interface Raw {
  owner: string;
  pid: number;
  host: string;
  started_at: number;
  updated_at: number;
  mapping_version: string;
  mapping_dir: string;
  reload_error: string | null;
  cycle_requested_at: number | null;
  cycle_requested_by: string | null;
}

function fromRaw(r: Raw): DaemonStatus {
  return {
    owner: r.owner,
    pid: r.pid,
    host: r.host,
    startedAt: r.started_at,
    updatedAt: r.updated_at,
    mappingVersion: r.mapping_version,
    mappingDir: r.mapping_dir,
    reloadError: r.reload_error,
    cycleRequestedAt: r.cycle_requested_at,
    cycleRequestedBy: r.cycle_requested_by,
  };
}

export function createDaemonStatusStore(db: StoreDb): DaemonStatusStore {
  const SELECT_ONE = 'SELECT * FROM daemon_status WHERE owner = ?';
  const UPSERT = `INSERT INTO daemon_status
       (owner, pid, host, started_at, updated_at, mapping_version, mapping_dir, reload_error)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT(owner) DO UPDATE SET pid = excluded.pid, host = excluded.host,
       started_at = excluded.started_at,
       updated_at = excluded.updated_at, mapping_version = excluded.mapping_version,
       mapping_dir = excluded.mapping_dir, reload_error = excluded.reload_error`;
  return {
    async publish(s) {
      await db.run(UPSERT, [
        s.owner,
        s.pid,
        s.host,
        s.startedAt,
        s.updatedAt,
        s.mappingVersion,
        s.mappingDir,
        s.reloadError,
      ]);
    },
    async touch(owner, now, patch) {
      if (patch?.mappingVersion === undefined)
        return (
          (await db.run('UPDATE daemon_status SET updated_at = ? WHERE owner = ?', [now, owner])).changes > 0
        );
      const current = await db.get<Raw>(SELECT_ONE, [owner]);
      const reloadError =
        patch.reloadError === undefined ? (current?.reload_error ?? null) : patch.reloadError;
      return (
        (
          await db.run(
            'UPDATE daemon_status SET updated_at = ?, mapping_version = ?, reload_error = ? WHERE owner = ?',
            [now, patch.mappingVersion, reloadError, owner],
          )
        ).changes > 0
      );
    },
    async get(owner) {
      const r = await db.get<Raw>(SELECT_ONE, [owner]);
      return r ? fromRaw(r) : null;
    },
    async all() {
      return (await db.all<Raw>('SELECT * FROM daemon_status ORDER BY started_at, owner')).map(fromRaw);
    },
    async remove(owner) {
      await db.run('DELETE FROM daemon_status WHERE owner = ?', [owner]);
    },
    async requestCycle(by, now) {
      return (
        await db.run('UPDATE daemon_status SET cycle_requested_at = ?, cycle_requested_by = ?', [now, by])
      ).changes;
    },
  };
}

export function liveDaemons(
  rows: readonly DaemonStatus[],
  now: number,
  host: string,
  isAlive: (pid: number) => boolean,
  staleMs = 120_000,
): DaemonStatus[] {
  return rows.filter((s) => (s.host === host ? isAlive(s.pid) : s.updatedAt >= now - staleMs));
}
