import type { Clock } from '../../lib/clock.js';
import { reAskMs } from '../../lib/rate-window.js';
import type { Logger } from '../../lib/logger.js';
import { inTransaction, type PgPool } from '../pg/pool.js';

/**
 * One rate budget for every replica (issue 26), in PostgreSQL: every process on a PostgreSQL state spends
 * from it (src/platform/rate-budget/shared-ledger.ts asks it for each token).
 *
 * Per (key, class) a sliding-window log: the grants of the last window (`rate_shared_grants`)
 * and one lock row with their count (`rate_shared_window`). Each call is decided by ONE statement
 * (`SELECT * FROM boarding_rate_take_window(...)`, migrations 18 and 23 of src/store/migrations/migrations.ts) that
 * locks the row, reads the DATABASE clock once, drops the grants that left the window and grants
 * while fewer than L remain; a grant is recorded and never refunded (consumed before the call
 * leaves, whatever its outcome). The replicas' own clocks are never compared with it: a denial
 * returns a wait (until the oldest grant that must leave has left), which each replica sleeps on
 * its own clock.
 *
 * A grant stays in the log until a window after its call was ANSWERED (migration 23): the
 * platform counts a call when it arrives, and that is after the grant by however long the event
 * loop, the pool, the network or a paused process took. The process books the answer (answered()),
 * which stamps the database clock then, after the arrival; until it does, the grant counts until
 * its flight bound (`flightMs`: the longest a call may take, the client's timeouts), so a replica
 * that dies with calls in flight holds their tokens at most that long.
 *
 * Guarantee: with limit L per window W, any half-open window of length W on the database clock
 * holds at most L ARRIVALS of calls granted here, however many replicas take, however their clocks
 * drift and however late each call left (proof: of L + 1 arrivals in one window, the one granted
 * last was granted after each other one's grant and before its answer plus W, so L grants were in
 * the log when it was granted). The
 * sustained rate is L per W: a caller that wakes late for its slot takes it late, and only that
 * lateness is lost (bench/budget-replicas.bench.ts). Grants are also at least W / 2L apart, so a
 * window that frees up is not spent in one burst (requests jittered on their way could otherwise
 * crowd into one of the platform's windows); it only bounds how fast a late caller catches up. The
 * GCRA of migrations 15 and 16 (burst 2) sustained (L − 1) per W at best and lost every slot a
 * caller woke more than one interval late for: two replicas on this loaded 2-core machine used
 * 0.74 of the read allowance. While a strike is active the limit is the class's slowLimit (the
 * client's half pace, ⌊L/2⌋ as src/platform/rate-budget/budget.ts allows), counted over the same log, so
 * grants made before the strike count against it too.
 *
 * A 429 (recordRateLimited) pauses the class for every replica until database-now + the wait and
 * adds a strike; at `stopAtStrikes` uncleared strikes in 24 h every class of the key is stopped for
 * every replica until an operator clears them.
 */

/** A rate class of the shared ledger: the client's bucket. */
export type RateClass = 'read' | 'write';

/**
 * One decision of the ledger, the shape the platform client's port asks for
 * (src/platform/rate-budget/ledger.ts TakeResult; matched structurally, the store imports no platform).
 * atUs: the grant's time on the database clock, µs since the epoch.
 */
export type TakeResult =
  | { decision: 'granted'; atMs: number; atUs: bigint; strikes: number; grant: string }
  | { decision: 'wait' | 'paused'; waitMs: number; atMs: number; strikes: number }
  | { decision: 'stopped'; atMs: number; strikes: number };

export interface ClassLimit {
  /** Calls allowed in any window of windowMs (already below the documented limit by any headroom). */
  limit: number;
  windowMs: number;
  /**
   * Calls allowed in any window while a strike is active (the client's half pace, computed by the
   * caller: src/platform/rate-budget/budget.ts allowedPerWindow). Default max(1, ⌊limit / 2⌋).
   */
  slowLimit?: number;
}

