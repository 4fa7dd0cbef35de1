import Database from 'better-sqlite3';
import type { Db } from './sqlite/db.js';
import type { StoreDb } from './sql.js';

export type RateBucketName = 'read' | 'write';

export interface StrikeRecord {
  seq: number;
  at: number;
  bucket: RateBucketName;
  path: string | null;
  retryAfterMs: number | null;
}

export interface NewStrike {
  at: number;
  bucket: RateBucketName;
  path: string | null;
  retryAfterMs: number | null;
}

/**
 * Where the rate budget keeps what must survive a restart: the attempts spent in the current
 * window (so a crash loop cannot burst past the limit), whole-bucket pauses after a 429, and the
 * 429-strike ledger (a live key is revoked after 3 strikes in 24 h). Synchronous on purpose: the
 * token is recorded before the request leaves, never after.
 */
export interface RateStateStore {
  /**
   * true when other processes may spend from the same store (a CLI command beside the daemon on
   * one state file): the budget then re-reads spend, pauses and strikes instead of trusting its
   * in-memory copy.
   */
  readonly shared: boolean;
  /** Attempt timestamps of a bucket at or after sinceMs, ascending. */
  loadSpend(bucket: RateBucketName, sinceMs: number): number[];
  recordSpend(bucket: RateBucketName, at: number): void;
  /** The pause of a bucket (epoch ms), or null. */
  loadPause(bucket: RateBucketName): number | null;
  savePause(bucket: RateBucketName, until: number): void;
  recordStrike(strike: NewStrike): void;
  /** Strikes at or after sinceMs that no operator has cleared, oldest first. */
  activeStrikes(sinceMs: number): StrikeRecord[];
  /** An operator acknowledges the strikes (after talking to the platform): returns how many. */
  clearStrikes(by: string, at?: number): number;
  /** Drops spend rows older than spendBeforeMs and cleared/expired strikes older than strikesBeforeMs. */
  prune(spendBeforeMs: number, strikesBeforeMs: number): void;
  /** Releases what the store opened itself (not the Db it was given). */
  close?(): void;
}

/** A rate class of a shared ledger: the client's bucket. */
export type RateClass = RateBucketName;

export type TakeResult =
  /** atUs: the grant's time on the ledger's (database) clock, µs since the epoch. */
  | { decision: 'granted'; atMs: number; atUs: bigint; strikes: number }
  | { decision: 'wait' | 'paused'; waitMs: number; atMs: number; strikes: number }
  | { decision: 'stopped'; atMs: number; strikes: number };

/**
 * A rate budget whose decisions live in a store shared by every process on the API key (issue 26:
 * PostgreSQL, src/store/pg/rate-budget.ts). The platform client's RateBudget
 * (src/platform/budget.ts) keeps what is per process (FIFO waiters, the in-flight cap, the
 * X-RateLimit-* view, 429 jitter) and asks the ledger for every token instead of its spend log.
 */
export interface RateLedger {
  /** One decision: a grant is spent before the call leaves and never refunded; a denial spends nothing. */
  take(cls: RateClass): Promise<TakeResult>;
  /** A 429: pause the class for every process (only grows) and add ONE strike; returns the strikes active now. */
  recordRateLimited(
    cls: RateClass,
    info: { path: string | null; retryAfterMs: number | null },
  ): Promise<number>;
  activeStrikes(): Promise<number>;
  clearStrikes(by: string): Promise<number>;
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
export function createSqliteRateState(db: Db): RateStateStore {
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
    'INSERT INTO rate_pause (bucket, until) VALUES (?, ?) ON CONFLICT(bucket) DO UPDATE SET until = MAX(until, excluded.until)',
  );
  const insertStrike = db.prepare(
    'INSERT INTO rate_strikes (at, bucket, path, retry_after_ms) VALUES (?, ?, ?, ?)',
  );
  const selectStrikes = db.prepare<
    [number],
    { seq: number; at: number; bucket: string; path: string | null; retry_after_ms: number | null }
  >(
    'SELECT seq, at, bucket, path, retry_after_ms FROM rate_strikes WHERE at >= ? AND cleared_at IS NULL ORDER BY at ASC, seq ASC',
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

/** In-memory state for unit tests and throwaway commands (nothing survives the process). */
export function createMemoryRateState(): RateStateStore & { readonly spendRows: () => number } {
  const spend: Record<RateBucketName, number[]> = { read: [], write: [] };
  const pause = new Map<RateBucketName, number>();
  let strikes: Array<StrikeRecord & { clearedAt: number | null }> = [];
  let seq = 0;
  return {
    shared: false,
    spendRows: () => spend.read.length + spend.write.length,
    loadSpend: (bucket, sinceMs) => spend[bucket].filter((t) => t >= sinceMs).sort((a, b) => a - b),
    recordSpend: (bucket, at) => {
      spend[bucket].push(at);
    },
    loadPause: (bucket) => pause.get(bucket) ?? null,
    savePause: (bucket, until) => {
      pause.set(bucket, Math.max(pause.get(bucket) ?? 0, Math.ceil(until)));
    },
    recordStrike: (s) => {
      seq += 1;
      strikes.push({ ...s, seq, clearedAt: null });
    },
    activeStrikes: (sinceMs) =>
      strikes
        .filter((s) => s.at >= sinceMs && s.clearedAt === null)
        .map(({ clearedAt: _c, ...s }) => s)
        .sort((a, b) => a.at - b.at || a.seq - b.seq),
    clearStrikes: (_by, at = Date.now()) => {
      let n = 0;
      for (const s of strikes) {
        if (s.clearedAt === null) {
          s.clearedAt = at;
          n += 1;
        }
      }
      return n;
    },
    prune: (spendBeforeMs, strikesBeforeMs) => {
      spend.read = spend.read.filter((t) => t >= spendBeforeMs);
      spend.write = spend.write.filter((t) => t >= spendBeforeMs);
      strikes = strikes.filter((s) => s.at >= strikesBeforeMs);
      for (const [b, until] of pause) if (until < spendBeforeMs) pause.delete(b);
    },
  };
}

/**
 * The persisted rate state of a SQLite store (its tables; the budget is synchronous, see
 * RateStateStore). There is none on PostgreSQL: every process there spends from the shared ledger
 * (src/store/pg/rate-budget.ts), which the composition root (src/app/platform.ts) opens instead.
 */
export function rateStateFor(db: StoreDb): RateStateStore {
  if (db.sqlite === null)
    throw new Error(
      `the ${db.engine} store has no per-process rate state: its processes share the ledger of src/store/pg/rate-budget.ts`,
    );
  return createSqliteRateState(db.sqlite);
}
