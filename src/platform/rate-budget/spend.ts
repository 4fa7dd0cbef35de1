import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { Bucket } from '../api.js';

/**
 * The rate budget's spend strategy (issue 44): WHERE the tokens, pauses and 429 strikes of the
 * API key are kept and decided. RateBudget (budget.ts) keeps what is per process whatever the
 * strategy (FIFO waiters, the in-flight cap, the X-RateLimit-* view, 429 jitter) and asks its
 * strategy for the rest. Two strategies, chosen by src/app/platform.ts from `store.engine`:
 * - in-process (in-process.ts): this process decides on its own spend log, kept in a
 *   RateStateStore (SQLite, memory) and re-read when other processes on the host share the file;
 * - shared ledger (shared-ledger.ts): every process on the key, on any host, asks ONE ledger
 *   (PostgreSQL) for every token, on the database clock.
 */

export const STRIKE_WINDOW_MS = 24 * 60 * 60 * 1000;
/**
 * Strikes in STRIKE_WINDOW_MS at which ALL platform traffic stops, reads included (the platform
 * revokes a live key at 3, and it counts a 429 to a read like any other). The name stays for
 * the callers that import it.
 */
export const TRAFFIC_STOP_AT_STRIKES = 2;
export const STOP_AT_STRIKES = TRAFFIC_STOP_AT_STRIKES;
/** Strikes are kept a week for the audit trail, then pruned. */
export const STRIKE_RETENTION_MS = 7 * STRIKE_WINDOW_MS;

/** What the budget hands its strategy when it starts using it. */
export interface SpendContext {
  clock: Clock;
  windowMs: number;
  logger: Logger;
  /** The budget was closed: no more re-reads, no more logs about an unreachable ledger. */
  isClosed(): boolean;
  /** The strikes reached the stop: the budget raises its ALERT (once until they fall below). */
  onStopped(when: string): void;
  /** The strikes are below the stop (cleared elsewhere, aged out): a later stop alerts again. */
  onBelowStop(): void;
}

/** A strategy's answer for the token at the head of a bucket's line. */
export type SpendGrant =
  /**
   * Spent (persisted or granted by the ledger) at `at`, epoch ms on this host's clock; `ref`: the
   * grant as the strategy knows it, handed back with answered() (a ledger's grant id).
   */
  | { kind: 'granted'; at: number; ref?: string }
  /** The call must not be sent: fail the waiter at the head of the line with `error`. */
  | { kind: 'failed'; error: unknown }
  /** Not now: wait `ms` (a pause after a 429, or the window is full). */
  | { kind: 'wait'; ms: number; why: 'paused' | 'window' }
  /** Traffic is stopped (strikes): fail every waiter. */
  | { kind: 'stopped' };

/** A 429 as the budget books it. */
export interface RateLimitedStrike {
  at: number;
  path: string;
  /** The wait the answer named (Retry-After, body, reset), before jitter. */
  waitMs: number;
  /** The bucket's pause end with jitter (epoch ms). */
  pausedUntil: number;
}

export interface RateSpend {
  /** in-process: this process's log decides; shared-ledger: every process on the key shares one. */
  readonly kind: 'in-process' | 'shared-ledger';
  /** Called once by the budget that uses the strategy, before anything else. */
  start(ctx: SpendContext): void;
  /** Strikes in the last 24 h as last known (the pace halves at 1, all traffic stops at 2). */
  strikes24h(): number;
  /** Whether traffic is stopped now (may re-read the strikes: a clear elsewhere resumes it). */
  stopped(): boolean;
  /**
   * Whether the budget may refuse a call as stopped without asking: true when this process's own
   * knowledge is the whole truth (in-process); a shared ledger's answer decides instead.
   */
  refusesWhenStopped(): boolean;
  /** Re-reads what other processes spent, paused and struck, when they share the store. */
  refresh(bucket: Bucket, now: number): void;
  /** The bucket's pause known to the store (a previous run, another process), epoch ms, or 0. */
  pausedUntil(bucket: Bucket): number;
  /** How long before one more token fits the strategy's own window (0: it fits, or not its call). */
  windowWait(bucket: Bucket, now: number, allowed: number): number;
  /** Tokens spent in the current window, as the strategy counts them (for snapshots). */
  spentInWindow(bucket: Bucket, now: number): number;
  /**
   * Spends a token for the head of the line, persisted before the call leaves. Synchronous where
   * the strategy can be (the in-process log), so no await is added to its path.
   */
  grant(bucket: Bucket, now: number): SpendGrant | Promise<SpendGrant>;
  /**
   * The call of a grant that carried a `ref` was answered, or never left (network error, its caller
   * gave up): the strategy counts it until a window after now, not after its grant, because the
   * platform counts the call when it arrives.
   */
  answered?(bucket: Bucket, ref: string): void;
  /** Books a 429's pause and ONE strike (synchronously where the strategy can). */
  recordRateLimited(bucket: Bucket, strike: RateLimitedStrike): void | Promise<void>;
  /** Operator command: forget the strikes; returns how many. */
  clearStrikes(by: string, now: number): Promise<number>;
  /**
   * The budget closes: persist what a restart must count (the in-process window's exact total).
   * Idempotent; close() does it too.
   */
  flush?(): void;
  /** Releases the store the strategy was given (after the client's last answer is booked). */
  close(): void;
}
