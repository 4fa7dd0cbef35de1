import { randomBytes } from 'node:crypto';
import { reAskMs } from '../../lib/rate-window.js';
import type { Bucket } from '../api.js';
import type { RateStateStore, SpendWindow, StrikeRecord } from './ledger.js';
import {
  STOP_AT_STRIKES,
  STRIKE_RETENTION_MS,
  STRIKE_WINDOW_MS,
  type RateLimitedStrike,
  type RateSpend,
  type SpendContext,
  type SpendGrant,
} from './spend.js';

/** How long one reservation covers: a second, or half the window when the window is shorter (tests). */
export function reservationMs(windowMs: number): number {
  return Math.max(1, Math.min(1000, Math.floor(windowMs / 2)));
}

interface Lane {
  /**
   * This process's attempt timestamps in the window (exact; memory only), ascending: a call's
   * answer's instant (its grant's when no flight bound is set).
   */
  spent: number[];
  /** Calls granted whose answer is not booked yet (answered()): ref → grant instant. */
  flying: Map<string, number>;
  /** The other processes' (and earlier runs') windows as last read: each counted at its `until`. */
  others: SpendWindow[];
  pause: number;
  /** The stored window covers grants until this instant (epoch ms)… */
  coveredUntil: number;
  /** …and this many of them. */
  reserved: number;
  granted: number;
  /** The stored window differs from the exact spend (a reservation is outstanding): flush at shutdown. */
  dirty: boolean;
  /** When the others' rows were last read (epoch ms). */
  othersReadAt: number;
}

/**
 * The in-process spend strategy (SQLite, memory): this process decides every token on its own
 * sliding-window log of attempt timestamps, kept in memory (issue 44 item 5: a platform call costs
 * the state database nothing in the usual case). What survives a restart, and what other processes
 * on the same state file (a CLI command beside the daemon) see, is one row per process and bucket,
 * written AHEAD of the tokens it covers: "up to N tokens, counted as spent at T" — the window's
 * total plus a reservation for the next second (reservationMs). A token outside the stored
 * reservation (its second is over, or its count used up) first writes a new one, in one
 * statement that also returns the other processes' rows and the pause. So the row is written at
 * most once a second while the process spends, and at shutdown with the exact total:
 * - a clean stop leaves the window's total, counted at the last token;
 * - a kill -9 loses nothing: the stored row already counts every token the process could have sent
 *   (the unused reservation as well), so the next run waits that out (at most one reservation,
 *   a second, beyond the window) — it never bursts;
 * - another process's spend and 429 pause are seen at the next reservation (≤ a second), and two
 *   processes never use the same tokens: each reservation's statement returns the others' rows as
 *   they are, and the database serialises the statements, so together they stay within the budget.
 */
export class InProcessRateSpend implements RateSpend {
  readonly kind = 'in-process';
  private ctx: SpendContext | null = null;
  private readonly owner = `${process.pid}:${randomBytes(6).toString('hex')}`;
  private readonly lanes: Record<Bucket, Lane> = {
    read: InProcessRateSpend.lane(),
    write: InProcessRateSpend.lane(),
  };
  /** The allowance the budget last asked about (grant re-checks it after a reservation read the others). */
  private readonly allowedNow: Record<Bucket, number> = { read: 1, write: 1 };
  private strikes: StrikeRecord[] = [];
  private spendSincePrune = 0;
  private lastStrikeRefresh = 0;
  private refs = 0;
  private readonly flightMs: number;

  /**
   * flightMs: the longest a call may take from its grant to its answer (the client's timeouts).
   * With it, a call counts in the window until a window after its answer (answered()), because the
   * platform counts it when it arrives, after the grant; a call whose answer is never booked
   * counts until its grant + flightMs + the window. 0 (the default, for callers that book no
   * answers): a call counts from its grant.
   */
  constructor(
    private readonly state: RateStateStore,
    opts: { flightMs?: number } = {},
  ) {
    this.flightMs = opts.flightMs ?? 0;
  }

  private static lane(): Lane {
    return {
      spent: [],
      flying: new Map(),
      others: [],
      pause: 0,
      coveredUntil: 0,
      reserved: 0,
      granted: 0,
      dirty: false,
      othersReadAt: 0,
    };
  }

  private get c(): SpendContext {
    if (this.ctx === null) throw new Error('rate spend used before start()');
    return this.ctx;
  }

  start(ctx: SpendContext): void {
    this.ctx = ctx;
    const now = ctx.clock.now();
    this.state.prune(now - ctx.windowMs * 2, now - STRIKE_RETENTION_MS);
    for (const bucket of ['read', 'write'] as const) {
      const lane = this.lanes[bucket];
      // Reads only (decide stores nothing): what earlier runs and other processes spent, and the pause.
      const view = this.state.reserve(this.owner, bucket, now, ctx.windowMs, null);
      lane.others = view.others;
      lane.pause = view.pause ?? 0;
      lane.othersReadAt = now;
    }
    this.strikes = this.state.activeStrikes(now - STRIKE_WINDOW_MS);
    if (this.stopped()) ctx.onStopped('at start');
  }

