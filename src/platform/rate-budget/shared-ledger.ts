import type { Bucket } from '../api.js';
import { PlatformError } from '../errors.js';
import type { RateLedger, TakeResult } from './ledger.js';
import {
  STOP_AT_STRIKES,
  type RateLimitedStrike,
  type RateSpend,
  type SpendContext,
  type SpendGrant,
} from './spend.js';

interface PendingStrike {
  bucket: Bucket;
  path: string;
  retryAfterMs: number;
}

/**
 * The shared-ledger spend strategy (PostgreSQL, issue 26): every process on the API key, on any
 * host, spends from ONE ledger that decides each token on the database clock (a sliding-window
 * log, src/store/rate-budget/pg.ts) and keeps the pauses and the strike ledger for all of them.
 * A denial spends nothing; a grant is spent before the call leaves and never refunded. When the
 * ledger cannot be reached no call is sent: a 429 seen meanwhile is kept here and no token is
 * asked for before it is recorded.
 */
export class SharedLedgerRateSpend implements RateSpend {
  readonly kind = 'shared-ledger';
  private ctx: SpendContext | null = null;
  /** This process's grants in the window (its share, for snapshots; the ledger counts them all). */
  private readonly granted: Record<Bucket, number[]> = { read: [], write: [] };
  /** The strike count of the last answer, and when it came (process clock). */
  private strikes = 0;
  private strikesAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<void> | null = null;
  /** 429s not yet recorded in the ledger (it was unreachable). */
  private pending: PendingStrike[] = [];
  private flushing: Promise<void> | null = null;
  /** Grants whose calls were answered, not yet booked in the ledger; and the booking under way. */
  private answers: string[] = [];
  private booking: Promise<void> | null = null;

  constructor(private readonly ledger: RateLedger) {}

  private get c(): SpendContext {
    if (this.ctx === null) throw new Error('rate spend used before start()');
    return this.ctx;
  }

  start(ctx: SpendContext): void {
    this.ctx = ctx;
    void this.refreshView();
  }

  strikes24h(): number {
    return this.strikes + this.pending.length;
  }

  /** The view of the last answer, refreshed in the background when older than 1 s. */
  stopped(): boolean {
    if (!this.c.isClosed() && this.c.clock.now() - this.strikesAt >= 1000) void this.refreshView();
    return this.strikes24h() >= STOP_AT_STRIKES;
  }

  /** Never: an operator may have cleared the strikes on another host, the ledger's answer decides. */
  refusesWhenStopped(): boolean {
    return false;
  }

  refresh(): void {}

  /** A pause comes with the ledger's answer (grant()), on the database clock. */
  pausedUntil(): number {
    return 0;
  }

  /** The window is the ledger's (every process on the key). */
  windowWait(): number {
    return 0;
  }

  spentInWindow(bucket: Bucket, now: number): number {
    const g = this.granted[bucket];
    const cutoff = now - this.c.windowMs;
    let i = 0;
    while (i < g.length && (g[i] as number) <= cutoff) i += 1;
    if (i > 0) g.splice(0, i);
    return g.length;
  }

  async grant(bucket: Bucket): Promise<SpendGrant> {
    let r: TakeResult;
    try {
      await this.flushStrikes();
      r = await this.ledger.take(bucket);
    } catch (err) {
      if (!this.c.isClosed())
        this.c.logger.warn(
          { err: errorText(err), bucket },
          'shared rate ledger unreachable: the platform call is not sent (retried later)',
        );
      return {
        kind: 'failed',
        error: new PlatformError({
          code: 'network',
          message:
            `the shared rate budget (state database) is ` +
            `unreachable, so the call was not sent: ${errorText(err)}`,
          cause: err,
        }),
      };
    }
    this.setStrikes(r.strikes);
    if (r.decision === 'granted') {
      // Spent even when the caller gave up while the ledger decided (never refunded).
      const at = this.c.clock.now();
      this.granted[bucket].push(at);
      return { kind: 'granted', at, ref: r.grant };
    }
    if (r.decision === 'stopped') return { kind: 'stopped' };
    // 'paused': another process's 429 (or ours), on the database clock.
    return { kind: 'wait', ms: r.waitMs, why: r.decision === 'paused' ? 'paused' : 'window' };
  }

  /**
   * Booked in the ledger in the background, every answer that came meanwhile in one statement.
   * A booking that fails leaves the grants counted until their flight bound: slower, never over.
   */
  answered(_bucket: Bucket, ref: string): void {
    this.answers.push(ref);
    this.bookAnswers();
  }

  private bookAnswers(): void {
    if (this.booking !== null) return;
    this.booking = (async () => {
      while (this.answers.length > 0) {
        const batch = this.answers.splice(0);
        try {
          await this.ledger.answered(batch);
        } catch (err) {
          if (!this.c.isClosed())
            this.c.logger.warn(
              { err: errorText(err), grants: batch.length },
              'shared rate ledger unreachable: answered calls stay counted until their flight bound',
            );
        }
      }
    })().finally(() => {
      this.booking = null;
    });
  }

  /** Counted at once (the in-flight cap drops now), recorded in the ledger next. */
  async recordRateLimited(bucket: Bucket, s: RateLimitedStrike): Promise<void> {
    this.pending.push({ bucket, path: s.path, retryAfterMs: s.pausedUntil - s.at });
    try {
      await this.flushStrikes();
    } catch (err) {
      this.c.logger.error(
        { err: errorText(err), bucket, path: s.path, pending: this.pending.length },
        'rate limit hit (429) but the shared rate ledger is unreachable: the strike is kept in this process ' +
          'and no platform request is sent until it is recorded',
      );
    }
  }

  async clearStrikes(by: string): Promise<number> {
    const n = await this.ledger.clearStrikes(by);
    this.setStrikes(await this.ledger.activeStrikes());
    return n;
  }

  /** The ledger's pool belongs to the state database, closed with it. */
  close(): void {}

  /** Records the 429s not yet in the ledger, one at a time, in order (never twice). */
  private flushStrikes(): Promise<void> {
    if (this.pending.length === 0) return this.flushing ?? Promise.resolve();
    const run = async (): Promise<void> => {
      while (this.pending.length > 0) {
        const s = this.pending[0] as PendingStrike;
        const n = await this.ledger.recordRateLimited(s.bucket, {
          path: s.path,
          retryAfterMs: s.retryAfterMs,
        });
        this.pending.shift();
        this.setStrikes(n);
      }
    };
    // Cleared after it settles, never before it is assigned (regression: a ledger that threw at
    // once left a settled, rejected flush here for good).
    this.flushing ??= run().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private setStrikes(n: number): void {
    this.strikes = n;
    this.strikesAt = this.c.clock.now();
    if (this.strikes24h() < STOP_AT_STRIKES) this.c.onBelowStop();
  }

  private refreshView(): Promise<void> {
    this.refreshing ??= Promise.resolve()
      .then(() => this.ledger.activeStrikes())
      .then(
        (n) => {
          this.setStrikes(n);
          if (this.strikes24h() >= STOP_AT_STRIKES) this.c.onStopped('strikes in the shared ledger');
        },
        (err: unknown) =>
          this.c.logger.debug({ err: errorText(err) }, 'shared rate ledger: strike count not refreshed'),
      )
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
