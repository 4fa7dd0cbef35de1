import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../lib/logger.js';
import { STOP_AT_STRIKES, type RateSpend, type SpendGrant } from './spend.js';
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
 * Where the spend, the pauses and the strikes are kept and decided is the budget's spend strategy
 * (spend.ts: in-process on a RateStateStore, or the ledger every process on the key shares);
 * this class keeps what is per process whatever the strategy: FIFO waiters, the in-flight cap, the
 * X-RateLimit-* view, the 429 jitter and the wait announcements.
 */

export { STOP_AT_STRIKES, STRIKE_WINDOW_MS, TRAFFIC_STOP_AT_STRIKES } from './spend.js';

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
  /**
   * Where tokens, pauses and strikes are kept and decided (spend.ts). A shared ledger's limits
   * must be allowedPerWindow of these settings.
   */
  spend: RateSpend;
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
  /** The spend strategy's grant (SpendGrant ref), booked as answered at settle(). */
  ref?: string;
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
  private alerted = false;
  private closed = false;
  private readonly closeController = new AbortController();
  private readonly counters = { rateLimited: 0, waitsMs: 0 };
  private readonly waitListeners = new Set<(w: PlatformWait) => void>();
  private readonly spend: RateSpend;

  constructor(private readonly opts: RateBudgetOptions) {
    this.random = opts.random ?? Math.random;
    this.jitter = opts.pauseJitterMs ?? [250, 1000];
    this.spend = opts.spend;
    const lane = (bucket: Bucket, limit: number): Lane => ({
      bucket,
      limit,
      seq: 0,
      pausedUntil: 0,
      server: null,
      waiters: [],
      pumping: false,
      responded: false,
      inFlight: 0,
      announced: false,
    });
    this.lanes = { read: lane('read', opts.readsPerWindow), write: lane('write', opts.writesPerWindow) };
    this.spend.start({
      clock: opts.clock,
      windowMs: opts.windowMs,
      logger: opts.logger,
      isClosed: () => this.closed,
      onStopped: (when) => this.alertTrafficStopped(when),
      onBelowStop: () => {
        this.alerted = false;
      },
    });
    for (const l of Object.values(this.lanes)) l.pausedUntil = this.spend.pausedUntil(l.bucket);
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
    return this.spend.strikes24h();
  }

  /**
   * true after STOP_AT_STRIKES strikes in 24 h: no request of either bucket is sent. While stopped
   * the strategy re-reads the strikes, so an operator's `platform strikes clear` from another
   * process resumes traffic at the next call.
   */
  stopped(): boolean {
    return this.spend.stopped();
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
    // With a shared ledger, its answer decides (an operator may have cleared the strikes on another host).
    if (this.spend.refusesWhenStopped()) return Promise.reject(this.stoppedError());
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
    if (token.ref !== undefined) this.spend.answered?.(token.bucket, token.ref);
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
   * once the strike is recorded. With a shared ledger the pause and the ONE strike go there, for
   * every process on the key; if the ledger cannot be reached the strike is kept here and no token
   * of either bucket is taken before it is recorded.
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
    const booked = this.spend.recordRateLimited(lane.bucket, {
      at: now,
      path: info.path,
      waitMs,
      pausedUntil: lane.pausedUntil,
    });
    // Awaited only when the strategy is asynchronous (the in-process log books it at once).
    if (booked !== undefined) await booked;
    const strikes = this.strikes24h();
    this.opts.logger.warn(
      {
        bucket: lane.bucket,
        path: info.path,
        pauseMs: lane.pausedUntil - now,
        strikes24h: strikes,
        allowedNow: this.allowed(lane.bucket),
        shared: this.spend.kind === 'shared-ledger',
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
    const n = await this.spend.clearStrikes(by, this.opts.clock.now());
    this.alerted = false;
    this.opts.logger.warn({ by, cleared: n }, 'rate-limit strikes cleared by operator');
    return n;
  }

  snapshot(bucket: Bucket): BudgetSnapshot {
    const lane = this.lanes[bucket];
    const now = this.opts.clock.now();
    const spent = this.spend.spentInWindow(bucket, now);
    const allowed = this.allowed(bucket);
    return {
      bucket,
      limit: lane.limit,
      allowed,
      spentInWindow: spent,
      remaining: Math.max(0, allowed - spent),
      pausedUntil: lane.pausedUntil > now ? lane.pausedUntil : null,
    };
  }

  stats(): { rateLimited: number; waitsMs: number } {
    return { ...this.counters };
  }

  close(): void {
    this.closed = true;
    this.closeController.abort();
    try {
      this.spend.flush?.();
    } catch (err) {
      // The next run counts the reservation instead of the exact total: it waits a little longer.
      this.opts.logger.warn({ err }, 'rate budget: the spend window could not be stored at close');
    }
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

  /** 0 when a token may be taken now, else how long to wait and why. */
  private waitMs(lane: Lane, now: number): { ms: number; why: 'paused' | 'window' | 'server' | null } {
    this.spend.refresh(lane.bucket, now);
    lane.pausedUntil = Math.max(lane.pausedUntil, this.spend.pausedUntil(lane.bucket));
    if (lane.pausedUntil > now) return { ms: lane.pausedUntil - now, why: 'paused' };
    const windowMs = this.spend.windowWait(lane.bucket, now, this.allowed(lane.bucket));
    if (windowMs > 0) return { ms: windowMs, why: 'window' };
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

  /**
   * Acts on the strategy's grant for the head of the line: 'next' when a waiter was served (a token
   * or its failure), 'stop' when the lane is done, else how long to wait and why.
   */
  private serve(lane: Lane, g: SpendGrant): 'next' | 'stop' | { ms: number; why: 'paused' | 'window' } {
    if (g.kind === 'granted') {
      const w = lane.waiters.shift();
      // Its caller gave up while the ledger decided: the grant is spent all the same (never
      // refunded), and its call never leaves.
      if (w === undefined) {
        if (g.ref !== undefined) this.spend.answered?.(lane.bucket, g.ref);
        return 'next';
      }
      w.cleanup();
      lane.seq += 1;
      lane.inFlight += 1;
      w.resolve({
        bucket: lane.bucket,
        seq: lane.seq,
        at: g.at,
        ...(g.ref === undefined ? {} : { ref: g.ref }),
      });
      if (lane.announced) {
        lane.announced = false;
        this.announce({ kind: 'resumed', bucket: lane.bucket });
      }
      return 'next';
    }
    if (g.kind === 'failed') {
      const w = lane.waiters.shift();
      w?.cleanup();
      w?.reject(g.error);
      return 'next';
    }
    if (g.kind === 'stopped') {
      this.alertTrafficStopped('strikes in the shared ledger');
      this.rejectAll(lane);
      return 'stop';
    }
    // Another process's 429 (or ours): the pause is the strategy's.
    if (g.why === 'paused') lane.pausedUntil = Math.max(lane.pausedUntil, this.opts.clock.now() + g.ms);
    return { ms: g.ms, why: g.why };
  }

  private async pump(lane: Lane): Promise<void> {
    if (lane.pumping) return;
    lane.pumping = true;
    try {
      while (lane.waiters.length > 0 && !this.closed) {
        if (this.spend.refusesWhenStopped()) {
          this.rejectAll(lane);
          break;
        }
        // At the in-flight cap: settle() of a request in flight pumps again.
        if (this.opts.maxInFlight !== undefined && lane.inFlight >= this.inFlightCap(lane.bucket)) break;
        const now = this.opts.clock.now();
        let { ms: wait, why } = this.waitMs(lane, now);
        if (wait <= 0) {
          const pending = this.spend.grant(lane.bucket, now);
          // Awaited only when the strategy is asynchronous: the in-process log adds no await here.
          const g = pending instanceof Promise ? await pending : pending;
          if (this.closed) break;
          const granted = this.serve(lane, g);
          if (granted === 'next') continue;
          if (granted === 'stop') break;
          ({ ms: wait, why } = granted);
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