  strikes24h(): number {
    const since = this.c.clock.now() - STRIKE_WINDOW_MS;
    return this.strikes.filter((s) => s.at >= since).length;
  }

  /**
   * While stopped the strikes are re-read from the store on every check (one indexed query), so an
   * operator's `platform strikes clear` from another process resumes traffic at the next call.
   */
  stopped(): boolean {
    if (this.strikes24h() < STOP_AT_STRIKES) return false;
    if (!this.c.isClosed()) this.strikes = this.state.activeStrikes(this.c.clock.now() - STRIKE_WINDOW_MS);
    const stopped = this.strikes24h() >= STOP_AT_STRIKES;
    // Cleared elsewhere (or aged out): a later stop must raise its ALERT again.
    if (!stopped) this.c.onBelowStop();
    return stopped;
  }

  refusesWhenStopped(): boolean {
    return this.stopped();
  }

  /**
   * Another process on the same state file may strike the key: its strikes are re-read once a
   * second (its spend and pause at each reservation, see grant).
   */
  refresh(_bucket: Bucket, now: number): void {
    if (!this.state.shared) return;
    if (now - this.lastStrikeRefresh >= 1000) {
      this.lastStrikeRefresh = now;
      this.strikes = this.state.activeStrikes(now - STRIKE_WINDOW_MS);
      if (this.stopped()) this.c.onStopped('strike recorded by another process');
    }
  }

  pausedUntil(bucket: Bucket): number {
    return this.lanes[bucket].pause;
  }

  windowWait(bucket: Bucket, now: number, allowed: number): number {
    this.allowedNow[bucket] = allowed;
    const lane = this.lanes[bucket];
    const every = reservationMs(this.c.windowMs);
    let wait = this.untilFits(bucket, now, allowed);
    if (wait > 0 && lane.others.length > 0 && now - lane.othersReadAt >= every) {
      // Held by other processes' rows: read them again (they shrink when their owner spent less
      // than it reserved, or stopped), at most once a reservation's time.
      const view = this.state.reserve(this.owner, bucket, now, this.c.windowMs, null);
      lane.others = view.others;
      lane.pause = Math.max(lane.pause, view.pause ?? 0);
      lane.othersReadAt = now;
      wait = this.untilFits(bucket, now, allowed);
    }
    return wait > 0 && lane.others.length > 0 ? Math.min(wait, every) : wait;
  }

  spentInWindow(bucket: Bucket, now: number): number {
    const lane = this.lanes[bucket];
    this.expire(bucket, now);
    return lane.spent.length + lane.flying.size + lane.others.reduce((n, w) => n + w.spent, 0);
  }

  grant(bucket: Bucket, now: number): SpendGrant {
    const lane = this.lanes[bucket];
    if (now >= lane.coveredUntil || lane.granted >= lane.reserved) {
      // Persist first: if this throws (disk full) the attempt is not sent at all.
      try {
        this.reserve(bucket, now);
      } catch (error) {
        return { kind: 'failed', error };
      }
      if (lane.pause > now) return { kind: 'wait', ms: lane.pause - now, why: 'paused' };
      if (lane.granted >= lane.reserved) {
        return {
          kind: 'wait',
          ms: Math.max(1, this.untilFits(bucket, now, this.allowedNow[bucket])),
          why: 'window',
        };
      }
    }
    lane.granted += 1;
    this.state.recordSpend?.(bucket, now);
    this.spendSincePrune += 1;
    if (this.spendSincePrune >= 500) {
      this.spendSincePrune = 0;
      this.state.prune(now - this.c.windowMs * 2, now - STRIKE_RETENTION_MS);
    }
    if (this.flightMs === 0) {
      lane.spent.push(now);
      return { kind: 'granted', at: now };
    }
    this.refs += 1;
    const ref = String(this.refs);
    lane.flying.set(ref, now);
    return { kind: 'granted', at: now, ref };
  }

  /** The call's answer is in: it counts until a window from now (after its arrival). */
  answered(bucket: Bucket, ref: string): void {
    const lane = this.lanes[bucket];
    if (!lane.flying.delete(ref)) return;
    const last = lane.spent[lane.spent.length - 1] ?? Number.NEGATIVE_INFINITY;
    lane.spent.push(Math.max(this.c.clock.now(), last));
  }

  recordRateLimited(bucket: Bucket, s: RateLimitedStrike): void {
    this.state.savePause(bucket, s.pausedUntil);
    this.lanes[bucket].pause = Math.max(this.lanes[bucket].pause, Math.ceil(s.pausedUntil));
    this.state.recordStrike({ at: s.at, bucket, path: s.path, retryAfterMs: s.waitMs });
    this.strikes = this.state.activeStrikes(s.at - STRIKE_WINDOW_MS);
  }

