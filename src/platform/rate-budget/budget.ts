import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import type { RateLedger, RateStateStore, StrikeRecord, TakeResult } from './ledger.js';
import type { Bucket, BudgetSnapshot, PlatformWait } from '../api.js';
import { parseRetryAfter, PlatformError } from '../errors.js';
import { serverClockOffsetMs, toHostTime } from '../server-clock.js';

/**
 * The client-side rate budget (design.md "Decisions"): separate read and write buckets, each a
 * sliding window of attempt timestamps, paced below the documented limit by `headroom`. A sliding
 * window of `allowed` per windowMs also holds for ANY fixed window of the same length, so the
 * server's windows need not line up with ours. Every attempt (retries included) takes a token
 * before it leaves, and the token is persisted first, so a restart inside a window cannot burst.
 *
 * Two ways to keep the spend (issue 26):
 * - a RateStateStore (SQLite, memory): this class decides, on its own spend log, re-read from the
 *   state file when other processes on the same host share it (`shared`);
 * - a RateLedger (PostgreSQL): every process on the API key, on any host, spends from ONE ledger
 *   that decides each token on the database clock (a sliding-window log, src/store/rate-budget/pg.ts), and keeps
 *   the pauses and the strike ledger for all of them. This class then keeps only what is per
 *   process: FIFO waiters, the in-flight cap, the X-RateLimit-* view and the 429 jitter.
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
const STRIKE_RETENTION_MS = 7 * STRIKE_WINDOW_MS;

/**
 * Tokens per window a bucket may use with `strikes` strikes in 24 h: the documented limit times the
 * headroom, halved (never below 1) while a strike counts. The shared ledger is given the same two
 * numbers (src/app/platform.ts), so both ways of keeping the budget pace alike.
 */
export function allowedPerWindow(limit: number, headroom: number, strikes: number): number {
  const base = Math.max(1, Math.floor(limit * headroom));
  return strikes >= 1 ? Math.max(1, Math.floor(base / 2)) : base;
}

/** GET/HEAD are reads; everything else (POST search included, as design.md decides) is a write. */
export function bucketFor(method: string): Bucket {
  const m = method.toUpperCase();
  return m === 'GET' || m === 'HEAD' ? 'read' : 'write';
}

export interface RateLimitSettings {
  readsPerWindow: number;
  writesPerWindow: number;
  windowMs: number;
  /** Fraction (0, 1] of the documented limit the client allows itself. */
  headroom: number;
}

export interface RateBudgetOptions extends RateLimitSettings {
  clock: Clock;
  /** Where the spend is kept when there is no ledger (SQLite, memory). Ignored with a ledger. */
  state: RateStateStore;
  /**
   * The shared ledger (PostgreSQL): every token, pause and strike is decided there, for every
   * process on the key. Its limits must be allowedPerWindow of these settings.
   */
  ledger?: RateLedger;
  logger: Logger;
  /** Random source in [0, 1) for pause jitter (tests pin it). */
  random?: () => number;
  /** Extra wait added to every 429 pause: [min, max] ms. Default [250, 1000]. */
  pauseJitterMs?: readonly [number, number];
  /** Pause when a 429 names no wait at all. Default windowMs. */
  defaultPauseMs?: number;
  /**
   * Bound tokens in flight per bucket (taken, answer not yet booked with settle()): see
   * inFlightCap. The client passes its connections per bucket; without it there is no bound
   * (callers that never call settle()).
   */
  maxInFlight?: number;
}

export interface Token {
  bucket: Bucket;
  /** Per-bucket sequence number: tokens taken after this one have a larger seq. */
  seq: number;
  at: number;
}

export interface RateHeaders {
  limit?: string | null | undefined;
  remaining?: string | null | undefined;
  reset?: string | null | undefined;
  /** The answer's Date header: the platform's clock, against which an epoch reset is read. */
  date?: string | null | undefined;
}