export interface SharedRateBudgetOptions {
  pool: PgPool;
  /** Whose budget: one per platform API key (never the key itself: a fingerprint or name). */
  key: string;
  limits: Record<RateClass, ClassLimit>;
  clock: Clock;
  logger?: Logger;
  /** Uncleared strikes in 24 h that stop all traffic. Default 2 (the platform revokes at 3). */
  stopAtStrikes?: number;
  /** Pause when a 429 names no wait. Default the class's window. */
  defaultPauseMs?: number;
  /**
   * The longest a granted call may take until its answer is booked (answered()): its grant counts
   * until then plus a window when it is never booked (the process died). 0 (the default, for
   * callers that book no answer): a grant counts from its own instant only.
   */
  flightMs?: number;
}

/** A strike of the shared ledger, times in epoch ms on the database clock. */
export interface SharedStrike {
  seq: number;
  at: number;
  bucket: RateClass;
  path: string | null;
  retryAfterMs: number | null;
}

export class TrafficStoppedError extends Error {
  constructor(readonly strikes: number) {
    super(
      `platform traffic stopped: ${strikes} rate-limit strikes in 24 h (clear them with the operator command ` +
        `once the platform confirms the key)`,
    );
    this.name = 'TrafficStoppedError';
  }
}

const STRIKE_WINDOW_US = 24 * 3600 * 1_000_000;

/** The limits of a class as the ledger applies them, checked: at full pace and while a strike is active. */
export function windowLimits(l: ClassLimit): { limit: number; slowLimit: number; windowUs: number } {
  if (!Number.isInteger(l.limit) || l.limit < 1)
    throw new Error(`rate budget: limit must be a whole number ≥ 1 (got ${l.limit})`);
  if (!(l.windowMs > 0)) throw new Error(`rate budget: windowMs must be > 0 (got ${l.windowMs})`);
  const slowLimit = l.slowLimit ?? Math.max(1, Math.floor(l.limit / 2));
  if (!Number.isInteger(slowLimit) || slowLimit < 1 || slowLimit > l.limit)
    throw new Error(`rate budget: slowLimit must be a whole number in 1..${l.limit} (got ${slowLimit})`);
  return { limit: l.limit, slowLimit, windowUs: Math.round(l.windowMs * 1000) };
}

/** The shared ledger (src/platform/rate-budget/ledger.ts RateLedger, structurally). */
export class PgSharedRateBudget {
  private readonly params: Record<RateClass, ReturnType<typeof windowLimits>>;
  private readonly stopAt: number;
  private readonly flightUs: number;
  private adopted: Promise<void> | null = null;

  constructor(private readonly opts: SharedRateBudgetOptions) {
    this.params = { read: windowLimits(opts.limits.read), write: windowLimits(opts.limits.write) };
    this.stopAt = opts.stopAtStrikes ?? 2;
    const flightMs = opts.flightMs ?? 0;
    if (!(flightMs >= 0 && Number.isFinite(flightMs)))
      throw new Error(`rate budget: flightMs must be ≥ 0 (got ${flightMs})`);
    this.flightUs = Math.round(flightMs * 1000);
  }

