/**
 * The rate budget's storage ports (issue 34: ports belong to their users): what its two spend
 * strategies (spend.ts) persist through, and the in-memory state. The in-process strategy
 * (in-process.ts) keeps its log in a RateStateStore; the shared-ledger strategy (shared-ledger.ts)
 * asks a RateLedger. The store implements them (src/store/rate-budget/: the SQLite spend log, the
 * PostgreSQL shared ledger) without importing this file (the store sits below the platform
 * client); src/app/platform.ts picks the strategy from config, and the compiler checks there that
 * the store's implementation fits.
 */

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
 * The spend a process may have in a bucket's window, as other processes (and the next run) count
 * it: up to `spent` tokens, every one counted as spent at `until` (epoch ms), so they leave the
 * window at until + windowMs. An upper bound, never an exact log: the in-process strategy
 * (in-process.ts) writes its row ahead of the tokens it covers.
 */
export interface SpendWindow {
  spent: number;
  until: number;
}

/** What a reservation reads in its statement: the other processes' windows and the bucket's pause. */
export interface SpendView {
  others: SpendWindow[];
  pause: number | null;
}

/**
 * Where the rate budget keeps what must survive a restart: the spend of the current window (so a
 * crash loop cannot burst past the limit), whole-bucket pauses after a 429, and the 429-strike
 * ledger (a live key is revoked after 3 strikes in 24 h). Synchronous on purpose: the spend is
 * recorded before the request leaves, never after.
 */
export interface RateStateStore {
  /**
   * true when other processes may spend from the same store (a CLI command beside the daemon on
   * one state file): their windows and pauses are re-read at each reservation, and the strikes
   * every second, instead of trusting the copy in memory.
   */
  readonly shared: boolean;
  /**
   * In ONE statement (atomic on its own): stores `owner`'s window (null: stores nothing, reads only)
   * and returns the windows of every other owner still in the window at `now` (until + windowMs >
   * now) and the bucket's pause. Two processes reserving at once are serialised by the database: the
   * later one sees the earlier one's row.
   */
  reserve(
    owner: string,
    bucket: RateBucketName,
    now: number,
    windowMs: number,
    mine: SpendWindow | null,
  ): SpendView;
  /** Each token, for stores that keep them (the in-memory state of tests, which audit the log). */
  recordSpend?(bucket: RateBucketName, at: number): void;
  /** Attempt timestamps of a bucket at or after sinceMs, ascending (stores that keep them). */
  loadSpend?(bucket: RateBucketName, sinceMs: number): number[];
  /** The pause of a bucket (epoch ms), or null. */
  loadPause(bucket: RateBucketName): number | null;
  savePause(bucket: RateBucketName, until: number): void;
  recordStrike(strike: NewStrike): void;
  /** Strikes at or after sinceMs that no operator has cleared, oldest first. */
  activeStrikes(sinceMs: number): StrikeRecord[];
  /** An operator acknowledges the strikes (after talking to the platform): returns how many. */
  clearStrikes(by: string, at?: number): number;
  /**
   * Drops spend windows that left the window before spendBeforeMs (until < spendBeforeMs) and
   * cleared/expired strikes older than strikesBeforeMs.
   */
  prune(spendBeforeMs: number, strikesBeforeMs: number): void;
  /** Releases what the store opened itself (not the Db it was given). */
  close?(): void;
}

/** A rate class of a shared ledger: the client's bucket. */
export type RateClass = RateBucketName;

export type TakeResult =
  /**
   * atUs: the grant's time on the ledger's (database) clock, µs since the epoch; grant: its id,
   * to book its call's answer with (answered()).
   */
  | { decision: 'granted'; atMs: number; atUs: bigint; strikes: number; grant: string }
  | { decision: 'wait' | 'paused'; waitMs: number; atMs: number; strikes: number }
  | { decision: 'stopped'; atMs: number; strikes: number };

/**
 * A rate budget whose decisions live in a store shared by every process on the API key (issue 26:
 * PostgreSQL, src/store/rate-budget/pg.ts). The shared-ledger strategy (shared-ledger.ts) asks it
 * for every token; the platform client's RateBudget keeps what is per process (FIFO waiters, the
 * in-flight cap, the X-RateLimit-* view, 429 jitter).
 */
export interface RateLedger {
  /** One decision: a grant is spent before the call leaves and never refunded; a denial spends nothing. */
  take(cls: RateClass): Promise<TakeResult>;
  /**
   * These grants' calls were answered (or never left): each counts until a window from now, on
   * the ledger's clock, instead of until its flight bound. The platform counts a call when it
   * arrives, which is after its grant; so the ledger counts it until after its answer.
   */
  answered(grants: readonly string[]): Promise<void>;
  /** A 429: pause the class for every process (only grows) and add ONE strike; returns the strikes active now. */
  recordRateLimited(
    cls: RateClass,
    info: { path: string | null; retryAfterMs: number | null },
  ): Promise<number>;
  activeStrikes(): Promise<number>;
  clearStrikes(by: string): Promise<number>;
}

/** In-memory state for unit tests and throwaway commands (nothing survives the process). */
export function createMemoryRateState(): RateStateStore & {
  readonly spendRows: () => number;
  loadSpend(bucket: RateBucketName, sinceMs: number): number[];
} {
  const spend: Record<RateBucketName, number[]> = { read: [], write: [] };
  const windows = new Map<string, SpendWindow & { owner: string; bucket: RateBucketName }>();
  const pause = new Map<RateBucketName, number>();
  let strikes: Array<StrikeRecord & { clearedAt: number | null }> = [];
  let seq = 0;
  return {
    shared: false,
    spendRows: () => spend.read.length + spend.write.length,
    reserve: (owner, bucket, now, windowMs, mine) => {
      if (mine !== null) windows.set(`${owner}\u0000${bucket}`, { ...mine, owner, bucket });
      const others = [...windows.values()]
        .filter((w) => w.bucket === bucket && w.owner !== owner && w.until + windowMs > now)
        .map(({ spent, until }) => ({ spent, until }));
      return { others, pause: pause.get(bucket) ?? null };
    },
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
      for (const [k, w] of windows) if (w.until < spendBeforeMs) windows.delete(k);
      strikes = strikes.filter((s) => s.at >= strikesBeforeMs);
      for (const [b, until] of pause) if (until < spendBeforeMs) pause.delete(b);
    },
  };
}