export interface RateLimitedInfo {
  path: string;
  /** max(Retry-After, body.retryAfter) in seconds, or null when neither was sent. */
  retryAfterSeconds: number | null;
  headers: RateHeaders;
}

interface ServerView {
  remaining: number;
  resetAt: number;
  /** seq of the token whose response carried this view. */
  afterSeq: number;
}

interface Waiter {
  resolve: (t: Token) => void;
  reject: (e: unknown) => void;
  cleanup: () => void;
}

interface Lane {
  bucket: Bucket;
  limit: number;
  /** Attempt timestamps inside the window, ascending. */
  spent: number[];
  seq: number;
  pausedUntil: number;
  server: ServerView | null;
  waiters: Waiter[];
  pumping: boolean;
  /** A response (any status) came back in this bucket since start: until then one probe at a time. */
  responded: boolean;
  /** Tokens taken whose answer is not booked yet (settle()). */
  inFlight: number;
  /** A wait was announced to the listeners: the next token taken announces the resume. */
  announced: boolean;
}

/** Waits shorter than this are not announced (a progress line would only flicker). */
const ANNOUNCE_WAIT_MS = 200;

/**
 * Turns X-RateLimit-Reset into epoch ms on this host's clock: epoch seconds per spec (epoch ms or
 * delta seconds tolerated). An epoch is the platform's instant: `serverOffsetMs`
 * (serverClockOffsetMs of the answer's Date header) lays it on this host's clock.
 */
export function parseResetHeader(
  value: string | null | undefined,
  nowMs: number,
  serverOffsetMs = 0,
): number | null {
  if (value === null || value === undefined || value.trim() === '') return null;
  const n = Number(value.trim());
  if (!Number.isFinite(n) || n < 0) return null;
  if (n > 1e12) return toHostTime(n, serverOffsetMs);
  if (n > 1e9) return toHostTime(n * 1000, serverOffsetMs);
  return nowMs + n * 1000;
}

function parseCount(value: string | null | undefined): number | null {
  if (value === null || value === undefined || value.trim() === '') return null;
  const n = Number(value.trim());
  return Number.isFinite(n) && n >= 0 ? Math.floor(n) : null;
}

export class RateBudget {
  private readonly lanes: Record<Bucket, Lane>;
  private readonly random: () => number;
  private readonly jitter: readonly [number, number];
  private strikes: StrikeRecord[];
  private alerted = false;
  private closed = false;
  private readonly closeController = new AbortController();
  private spendSincePrune = 0;
  private readonly counters = { rateLimited: 0, waitsMs: 0 };
  private readonly waitListeners = new Set<(w: PlatformWait) => void>();
  private readonly ledger: RateLedger | null;
  /** Ledger only: the strike count of the last answer, and when it came (process clock). */
  private ledgerStrikes = 0;
  private ledgerStrikesAt = Number.NEGATIVE_INFINITY;
  private ledgerRefresh: Promise<void> | null = null;
  /** Ledger only: 429s not yet recorded in the ledger (it was unreachable); no token before they are. */
  private pendingStrikes: Array<{ bucket: Bucket; path: string; retryAfterMs: number }> = [];

  constructor(private readonly opts: RateBudgetOptions) {
    this.random = opts.random ?? Math.random;
    this.jitter = opts.pauseJitterMs ?? [250, 1000];
    this.ledger = opts.ledger ?? null;
    const now = opts.clock.now();
    if (this.ledger === null) opts.state.prune(now - opts.windowMs * 2, now - STRIKE_RETENTION_MS);
    const lane = (bucket: Bucket, limit: number): Lane => ({
      bucket,
      limit,
      spent: this.ledger === null ? opts.state.loadSpend(bucket, now - opts.windowMs) : [],
      seq: 0,
      pausedUntil: this.ledger === null ? (opts.state.loadPause(bucket) ?? 0) : 0,
      server: null,
      waiters: [],
      pumping: false,
      responded: false,
      inFlight: 0,
      announced: false,
    });
    this.lanes = { read: lane('read', opts.readsPerWindow), write: lane('write', opts.writesPerWindow) };
    this.strikes = this.ledger === null ? opts.state.activeStrikes(now - STRIKE_WINDOW_MS) : [];
    if (this.ledger !== null) void this.refreshLedgerView();
    else if (this.stopped()) this.alertTrafficStopped('at start');
  }

