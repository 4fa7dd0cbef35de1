import type { Bucket } from '../api.js';
import type { RateStateStore, StrikeRecord } from './ledger.js';
import {
  STOP_AT_STRIKES,
  STRIKE_RETENTION_MS,
  STRIKE_WINDOW_MS,
  type RateLimitedStrike,
  type RateSpend,
  type SpendContext,
  type SpendGrant,
} from './spend.js';

/**
 * The in-process spend strategy (SQLite, memory): this process decides every token on its own
 * sliding-window log of attempt timestamps, persisted in a RateStateStore before the call leaves
 * (a restart inside a window cannot burst). When other processes on the host spend from the same
 * state file (`state.shared`: a CLI command beside the daemon) the log, the pauses and the strikes
 * are re-read before every decision instead of trusting the copy in memory.
 */
export class InProcessRateSpend implements RateSpend {
  readonly kind = 'in-process';
  private ctx: SpendContext | null = null;
  private spent: Record<Bucket, number[]> = { read: [], write: [] };
  private readonly pauses: Record<Bucket, number> = { read: 0, write: 0 };
  private strikes: StrikeRecord[] = [];
  private spendSincePrune = 0;
  private lastStrikeRefresh = 0;

  constructor(private readonly state: RateStateStore) {}

  private get c(): SpendContext {
    if (this.ctx === null) throw new Error('rate spend used before start()');
    return this.ctx;
  }

  start(ctx: SpendContext): void {
    this.ctx = ctx;
    const now = ctx.clock.now();
    this.state.prune(now - ctx.windowMs * 2, now - STRIKE_RETENTION_MS);
    for (const bucket of ['read', 'write'] as const) {
      this.spent[bucket] = this.state.loadSpend(bucket, now - ctx.windowMs);
      this.pauses[bucket] = this.state.loadPause(bucket) ?? 0;
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

  /** Another process on the same state file spends from the same key: take its spend into account. */
  refresh(bucket: Bucket, now: number): void {
    if (!this.state.shared) return;
    this.spent[bucket] = this.state.loadSpend(bucket, now - this.c.windowMs + 1);
    this.pauses[bucket] = Math.max(this.pauses[bucket], this.state.loadPause(bucket) ?? 0);
    if (now - this.lastStrikeRefresh >= 1000) {
      this.lastStrikeRefresh = now;
      this.strikes = this.state.activeStrikes(now - STRIKE_WINDOW_MS);
      if (this.stopped()) this.c.onStopped('strike recorded by another process');
    }
  }

  pausedUntil(bucket: Bucket): number {
    return this.pauses[bucket];
  }

  windowWait(bucket: Bucket, now: number, allowed: number): number {
    const spent = this.expire(bucket, now);
    if (spent.length < allowed) return 0;
    // The oldest token that must leave the window before one more fits.
    const t = spent[spent.length - allowed] as number;
    return Math.max(1, t + this.c.windowMs - now + 1);
  }

  spentInWindow(bucket: Bucket, now: number): number {
    return this.expire(bucket, now).length;
  }

  grant(bucket: Bucket, now: number): SpendGrant {
    // Persist first: if this throws (disk full) the attempt is not sent at all.
    try {
      this.state.recordSpend(bucket, now);
    } catch (error) {
      return { kind: 'failed', error };
    }
    this.spent[bucket].push(now);
    this.spendSincePrune += 1;
    if (this.spendSincePrune >= 500) {
      this.spendSincePrune = 0;
      this.state.prune(now - this.c.windowMs * 2, now - STRIKE_RETENTION_MS);
    }
    return { kind: 'granted', at: now };
  }

  recordRateLimited(bucket: Bucket, s: RateLimitedStrike): void {
    this.state.savePause(bucket, s.pausedUntil);
    this.state.recordStrike({ at: s.at, bucket, path: s.path, retryAfterMs: s.waitMs });
    this.strikes = this.state.activeStrikes(s.at - STRIKE_WINDOW_MS);
  }

  clearStrikes(by: string, now: number): Promise<number> {
    const n = this.state.clearStrikes(by, now);
    this.strikes = this.state.activeStrikes(now - STRIKE_WINDOW_MS);
    return Promise.resolve(n);
  }

  close(): void {
    this.state.close?.();
  }

  private expire(bucket: Bucket, now: number): number[] {
    const spent = this.spent[bucket];
    const cutoff = now - this.c.windowMs;
    let i = 0;
    while (i < spent.length && (spent[i] as number) <= cutoff) i += 1;
    if (i > 0) spent.splice(0, i);
    return spent;
  }
}