  /** One decision, one statement. A grant is spent; a denial spends nothing. */
  async take(cls: RateClass): Promise<TakeResult> {
    await this.adoptLegacy();
    const { limit, slowLimit, windowUs } = this.params[cls];
    const reAskUs = reAskMs(windowUs / 1000) * 1000;
    const r = await this.opts.pool.query<{
      decision: string;
      at_us: string;
      wait_us: string;
      strikes: number;
      grant_id: string | null;
    }>(
      `SELECT decision, (extract(epoch FROM at) * 1000000)::bigint AS at_us, wait_us, strikes, grant_id
         FROM boarding_rate_take_window($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [this.opts.key, cls, limit, slowLimit, windowUs, this.stopAt, STRIKE_WINDOW_US, this.flightUs, reAskUs],
    );
    const row = r.rows[0];
    if (!row) throw new Error('boarding_rate_take_window returned no row');
    const atUs = BigInt(row.at_us);
    const atMs = Number(atUs / 1000n);
    if (row.decision === 'granted')
      return { decision: 'granted', atMs, atUs, strikes: row.strikes, grant: String(row.grant_id) };
    if (row.decision === 'stopped') return { decision: 'stopped', atMs, strikes: row.strikes };
    if (row.decision === 'wait' || row.decision === 'paused') {
      return {
        decision: row.decision,
        waitMs: Math.max(1, Math.ceil(Number(row.wait_us) / 1000)),
        atMs,
        strikes: row.strikes,
      };
    }
    throw new Error(`boarding_rate_take_window: unknown decision ${row.decision}`);
  }

  /**
   * Waits until a call of this class may be sent and spends it: resolves with the grant's time on
   * the database clock. Rejects with TrafficStoppedError when traffic is stopped, or the signal's
   * reason when aborted (e.g. the leadership term's signal).
   */
  async acquire(cls: RateClass, signal?: AbortSignal): Promise<{ atMs: number; atUs: bigint }> {
    for (;;) {
      signal?.throwIfAborted();
      const t = await this.take(cls);
      if (t.decision === 'granted') return { atMs: t.atMs, atUs: t.atUs };
      if (t.decision === 'stopped') throw new TrafficStoppedError(t.strikes);
      await this.opts.clock.sleep(t.waitMs, signal);
    }
  }

  /**
   * The answers of these grants' calls are in (or the calls never left): each grant leaves the log
   * a window from now on the database clock, after its call's arrival. One statement for them all.
   */
  async answered(grants: readonly string[]): Promise<void> {
    if (grants.length === 0) return;
    await this.opts.pool.query(
      'UPDATE rate_shared_grants SET leaves = clock_timestamp(), answered = true ' +
        'WHERE id = ANY($1::bigint[]) AND NOT answered',
      [grants],
    );
  }

  /**
   * A 429 on a call of this class: pause the class for EVERY replica until database-now + waitMs
   * (a pause only grows) and record a strike, in one transaction. Returns the strikes now active.
   */
  async recordRateLimited(
    cls: RateClass,
    info: { path: string | null; retryAfterMs: number | null },
  ): Promise<number> {
    await this.adoptLegacy();
    const waitMs = info.retryAfterMs ?? this.opts.defaultPauseMs ?? this.opts.limits[cls].windowMs;
    const strikes = await inTransaction(this.opts.pool, async (tx) => {
      await tx.query(
        `INSERT INTO rate_shared_pause AS p (key, class, until) VALUES ($1, $2, clock_timestamp() + $3::interval)
         ON CONFLICT (key, class) DO UPDATE SET until = greatest(p.until, excluded.until)`,
        [this.opts.key, cls, `${Math.max(0, Math.ceil(waitMs))} milliseconds`],
      );
      await tx.query(
        'INSERT INTO rate_shared_strikes (key, class, path, retry_after_ms) VALUES ($1, $2, $3, $4)',
        [this.opts.key, cls, info.path, info.retryAfterMs === null ? null : Math.round(info.retryAfterMs)],
      );
      return this.countStrikes(tx);
    });
    this.opts.logger?.warn(
      { class: cls, path: info.path, pauseMs: waitMs, strikes24h: strikes },
      'rate limit hit (429): class paused for every replica',
    );
    return strikes;
  }

  async activeStrikes(): Promise<number> {
    await this.adoptLegacy();
    return this.countStrikes(this.opts.pool);
  }

  /** The strikes of the last 24 h no operator has cleared, oldest first (times on the database clock). */
  async strikeList(): Promise<SharedStrike[]> {
    await this.adoptLegacy();
    const r = await this.opts.pool.query<{
      seq: string;
      at_ms: string;
      class: string;
      path: string | null;
      retry_after_ms: string | null;
    }>(
      `SELECT seq, (extract(epoch FROM at) * 1000)::bigint AS at_ms, class, path, retry_after_ms
         FROM rate_shared_strikes
        WHERE key = $1 AND cleared_at IS NULL AND at >= clock_timestamp() - make_interval(secs => $2::bigint / 1e6)
        ORDER BY at, seq`,
      [this.opts.key, STRIKE_WINDOW_US],
    );
    return r.rows.map((x) => ({
      seq: Number(x.seq),
      at: Number(x.at_ms),
      bucket: x.class === 'write' ? 'write' : 'read',
      path: x.path,
      retryAfterMs: x.retry_after_ms === null ? null : Number(x.retry_after_ms),
    }));
  }

  /** Pauses in force now: until (epoch ms, database clock) and how long they still last. */
  async pauseList(): Promise<Array<{ bucket: RateClass; until: number; remainingMs: number }>> {
    await this.adoptLegacy();
    const r = await this.opts.pool.query<{ class: string; until_ms: string; remaining_ms: string }>(
      `SELECT class, (extract(epoch FROM until) * 1000)::bigint AS until_ms,
              ceil(extract(epoch FROM until - clock_timestamp()) * 1000)::bigint AS remaining_ms
         FROM rate_shared_pause WHERE key = $1 AND until > clock_timestamp() ORDER BY class`,
      [this.opts.key],
    );
    return r.rows.map((x) => ({
      bucket: x.class === 'write' ? 'write' : 'read',
      until: Number(x.until_ms),
      remainingMs: Number(x.remaining_ms),
    }));
  }

  /** Operator command: forget the strikes; every replica resumes at its next take. */
  async clearStrikes(by: string): Promise<number> {
    await this.adoptLegacy();
    const r = await this.opts.pool.query(
      'UPDATE rate_shared_strikes SET cleared_at = clock_timestamp(), ' +
        'cleared_by = $2 WHERE key = $1 AND cleared_at IS NULL',
      [this.opts.key, by],
    );
    return r.rowCount ?? 0;
  }

  /**
   * Once per instance: the per-process ledger rows of migration 1 on this database (rate_strikes,
   * rate_pause: written by `state migrate` from a SQLite state, or by a connector before the shared
   * ledger) join the shared ledger under this key, so there is ONE strike ledger. Idempotent
   * (legacy_seq is unique per key), rate_strikes is left as it was (state migrate --verify-only
   * still compares it with the SQLite source). Retried at the next call if it fails.
   */
  private adoptLegacy(): Promise<void> {
    this.adopted ??= inTransaction(this.opts.pool, async (tx) => {
      const moved = await tx.query(
        `INSERT INTO rate_shared_strikes
           (key, at, class, path, retry_after_ms, cleared_at, cleared_by, legacy_seq)
         SELECT $1, to_timestamp(s.at / 1000.0), s.bucket, s.path, s.retry_after_ms,
                CASE WHEN s.cleared_at IS NULL THEN NULL ELSE to_timestamp(s.cleared_at / 1000.0) END,
                s.cleared_by, s.seq
           FROM rate_strikes s
         ON CONFLICT (key, legacy_seq) DO NOTHING`,
        [this.opts.key],
      );
      await tx.query(
        `INSERT INTO rate_shared_pause AS p (key, class, until)
         SELECT $1, r.bucket, to_timestamp(r.until / 1000.0) FROM rate_pause r
          WHERE to_timestamp(r.until / 1000.0) > clock_timestamp()
         ON CONFLICT (key, class) DO UPDATE SET until = greatest(p.until, excluded.until)`,
        [this.opts.key],
      );
      if ((moved.rowCount ?? 0) > 0)
        this.opts.logger?.info(
          { strikes: moved.rowCount },
          'rate ledger: strikes of the per-process ledger adopted into the shared ledger',
        );
    }).catch((err: unknown) => {
      this.adopted = null;
      throw err;
    });
    return this.adopted;
  }

  private async countStrikes(q: Pick<PgPool, 'query'>): Promise<number> {
    const r = await q.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM rate_shared_strikes WHERE key = $1 AND cleared_at IS NULL AND at >= ` +
        `clock_timestamp() - interval '24 hours'`,
      [this.opts.key],
    );
    return r.rows[0]?.n ?? 0;
  }
}