  clearStrikes(by: string, now: number): Promise<number> {
    const n = this.state.clearStrikes(by, now);
    this.strikes = this.state.activeStrikes(now - STRIKE_WINDOW_MS);
    return Promise.resolve(n);
  }

  /**
   * At shutdown: each bucket's row becomes the exact total of the window, counted at the last token
   * (the unused reservation is given back to the next run and to other processes).
   */
  flush(): void {
    if (this.ctx === null) return;
    const now = this.c.clock.now();
    for (const bucket of ['read', 'write'] as const) {
      const lane = this.lanes[bucket];
      if (!lane.dirty) continue;
      this.expire(bucket, now);
      // A call still in flight at shutdown counts as answered now.
      const last = lane.flying.size > 0 ? now : lane.spent[lane.spent.length - 1];
      this.state.reserve(
        this.owner,
        bucket,
        now,
        this.c.windowMs,
        last === undefined
          ? { spent: 0, until: 0 }
          : { spent: lane.spent.length + lane.flying.size, until: last },
      );
      lane.dirty = false;
      lane.coveredUntil = 0;
      lane.reserved = 0;
      lane.granted = 0;
    }
  }

  close(): void {
    try {
      this.flush();
    } finally {
      this.state.close?.();
    }
  }

  /**
   * Writes this process's row ahead of its next tokens: the window's own spend plus what may still
   * be spent (the allowance less the others' rows as last known), covering grants for the next
   * reservationMs; the same statement returns the others' rows as they are now, and what this
   * process may use of its reservation shrinks to what they leave (the row may claim more than it
   * uses: an over-count is safe). When others spend on the same key the reservation is half of
   * what is left, so neither starves.
   */
  private reserve(bucket: Bucket, now: number): void {
    const lane = this.lanes[bucket];
    const windowMs = this.c.windowMs;
    const allowed = this.allowedNow[bucket];
    this.expire(bucket, now);
    const sum = (ws: readonly SpendWindow[]): number => ws.reduce((n, w) => n + w.spent, 0);
    const mine = lane.spent.length + lane.flying.size;
    const left = Math.max(0, allowed - mine - sum(lane.others));
    const claim = lane.others.length > 0 ? Math.ceil(left / 2) : left;
    // Calls in flight past the reservation's end are counted there too (at most their bound late).
    const coveredUntil = now + reservationMs(windowMs);
    const view = this.state.reserve(this.owner, bucket, now, windowMs, {
      spent: mine + claim,
      until: coveredUntil,
    });
    lane.others = view.others;
    lane.othersReadAt = now;
    lane.pause = Math.max(lane.pause, view.pause ?? 0);
    lane.coveredUntil = coveredUntil;
    lane.reserved = Math.min(claim, Math.max(0, allowed - mine - sum(view.others)));
    lane.granted = 0;
    lane.dirty = true;
  }

  /** How long before one more token fits beside this process's log and the others' rows (0: now). */
  private untilFits(bucket: Bucket, now: number, allowed: number): number {
    const lane = this.lanes[bucket];
    this.expire(bucket, now);
    const windowMs = this.c.windowMs;
    let total = lane.spent.length + lane.flying.size + lane.others.reduce((n, w) => n + w.spent, 0);
    if (total < allowed) return 0;
    // Leave the window in order of expiry until one more fits. A call in flight leaves a window
    // after its answer, not known yet: at its bound at the latest, but ask again soon.
    const leaving: Array<[at: number, n: number, flying: boolean]> = [
      ...lane.spent.map((t): [number, number, boolean] => [t + windowMs, 1, false]),
      ...[...lane.flying.values()].map((t): [number, number, boolean] => [
        t + this.flightMs + windowMs,
        1,
        true,
      ]),
      ...lane.others.map((w): [number, number, boolean] => [w.until + windowMs, w.spent, false]),
    ].sort((a, b) => a[0] - b[0]);
    for (const [at, n, flying] of leaving) {
      total -= n;
      if (total >= allowed) continue;
      const wait = Math.max(1, at - now + 1);
      return flying ? Math.min(wait, reAskMs(windowMs)) : wait;
    }
    return 1;
  }

  private expire(bucket: Bucket, now: number): void {
    const lane = this.lanes[bucket];
    const cutoff = now - this.c.windowMs;
    let i = 0;
    while (i < lane.spent.length && (lane.spent[i] as number) <= cutoff) i += 1;
    if (i > 0) lane.spent.splice(0, i);
    // A call whose answer never came (its caller never booked it) leaves at its bound.
    if (lane.flying.size > 0)
      for (const [ref, at] of lane.flying) if (at + this.flightMs <= cutoff) lane.flying.delete(ref);
    if (lane.others.some((w) => w.until <= cutoff)) lane.others = lane.others.filter((w) => w.until > cutoff);
  }
}