  /**
   * Subscribes to the budget's waits: each time a call is held (own window full, the platform's
   * remaining count at 0, a 429 pause) with the reason and until when, and when it goes out.
   */
  onWait(listener: (w: PlatformWait) => void): () => void {
    this.waitListeners.add(listener);
    return () => this.waitListeners.delete(listener);
  }

  private announce(w: PlatformWait): void {
    for (const l of this.waitListeners) {
      try {
        l(w);
      } catch (err) {
        this.opts.logger.debug({ err }, 'rate budget wait listener failed');
      }
    }
  }

  /** Tokens per window this bucket may use now (half pace after one strike in 24 h). */
  allowed(bucket: Bucket): number {
    return allowedPerWindow(this.lanes[bucket].limit, this.opts.headroom, this.strikes24h());
  }

  strikes24h(): number {
    if (this.ledger !== null) return this.ledgerStrikes + this.pendingStrikes.length;
    const since = this.opts.clock.now() - STRIKE_WINDOW_MS;
    return this.strikes.filter((s) => s.at >= since).length;
  }

  /**
   * true after STOP_AT_STRIKES strikes in 24 h: no request of either bucket is sent. While stopped
   * the ledger is re-read from the store on every check (one indexed query), so an operator's
   * `platform strikes clear` from another process resumes traffic at the next call.
   */
  stopped(): boolean {
    if (this.ledger !== null) return this.ledgerStopped();
    if (this.strikes24h() < STOP_AT_STRIKES) return false;
    if (!this.closed) this.strikes = this.opts.state.activeStrikes(this.opts.clock.now() - STRIKE_WINDOW_MS);
    const stopped = this.strikes24h() >= STOP_AT_STRIKES;
    // Cleared elsewhere (or aged out): a later stop must raise its ALERT again.
    if (!stopped) this.alerted = false;
    return stopped;
  }

  /** Kept for callers of the old name: writes stop exactly when everything stops. */
  trafficStopped(): boolean {
    return this.stopped();
  }

  /**
   * Requests this bucket may have in flight now. A refusal comes back once per request already
   * sent, and the platform may count each 429 as a strike, so in flight, both buckets together,
   * never exceeds the strikes left before the stop (STOP_AT_STRIKES − strikes24h: 2 with a clean
   * ledger, 1 after a strike).
   * Even if the server starts refusing everything at once, this process alone can then bring the
   * ledger to the stop (2) but never to the revocation (3). Also:
   * - before any response came back in this bucket (a start, maybe against a server that already
   *   refuses): 1, a probe;
   * - with a live server view (X-RateLimit-Remaining): at most what the server says remains less
   *   the tokens taken since that response;
   * - never more than `connections`, never less than 1 while the other bucket has none in flight
   *   (the budget itself waits when none remain).
   * At the documented limits (100 reads / 30 writes a minute) one request in flight already
   * carries the whole budget, so the bound costs no throughput.
   */
  inFlightCap(
    bucket: Bucket,
    connections: number = this.opts.maxInFlight ?? Number.POSITIVE_INFINITY,
  ): number {
    const lane = this.lanes[bucket];
    const strikesLeft = STOP_AT_STRIKES - this.strikes24h();
    let cap = Math.min(connections, strikesLeft);
    const s = lane.server;
    if (s !== null && this.opts.clock.now() < s.resetAt)
      cap = Math.min(cap, s.remaining - (lane.seq - s.afterSeq));
    cap = lane.responded ? Math.max(1, cap) : 1;
    // Reads and writes together (issue 43): an answer of either bucket can be a 429, and the spec
    // does not say a burst in one window counts once ("exceed rate limits 3 or more times"; the
    // sandbox counts every 429), so the strikes left bound the requests in flight of both buckets,
    // not of each (2 reads + 2 writes in flight could bring 4). 0 here: wait for the other bucket's
    // answers (settle() pumps every bucket).
    const others = Object.values(this.lanes).reduce((n, l) => (l === lane ? n : n + l.inFlight), 0);
    if (others > 0) cap = Math.min(cap, Math.max(0, strikesLeft - others));
    return cap;
  }

