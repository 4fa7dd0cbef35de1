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

/** SQLite's persisted rate state: the spend log, pauses and strikes of migration 1 (synchronous on purpose). */
export interface SqliteRateState {
  readonly shared: boolean;
  loadSpend(bucket: RateBucketName, sinceMs: number): number[];
  recordSpend(bucket: RateBucketName, at: number): void;
  loadPause(bucket: RateBucketName): number | null;
  savePause(bucket: RateBucketName, until: number): void;
  recordStrike(strike: Omit<StrikeRow, 'seq'>): void;
  activeStrikes(sinceMs: number): StrikeRow[];
  clearStrikes(by: string, at?: number): number;
  prune(spendBeforeMs: number, strikesBeforeMs: number): void;
  close(): void;
}

/**
 * Spend rows are written once per request, so they go through their own connection with
 * synchronous=NORMAL: in WAL mode a commit then survives a crash or kill of the process (the
 * restart case the budget guards against) without an fsync per request, which at FULL costs
 * milliseconds of blocked event loop each (measured ~4 ms here) and stalled the whole client.
 * Only a power loss can drop the last few spend rows, and a reboot outlasts a rate window anyway.
 * Strikes and pauses are rare and stay on the caller's FULL connection.
 */
function openSpendConnection(db: Db): { conn: Db; owned: boolean } {
  if (db.memory || db.readonly) return { conn: db, owned: false };
  const conn = new Database(db.name, { fileMustExist: true });
  conn.pragma('busy_timeout = 5000');
  conn.pragma('synchronous = NORMAL');
  return { conn, owned: true };
}

/** SQLite-backed state on the tables of migration 1 (rate_spend, rate_strikes, rate_pause). */
export function createSqliteRateState(db: Db): SqliteRateState {
  const spendDb = openSpendConnection(db);
  const insertSpend = spendDb.conn.prepare('INSERT INTO rate_spend (bucket, at) VALUES (?, ?)');
  const selectSpend = db.prepare<[string, number], { at: number }>(
    'SELECT at FROM rate_spend WHERE bucket = ? AND at >= ? ORDER BY at ASC',
  );
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
  const pruneSpend = db.prepare('DELETE FROM rate_spend WHERE at < ?');
  const pruneStrikes = db.prepare('DELETE FROM rate_strikes WHERE at < ?');
  const prunePause = db.prepare('DELETE FROM rate_pause WHERE until < ?');
  return {
    shared: !db.memory,
    loadSpend: (bucket, sinceMs) => selectSpend.all(bucket, sinceMs).map((r) => r.at),
    recordSpend: (bucket, at) => {
      insertSpend.run(bucket, at);
    },
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
