import Database from 'better-sqlite3';
import type { Db } from '../sqlite/db.js';
import type { StoreDb } from '../sql.js';

/** The shapes the platform client's port asks for (src/platform/rate-budget/ledger.ts); matched structurally. */
type RateBucketName = 'read' | 'write';

interface StrikeRow {
  seq: number;
  at: number;
  bucket: RateBucketName;
  path: string | null;
  retryAfterMs: number | null;
}

interface SpendWindow {
  spent: number;
  until: number;
}

/**
 * SQLite's persisted rate state: each process's spend window (migration 22), pauses and strikes of
 * migration 1 (synchronous on purpose).
 */
export interface SqliteRateState {
  readonly shared: boolean;
  reserve(
    owner: string,
    bucket: RateBucketName,
    now: number,
    windowMs: number,
    mine: SpendWindow | null,
  ): { others: SpendWindow[]; pause: number | null };
  loadPause(bucket: RateBucketName): number | null;
  savePause(bucket: RateBucketName, until: number): void;
  recordStrike(strike: Omit<StrikeRow, 'seq'>): void;
  activeStrikes(sinceMs: number): StrikeRow[];
  clearStrikes(by: string, at?: number): number;
  prune(spendBeforeMs: number, strikesBeforeMs: number): void;
  close(): void;
}

/**
 * Spend windows are written up to once a second per bucket while the process spends (see
 * src/platform/rate-budget/in-process.ts), so they go through their own connection with
 * synchronous=NORMAL: in WAL mode a commit then survives a crash or kill of the process (the
 * restart case the budget guards against) without an fsync each, which at FULL costs milliseconds of
 * blocked event loop (measured ~4 ms here). Only a power loss can drop the last window written, and
 * a reboot outlasts a rate window anyway. Strikes and pauses are rare and stay on the caller's FULL
 * connection.
 */
function openSpendConnection(db: Db): { conn: Db; owned: boolean } {
  if (db.memory || db.readonly) return { conn: db, owned: false };
  const conn = new Database(db.name, { fileMustExist: true });
  conn.pragma('busy_timeout = 5000');
  conn.pragma('synchronous = NORMAL');
  return { conn, owned: true };
}

/** SQLite-backed state on rate_spend_windows (migration 22), rate_strikes and rate_pause (migration 1). */
export function createSqliteRateState(db: Db): SqliteRateState {
  const spendDb = openSpendConnection(db);
  // The other owners' windows and the pause come back with the write, in the same statement: one
  // statement, atomic on its own, so two processes reserving at once are serialised by SQLite.
  const VIEW = `(SELECT json_group_array(json_array(o.spent, o.until)) FROM rate_spend_windows o
      WHERE o.bucket = :bucket AND o.owner <> :owner AND o.until > :since) AS others,
    (SELECT p.until FROM rate_pause p WHERE p.bucket = :bucket) AS pause`;
  const upsertWindow = spendDb.conn.prepare<
    { owner: string; bucket: string; spent: number; until: number; since: number },
    { others: string; pause: number | null }
  >(
    'INSERT INTO rate_spend_windows (owner, bucket, spent, until) VALUES (:owner, :bucket, :spent, :until) ' +
      'ON CONFLICT (owner, bucket) DO UPDATE SET spent = excluded.spent, until = excluded.until ' +
      `RETURNING ${VIEW}`,
  );
  const selectView = spendDb.conn.prepare<
    { owner: string; bucket: string; since: number },
    { others: string; pause: number | null }
  >(`SELECT ${VIEW}`);
  const view = (r: { others: string; pause: number | null } | undefined) => ({
    others: (JSON.parse(r?.others ?? '[]') as Array<[number, number]>).map(([spent, until]) => ({
      spent,
      until,
    })),
    pause: r?.pause ?? null,
  });
  const selectPause = db.prepare<[string], { until: number }>(
    'SELECT until FROM rate_pause WHERE bucket = ?',
  );
  // A pause only ever grows: a shorter one computed later must not cut a longer one short.
  const upsertPause = db.prepare(
    'INSERT INTO rate_pause (bucket, until) VALUES (?, ?) ON ' +
      'CONFLICT(bucket) DO UPDATE SET until = MAX(until, excluded.until)',
  );
  const insertStrike = db.prepare(
    'INSERT INTO rate_strikes (at, bucket, path, retry_after_ms) VALUES (?, ?, ?, ?)',
  );
  const selectStrikes = db.prepare<
    [number],
    { seq: number; at: number; bucket: string; path: string | null; retry_after_ms: number | null }
  >(
    'SELECT seq, at, bucket, path, retry_after_ms FROM rate_strikes ' +
      'WHERE at >= ? AND cleared_at IS NULL ORDER BY at ASC, seq ASC',
  );
  const clear = db.prepare('UPDATE rate_strikes SET cleared_at = ?, cleared_by = ? WHERE cleared_at IS NULL');
  const pruneSpend = db.prepare('DELETE FROM rate_spend_windows WHERE until < ?');
  const pruneStrikes = db.prepare('DELETE FROM rate_strikes WHERE at < ?');
  const prunePause = db.prepare('DELETE FROM rate_pause WHERE until < ?');
  return {
    shared: !db.memory,
    reserve: (owner, bucket, now, windowMs, mine) =>
      view(
        mine === null
          ? selectView.get({ owner, bucket, since: now - windowMs })
          : upsertWindow.get({ owner, bucket, spent: mine.spent, until: mine.until, since: now - windowMs }),
      ),
    loadPause: (bucket) => selectPause.get(bucket)?.until ?? null,
    savePause: (bucket, until) => {
      upsertPause.run(bucket, Math.ceil(until));
    },
    recordStrike: (s) => {
      insertStrike.run(s.at, s.bucket, s.path, s.retryAfterMs === null ? null : Math.round(s.retryAfterMs));
    },
    activeStrikes: (sinceMs) =>
      selectStrikes.all(sinceMs).map((r) => ({
        seq: r.seq,
        at: r.at,
        bucket: r.bucket === 'write' ? 'write' : 'read',
        path: r.path,
        retryAfterMs: r.retry_after_ms,
      })),
    clearStrikes: (by, at = Date.now()) => clear.run(at, by).changes,
    prune: (spendBeforeMs, strikesBeforeMs) => {
      db.transaction(() => {
        pruneSpend.run(spendBeforeMs);
        pruneStrikes.run(strikesBeforeMs);
        prunePause.run(spendBeforeMs);
      }).immediate();
    },
    close: () => {
      if (spendDb.owned && spendDb.conn.open) spendDb.conn.close();
    },
  };
}

/**
 * The persisted rate state of a SQLite store (its tables; the budget is synchronous, see
 * RateStateStore). There is none on PostgreSQL: every process there spends from the shared ledger
 * (src/store/rate-budget/pg.ts), which the composition root (src/app/platform.ts) opens instead.
 */
export function rateStateFor(db: StoreDb): SqliteRateState {
  if (db.sqlite === null)
    throw new Error(
      `the ${db.engine} store has no per-process rate state: its processes share the ledger of ` +
        `src/store/rate-budget/pg.ts`,
    );
  return createSqliteRateState(db.sqlite);
}