  /** Waits (FIFO per bucket) until an attempt may be sent, records it, and returns its token. */
  acquire(bucket: Bucket, signal?: AbortSignal): Promise<Token> {
    if (this.closed)
      return Promise.reject(new PlatformError({ code: 'aborted', message: 'platform client closed' }));
    // With a ledger, its answer decides (an operator may have cleared the strikes on another host).
    if (this.ledger === null && this.stopped()) return Promise.reject(this.stoppedError());
    if (signal?.aborted)
      return Promise.reject(
        new PlatformError({ code: 'aborted', message: 'aborted while waiting for rate budget' }),
      );
    const lane = this.lanes[bucket];
    return new Promise<Token>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      };
      const onAbort = (): void => {
        const i = lane.waiters.indexOf(waiter);
        if (i >= 0) lane.waiters.splice(i, 1);
        reject(new PlatformError({ code: 'aborted', message: 'aborted while waiting for rate budget' }));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      lane.waiters.push(waiter);
      void this.pump(lane);
    });
  }

  /**
   * The answer to this token is booked (observe/onRateLimited done) or it never came (network
   * error): one fewer in flight; the next waiter may go if the cap allows.
   */
  settle(token: Token): void {
    const lane = this.lanes[token.bucket];
    lane.inFlight = Math.max(0, lane.inFlight - 1);
    // Every bucket: the in-flight bound counts both (inFlightCap).
    for (const l of Object.values(this.lanes)) void this.pump(l);
  }

  /** Syncs down from X-RateLimit-* of a response: when the server says fewer remain, believe it. */
  observe(token: Token, headers: RateHeaders): void {
    const lane = this.lanes[token.bucket];
    lane.responded = true;
    const remaining = parseCount(headers.remaining);
    if (remaining === null) return;
    const now = this.opts.clock.now();
    const resetAt =
      parseResetHeader(headers.reset, now, serverClockOffsetMs(headers.date, now)) ??
      now + this.opts.windowMs;
    const cur = lane.server;
    // Keep the freshest view: the one from the most recently sent request, or a newer server window.
    if (cur === null || now >= cur.resetAt || token.seq > cur.afterSeq || resetAt > cur.resetAt) {
      // No headroom on top: our own window already keeps it. The view only binds when the server
      // counts more than we sent (another process on the key, windows longer than ours, a restart).
      lane.server = { remaining, resetAt, afterSeq: token.seq };
    }
  }

  /**
   * A 429: pause the WHOLE bucket until max(Retry-After, body.retryAfter, X-RateLimit-Reset) plus
   * jitter (never shorter), persist the pause and a strike. Resolves with the pause end (epoch ms)
   * once the strike is recorded. With a ledger the pause and the ONE strike go there, for every
   * process on the key; if the ledger cannot be reached the strike is kept here and no token of
   * either bucket is taken before it is recorded.
   */
  async onRateLimited(token: Token, info: RateLimitedInfo): Promise<number> {
    const now = this.opts.clock.now();
    const lane = this.lanes[token.bucket];
    this.counters.rateLimited += 1;
    const waitMs = this.pauseMs(now, info.retryAfterSeconds, info.headers);
    const [jMin, jMax] = this.jitter;
    const until = Math.ceil(now + waitMs + jMin + this.random() * Math.max(0, jMax - jMin));
    lane.pausedUntil = Math.max(lane.pausedUntil, until);
    lane.server = { remaining: 0, resetAt: lane.pausedUntil, afterSeq: lane.seq };
    if (this.ledger === null) {
      this.opts.state.savePause(lane.bucket, lane.pausedUntil);
      this.opts.state.recordStrike({ at: now, bucket: lane.bucket, path: info.path, retryAfterMs: waitMs });
      this.strikes = this.opts.state.activeStrikes(now - STRIKE_WINDOW_MS);
    } else {
      // Counted at once (the in-flight cap drops now), recorded in the ledger next.
      this.pendingStrikes.push({
        bucket: lane.bucket,
        path: info.path,
        retryAfterMs: lane.pausedUntil - now,
      });
      try {
        await this.flushStrikes();
      } catch (err) {
        this.opts.logger.error(
          { err: errorText(err), bucket: lane.bucket, path: info.path, pending: this.pendingStrikes.length },
          'rate limit hit (429) but the shared rate ledger is unreachable: the strike is kept in this process ' +
            'and no platform request is sent until it is recorded',
        );
      }
    }
    const strikes = this.strikes24h();
    this.opts.logger.warn(
      {
        bucket: lane.bucket,
        path: info.path,
        pauseMs: lane.pausedUntil - now,
        strikes24h: strikes,
        allowedNow: this.allowed(lane.bucket),
        shared: this.ledger !== null,
      },
      'rate limit hit (429): whole bucket paused; pace halved while a strike is in the 24 h ledger',
    );
    if (this.stopped()) this.alertTrafficStopped('after 429');
    else {
      lane.announced = true;
      this.announce({ kind: 'paused', bucket: lane.bucket, until: lane.pausedUntil });
    }
    // Wake the pumps so calls waiting in line fail fast now that traffic is stopped.
    for (const l of Object.values(this.lanes)) void this.pump(l);
    return lane.pausedUntil;
  }

  /**
   * The status line of an answer said 429, its body is still coming: the bucket stops at once, for
   * the wait its headers name (plus the least jitter), so no token goes out while a slow body
   * trickles in. onRateLimited, once the body is read, books the strike and may lengthen the pause
   * (body.retryAfter); a pause only grows.
   */
  holdAtRateLimitStatus(token: Token, headers: RateHeaders & { retryAfter?: string | null }): void {
    const now = this.opts.clock.now();
    const lane = this.lanes[token.bucket];
    const offset = serverClockOffsetMs(headers.date, now);
    const wait = this.pauseMs(now, parseRetryAfter(headers.retryAfter, now, offset), headers);
    lane.pausedUntil = Math.max(lane.pausedUntil, Math.ceil(now + wait + this.jitter[0]));
  }

  /** How long a 429 pauses its bucket before jitter: the longest wait it names, else the default. */
  private pauseMs(now: number, retryAfterSeconds: number | null, headers: RateHeaders): number {
    const resetAt = parseResetHeader(headers.reset, now, serverClockOffsetMs(headers.date, now));
    if (retryAfterSeconds === null && resetAt === null) return this.opts.defaultPauseMs ?? this.opts.windowMs;
    return Math.max(
      retryAfterSeconds === null ? 0 : retryAfterSeconds * 1000,
      resetAt === null ? 0 : resetAt - now,
    );
  }

  /** Operator command: forget the strikes (after the platform confirmed the key is fine). */
  async clearStrikes(by: string): Promise<number> {
    let n: number;
    if (this.ledger === null) {
      n = this.opts.state.clearStrikes(by, this.opts.clock.now());
      this.strikes = this.opts.state.activeStrikes(this.opts.clock.now() - STRIKE_WINDOW_MS);
    } else {
      n = await this.ledger.clearStrikes(by);
      this.setLedgerStrikes(await this.ledger.activeStrikes());
    }
    this.alerted = false;
    this.opts.logger.warn({ by, cleared: n }, 'rate-limit strikes cleared by operator');
    return n;
  }

  snapshot(bucket: Bucket): BudgetSnapshot {
    const lane = this.lanes[bucket];
    const now = this.opts.clock.now();
    this.expire(lane, now);
    const allowed = this.allowed(bucket);
    return {
      bucket,
      limit: lane.limit,
      allowed,
      spentInWindow: lane.spent.length,
      remaining: Math.max(0, allowed - lane.spent.length),
      pausedUntil: lane.pausedUntil > now ? lane.pausedUntil : null,
    };
  }

  stats(): { rateLimited: number; waitsMs: number } {
    return { ...this.counters };
  }

  close(): void {
    this.closed = true;
    this.closeController.abort();
    for (const lane of Object.values(this.lanes)) {
      for (const w of lane.waiters.splice(0)) {
        w.cleanup();
        w.reject(new PlatformError({ code: 'aborted', message: 'platform client closed' }));
      }
    }
  }

  /**
   * Code `rate_limit.traffic_stopped` (neither retryable nor fatal) for reads too: the boarding
   * pipeline already halts the cycle on that code instead of failing or quarantining the loan.
   */
  private stoppedError(): PlatformError {
    return new PlatformError({
      code: 'rate_limit.traffic_stopped',
      message:
        'platform traffic stopped (reads and writes): 2 rate-limit strikes in 24 h (the platform revokes a live ' +
        'key at 3); it resumes when the ledger ages out or an ' +
        'operator runs `boarding-connector platform strikes clear`',
    });
  }

  private alertTrafficStopped(when: string): void {
    if (this.alerted) return;
    this.alerted = true;
    this.opts.logger.error(
      { strikes24h: this.strikes24h(), when, alert: 'rate_limit.traffic_stopped' },
      'ALERT: 2 rate-limit strikes within 24 h: all platform traffic stopped, no request is sent until the ' +
        'ledger ages out or an operator clears it (a live key is revoked at 3)',
    );
  }

  private rejectAll(lane: Lane): void {
    for (const w of lane.waiters.splice(0)) {
      w.cleanup();
      w.reject(this.stoppedError());
    }
  }

  /**
   * Ledger only: one decision for the waiter at the head of the line. 'next': it got its token (or
   * failed: the ledger unreachable is the retryable `network`, the call is NOT sent); 'stop':
   * traffic is stopped, every waiter of the lane failed; else how long the ledger says to wait.
   */
  private async askLedger(
    lane: Lane,
    ledger: RateLedger,
  ): Promise<'next' | 'stop' | { ms: number; why: 'paused' | 'window' }> {
    let r: TakeResult;
    try {
      await this.flushStrikes();
      r = await ledger.take(lane.bucket);
    } catch (err) {
      if (this.closed) return 'stop';
      const w = lane.waiters.shift();
      this.opts.logger.warn(
        { err: errorText(err), bucket: lane.bucket },
        'shared rate ledger unreachable: the platform call is not sent (retried later)',
      );
      if (w !== undefined) {
        w.cleanup();
        w.reject(
          new PlatformError({
            code: 'network',
            message:
              `the shared rate budget (state database) is ` +
              `unreachable, so the call was not sent: ${errorText(err)}`,
            cause: err,
          }),
        );
      }
      return 'next';
    }
    if (this.closed) return 'stop';
    this.setLedgerStrikes(r.strikes);
    const now = this.opts.clock.now();
    if (r.decision === 'granted') {
      const w = lane.waiters.shift();
      // Its caller gave up while the ledger decided: the grant is spent all the same (never refunded).
      if (w === undefined) return 'next';
      w.cleanup();
      w.resolve(this.take(lane, now));
      if (lane.announced) {
        lane.announced = false;
        this.announce({ kind: 'resumed', bucket: lane.bucket });
      }
      return 'next';
    }
    if (r.decision === 'stopped') {
      this.alertTrafficStopped('strikes in the shared ledger');
      this.rejectAll(lane);
      return 'stop';
    }
    if (r.decision === 'paused') {
      // Another process's 429 (or ours): the pause is the ledger's, on the database clock.
      lane.pausedUntil = Math.max(lane.pausedUntil, now + r.waitMs);
      return { ms: r.waitMs, why: 'paused' };
    }
    return { ms: r.waitMs, why: 'window' };
  }

  /** Ledger only: records the 429s not yet in the ledger, one at a time, in order (never twice). */
  private flushing: Promise<void> | null = null;
  private flushStrikes(): Promise<void> {
    const ledger = this.ledger;
    if (ledger === null || this.pendingStrikes.length === 0) return this.flushing ?? Promise.resolve();
    const run = async (): Promise<void> => {
      while (this.pendingStrikes.length > 0) {
        const s = this.pendingStrikes[0] as { bucket: Bucket; path: string; retryAfterMs: number };
        const n = await ledger.recordRateLimited(s.bucket, { path: s.path, retryAfterMs: s.retryAfterMs });
        this.pendingStrikes.shift();
        this.setLedgerStrikes(n);
      }
    };
    // Cleared after it settles, never before it is assigned (regression: a ledger that threw at
    // once left a settled, rejected flush here for good).
    this.flushing ??= run().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private setLedgerStrikes(n: number): void {
    this.ledgerStrikes = n;
    this.ledgerStrikesAt = this.opts.clock.now();
    if (this.strikes24h() < STOP_AT_STRIKES) this.alerted = false;
  }

  /** Ledger only: the view of the last answer, refreshed in the background when older than 1 s. */
  private ledgerStopped(): boolean {
    if (!this.closed && this.opts.clock.now() - this.ledgerStrikesAt >= 1000) void this.refreshLedgerView();
    return this.strikes24h() >= STOP_AT_STRIKES;
  }

  private refreshLedgerView(): Promise<void> {
    const ledger = this.ledger;
    if (ledger === null) return Promise.resolve();
    this.ledgerRefresh ??= Promise.resolve()
      .then(() => ledger.activeStrikes())
      .then(
        (n) => {
          this.setLedgerStrikes(n);
          if (this.strikes24h() >= STOP_AT_STRIKES) this.alertTrafficStopped('strikes in the shared ledger');
        },
        (err: unknown) =>
          this.opts.logger.debug({ err: errorText(err) }, 'shared rate ledger: strike count not refreshed'),
      )
      .finally(() => {
        this.ledgerRefresh = null;
      });
    return this.ledgerRefresh;
  }

  private expire(lane: Lane, now: number): void {
    const cutoff = now - this.opts.windowMs;
    let i = 0;
    while (i < lane.spent.length && (lane.spent[i] as number) <= cutoff) i += 1;
    if (i > 0) lane.spent.splice(0, i);
  }

  private lastStrikeRefresh = 0;

  /** Another process on the same state file spends from the same key: take its spend into account. */
  private refreshShared(lane: Lane, now: number): void {
    if (!this.opts.state.shared) return;
    lane.spent = this.opts.state.loadSpend(lane.bucket, now - this.opts.windowMs + 1);
    lane.pausedUntil = Math.max(lane.pausedUntil, this.opts.state.loadPause(lane.bucket) ?? 0);
    if (now - this.lastStrikeRefresh >= 1000) {
      this.lastStrikeRefresh = now;
      this.strikes = this.opts.state.activeStrikes(now - STRIKE_WINDOW_MS);
      if (this.stopped()) this.alertTrafficStopped('strike recorded by another process');
    }
  }

  /** 0 when a token may be taken now, else how long to wait and why. */
  private waitMs(lane: Lane, now: number): { ms: number; why: 'paused' | 'window' | 'server' | null } {
    if (this.ledger === null) this.refreshShared(lane, now);
    if (lane.pausedUntil > now) return { ms: lane.pausedUntil - now, why: 'paused' };
    this.expire(lane, now);
    const allowed = this.allowed(lane.bucket);
    // With a ledger the window is the ledger's (every process on the key); spent is this process's share.
    if (this.ledger === null && lane.spent.length >= allowed) {
      // The oldest token that must leave the window before one more fits.
      const t = lane.spent[lane.spent.length - allowed] as number;
      return { ms: Math.max(1, t + this.opts.windowMs - now + 1), why: 'window' };
    }
    const s = lane.server;
    if (s !== null) {
      if (now >= s.resetAt) {
        lane.server = null;
      } else if (s.remaining - (lane.seq - s.afterSeq) <= 0) {
        return { ms: Math.max(1, s.resetAt - now + 1), why: 'server' };
      }
    }
    return { ms: 0, why: null };
  }

  private take(lane: Lane, now: number): Token {
    // Persist first: if this throws (disk full) the attempt is not sent at all. (With a ledger the
    // grant is already spent there.)
    if (this.ledger === null) this.opts.state.recordSpend(lane.bucket, now);
    lane.spent.push(now);
    lane.seq += 1;
    lane.inFlight += 1;
    if (this.ledger !== null) return { bucket: lane.bucket, seq: lane.seq, at: now };
    this.spendSincePrune += 1;
    if (this.spendSincePrune >= 500) {
      this.spendSincePrune = 0;
      this.opts.state.prune(now - this.opts.windowMs * 2, now - STRIKE_RETENTION_MS);
    }
    return { bucket: lane.bucket, seq: lane.seq, at: now };
  }

  private async pump(lane: Lane): Promise<void> {
    if (lane.pumping) return;
    lane.pumping = true;
    try {
      while (lane.waiters.length > 0 && !this.closed) {
        if (this.ledger === null && this.stopped()) {
          this.rejectAll(lane);
          break;
        }
        // At the in-flight cap: settle() of a request in flight pumps again.
        if (this.opts.maxInFlight !== undefined && lane.inFlight >= this.inFlightCap(lane.bucket)) break;
        const now = this.opts.clock.now();
        let { ms: wait, why } = this.waitMs(lane, now);
        if (wait <= 0 && this.ledger !== null) {
          const asked = await this.askLedger(lane, this.ledger);
          if (asked === 'next') continue;
          if (asked === 'stop') break;
          ({ ms: wait, why } = asked);
        }
        if (wait <= 0) {
          const w = lane.waiters.shift() as Waiter;
          w.cleanup();
          try {
            w.resolve(this.take(lane, now));
          } catch (err) {
            w.reject(err);
          }
          if (lane.announced) {
            lane.announced = false;
            this.announce({ kind: 'resumed', bucket: lane.bucket });
          }
          continue;
        }
        if (wait >= ANNOUNCE_WAIT_MS && this.waitListeners.size > 0) {
          lane.announced = true;
          this.announce(
            why === 'paused'
              ? { kind: 'paused', bucket: lane.bucket, until: now + wait }
              : {
                  kind: 'budget',
                  bucket: lane.bucket,
                  reason: why === 'server' ? 'server' : 'window',
                  until: now + wait,
                },
          );
        }
        this.counters.waitsMs += wait;
        try {
          await this.opts.clock.sleep(wait, this.closeController.signal);
        } catch {
          break;
        }
      }
    } finally {
      lane.pumping = false;
    }
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A wait as a progress line shows it, `remainingMs` before it ends. */
export function describeWait(w: Exclude<PlatformWait, { kind: 'resumed' }>, remainingMs: number): string {
  const s = Math.max(1, Math.ceil(remainingMs / 1000));
  switch (w.kind) {
    case 'budget':
      return (
        `waiting ${s} s for the ${w.bucket} ` +
        `budget${w.reason === 'server' ? ' (the platform says none remain)' : ''}`
      );
    case 'paused':
      return `paused after a 429 until ${new Date(w.until).toISOString().slice(11, 19)}Z (${s} s, ${w.bucket}s)`;
    case 'retry':
      return `retrying ${w.operation} in ${s} s after ${w.cause}`;
  }
}
