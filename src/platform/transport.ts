import { Agent, Pool, type Dispatcher } from 'undici';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { withLinkedSignal } from '../lib/signals.js';
import { callFlightMs } from '../lib/rate-window.js';
import { createMemoryRateState, type RateStateStore } from './rate-budget/ledger.js';
import { InProcessRateSpend } from './rate-budget/in-process.js';
import type { RateSpend } from './rate-budget/spend.js';
import { inSpan, noteHttpStatus } from '../lib/tracing.js';
import type { Bucket, PlatformCallFailure, PlatformHealth, PlatformWait } from './api.js';
import { bucketFor, RateBudget, type RateLimitSettings, type Token } from './rate-budget/budget.js';
import {
  documentHostGuard,
  type DocumentHostGuard,
  type DocumentHostPolicy,
  type DocumentResolver,
} from './download-guard.js';
import { classifyResponse, classifyThrown, PlatformError, type HttpContext } from './errors.js';
import { DEFAULT_RETRY_POLICY, withRetry, type RetryPolicy } from './retry.js';
import { isUsableIdempotencyKey, MAX_IDEMPOTENCY_KEY_LENGTH } from '../contract/idempotency-key.js';

/**
 * The platform's transport: one undici pool, the rate budget, retries, 429 handling, error
 * classification, stats and readiness. It knows no endpoint: the catalogue (endpoints.ts) hands
 * it a CallSpec. Logs name the path template, never a path with ids nor a presigned URL.
 */

export const DEFAULT_USER_AGENT = 'boarding-connector/0.1';

export interface TransportOptions {
  /** Where presigned downloads may connect (download-guard.ts). Default: public addresses only. */
  documentHosts?: Partial<DocumentHostPolicy> & { resolve?: DocumentResolver };
  /** Service root ending in /api; paths /public/v1/... are appended. */
  baseUrl: string;
  apiKey: string;
  rateLimit: RateLimitSettings;
  timeouts: { connectMs: number; headersMs: number; bodyMs: number };
  maxRetries: number;
  logger: Logger;
  clock: Clock;
  /**
   * Where the rate budget keeps and decides its spend (src/app/platform.ts picks it from config);
   * the transport closes it on close(). Default: in process, on rateState.
   */
  rateSpend?: RateSpend;
  /** The in-process strategy's state when no rateSpend is given. Default: in memory. */
  rateState?: RateStateStore;
  userAgent?: string;
  retry?: Partial<Omit<RetryPolicy, 'maxRetries'>>;
  /** Most requests in flight per bucket (the pool holds twice as many connections). Default 8. */
  connections?: number;
  pauseJitterMs?: readonly [number, number];
  random?: () => number;
  /** Largest JSON response accepted (bytes). Default 16 MiB. */
  maxResponseBytes?: number;
}

export interface PlatformStats {
  /** Calls by bucket and outcome: HTTP status ("200", "429"…) or error code ("network", "timeout"). */
  calls: Record<Bucket, Record<string, number>>;
  rateLimited: number;
  deprecations: number;
  retries: number;
  downloads: { ok: number; failed: number };
}

export interface CallSpec<T> {
  operation: string;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Path template for logs and deprecation keys, e.g. /public/v1/loans/{id}. */
  template: string;
  /** Path after the base path, ids already encoded. */
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  idempotencyKey?: string;
  signal?: AbortSignal | undefined;
  parse: (body: unknown) => T;
}

export interface Transport {
  call<T>(spec: CallSpec<T>): Promise<T>;
  readonly logger: Logger;
  readonly userAgent: string;
  /** Connects only where the document-host guard allows; has never seen the API key. */
  readonly downloadAgent: Dispatcher;
  readonly guard: DocumentHostGuard;
  noteDownload(outcome: 'ok' | 'failed'): void;
  health(): PlatformHealth;
  stats(): PlatformStats;
  clearStrikes(by: string): Promise<number>;
  onWait(listener: (w: PlatformWait) => void): () => void;
  close(): Promise<void>;
}

export function headerValue(h: Dispatcher.ResponseData['headers'], name: string): string | null {
  const v = h[name];
  if (Array.isArray(v)) return v[0] ?? null;
  return typeof v === 'string' ? v : null;
}

function rateHeadersOf(res: Dispatcher.ResponseData): {
  limit: string | null;
  remaining: string | null;
  reset: string | null;
  date: string | null;
} {
  return {
    limit: headerValue(res.headers, 'x-ratelimit-limit'),
    remaining: headerValue(res.headers, 'x-ratelimit-remaining'),
    reset: headerValue(res.headers, 'x-ratelimit-reset'),
    date: headerValue(res.headers, 'date'),
  };
}

/** The JSON body (or its text when not JSON, null when empty), refused past maxBytes. */
async function readBody(res: Dispatcher.ResponseData, ctx: HttpContext, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      res.body.destroy();
      throw new PlatformError({
        ...ctx,
        code: 'response.invalid',
        status: res.statusCode,
        message: `${ctx.method} ${ctx.path}: response larger than ${maxBytes} bytes`,
      });
    }
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.length === 0) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * A write without a usable Idempotency-Key is refused before it leaves. A key no header can carry
 * (non-ASCII, control characters) is refused too: undici would throw on it, and that error read
 * as a network failure would be retried for ever.
 */
function missingIdempotencyKey(spec: CallSpec<unknown>): PlatformError | null {
  const key = spec.idempotencyKey;
  if (typeof key === 'string' && isUsableIdempotencyKey(key)) return null;
  return new PlatformError({
    code: 'input.invalid',
    operation: spec.operation,
    message:
      `${spec.operation}: Idempotency-Key is required on writes (1–${MAX_IDEMPOTENCY_KEY_LENGTH} ` +
      `printable ASCII characters)`,
  });
}

/** Counts, the last success and the last failure that speaks of the platform or the key. */
class CallBook {
  readonly stats: PlatformStats = {
    calls: { read: {}, write: {} },
    rateLimited: 0,
    deprecations: 0,
    retries: 0,
    downloads: { ok: 0, failed: 0 },
  };
  lastSuccessAt: number | null = null;
  lastFailure: PlatformCallFailure | null = null;
  private readonly deprecationWarned = new Set<string>();

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  count(bucket: Bucket, outcome: string): void {
    this.stats.calls[bucket][outcome] = (this.stats.calls[bucket][outcome] ?? 0) + 1;
  }

  /** Failures that say the platform or the key is not working (readiness), not one loan's 4xx. */
  noteFailure(e: PlatformError, spec: CallSpec<unknown>): void {
    if (e.code === 'aborted' || e.disposition === 'quarantine') return;
    if (e.disposition === 'retry-later' && e.code !== 'unknown') return;
    this.lastFailure = {
      at: this.clock.now(),
      code: e.code,
      detail: `${spec.method} ${spec.template}: ${e.code}${e.status ? ` (HTTP ${e.status})` : ''}`,
    };
  }

  noteDeprecation(res: Dispatcher.ResponseData, spec: CallSpec<unknown>): void {
    const dep = headerValue(res.headers, 'deprecation');
    if (dep === null || dep.trim().toLowerCase() === 'false') return;
    this.stats.deprecations += 1;
    const key = `${spec.method} ${spec.template}`;
    if (this.deprecationWarned.has(key)) return;
    this.deprecationWarned.add(key);
    this.logger.warn(
      {
        operation: spec.operation,
        path: spec.template,
        deprecation: dep,
        sunset: headerValue(res.headers, 'sunset'),
      },
      'platform marks this path deprecated (Deprecation header): migrate before its Sunset date',
    );
  }

  snapshot(): PlatformStats {
    const s = this.stats;
    return {
      calls: { read: { ...s.calls.read }, write: { ...s.calls.write } },
      rateLimited: s.rateLimited,
      deprecations: s.deprecations,
      retries: s.retries,
      downloads: { ...s.downloads },
    };
  }
}

interface AttemptDeps {
  clock: Clock;
  logger: Logger;
  pool: Pool;
  budget: RateBudget;
  book: CallBook;
  basePath: string;
  maxResponseBytes: number;
  authorization: string;
  userAgent: string;
}

/** One attempt of a call (attemptOnce below) and how its answer or failure is booked. */
function createAttempt(d: AttemptDeps): <T>(spec: CallSpec<T>, bucket: Bucket) => Promise<T> {
  const { clock, logger, pool, budget, book, basePath, maxResponseBytes, authorization, userAgent } = d;

  function requestOf(spec: CallSpec<unknown>, ctx: HttpContext): Dispatcher.RequestOptions {
    const qs = spec.query ? `?${new URLSearchParams(spec.query).toString()}` : '';
    const headers: Record<string, string> = {
      authorization,
      accept: 'application/json',
      'user-agent': userAgent,
    };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';
    if (spec.idempotencyKey !== undefined) headers['idempotency-key'] = spec.idempotencyKey;
    return {
      method: spec.method,
      path: `${ctx.path}${qs}`,
      headers,
      body: spec.body === undefined ? null : JSON.stringify(spec.body),
      signal: spec.signal ?? null,
    };
  }

  /** A thrown send (network, timeout, abort, traffic stop): booked, logged by template, rethrown classified. */
  function failedSend(
    spec: CallSpec<unknown>,
    ctx: HttpContext,
    bucket: Bucket,
    err: unknown,
  ): PlatformError {
    const e = classifyThrown(ctx, err, spec.signal);
    if (e.code !== 'aborted' && e.code !== 'rate_limit.traffic_stopped') book.count(bucket, e.code);
    book.noteFailure(e, spec);
    logger.debug(
      { operation: spec.operation, method: spec.method, path: spec.template, code: e.code },
      'platform call failed',
    );
    return e;
  }

  /**
   * A non-2xx answer: a 429 pauses the bucket and goes on the strike ledger; a refused key is logged for the
   * operator.
   */
  async function refused(
    spec: CallSpec<unknown>,
    ctx: HttpContext,
    token: Token,
    res: Dispatcher.ResponseData,
    body: unknown,
  ): Promise<PlatformError> {
    const err = classifyResponse(
      ctx,
      res.statusCode,
      body,
      { retryAfter: headerValue(res.headers, 'retry-after'), date: headerValue(res.headers, 'date') },
      clock.now(),
    );
    book.noteFailure(err, spec);
    if (res.statusCode === 429) {
      book.stats.rateLimited += 1;
      await budget.onRateLimited(token, {
        path: spec.template,
        retryAfterSeconds: err.retryAfterSeconds,
        headers: rateHeadersOf(res),
      });
    } else if (err.disposition === 'fatal') {
      logger.error(
        { operation: spec.operation, code: err.code, status: err.status },
        'platform refused the API key: operator action needed',
      );
    }
    return err;
  }

  /**
   * One attempt: slot, token from the budget, send, classify. A 429 is never sent again within the
   * call: it pauses the bucket, goes on the strike ledger, and the call fails with the retryable
   * `rate_limit.exceeded` (the pipeline puts the loan in retry_wait). The platform revokes a key
   * at 3 strikes in 24 h and a re-send into a server that still refuses is one more strike, so
   * only a later call, through the paused, halved, one-in-flight budget, may try again.
   *
   * The budget caps tokens in flight per bucket at perBucket (≤ 2 while strikes count), and the
   * pool holds perBucket connections per bucket: a request leaves the moment its token is taken.
   * The token stays in flight (budget.settle) until its answer is booked, a 429's pause and
   * strike included, so the next request of the bucket sees them and the in-flight cap first.
   */
  async function attemptOnce<T>(spec: CallSpec<T>, bucket: Bucket): Promise<T> {
    const ctx: HttpContext = {
      operation: spec.operation,
      method: spec.method,
      path: `${basePath}${spec.path}`,
    };
    let token: Token | undefined;
    try {
      let res: Dispatcher.ResponseData;
      let body: unknown;
      let started = clock.now();
      try {
        token = await budget.acquire(bucket, spec.signal);
        started = clock.now();
        res = await pool.request(requestOf(spec, ctx));
        noteHttpStatus(res.statusCode);
        // A 429 stops the bucket at its status line, before a slow body is read.
        if (res.statusCode === 429)
          budget.holdAtRateLimitStatus(token, {
            ...rateHeadersOf(res),
            retryAfter: headerValue(res.headers, 'retry-after'),
          });
        body = await readBody(res, ctx, maxResponseBytes);
      } catch (err) {
        throw failedSend(spec, ctx, bucket, err);
      }
      budget.observe(token, rateHeadersOf(res));
      book.count(bucket, String(res.statusCode));
      book.noteDeprecation(res, spec);
      logger.debug(
        {
          operation: spec.operation,
          method: spec.method,
          path: spec.template,
          status: res.statusCode,
          ms: clock.now() - started,
          bucket,
        },
        'platform call',
      );
      if (res.statusCode < 200 || res.statusCode >= 300) throw await refused(spec, ctx, token, res, body);
      book.lastSuccessAt = clock.now();
      return spec.parse(body);
    } finally {
      if (token !== undefined) budget.settle(token);
    }
  }

  return attemptOnce;
}

/**
 * The transport's dispatchers: the API's pool, and for presigned downloads (another origin, blob
 * storage) an agent that has never seen the API key and connects only to addresses the guard
 * checked in the socket's own lookup.
 */
function dispatchersOf(
  opts: TransportOptions,
  base: URL,
  perBucket: number,
): { pool: Pool; guard: DocumentHostGuard; downloadAgent: Agent } {
  const pool = new Pool(base.origin, {
    connections: perBucket * 2,
    connect: { timeout: opts.timeouts.connectMs },
    headersTimeout: opts.timeouts.headersMs,
    bodyTimeout: opts.timeouts.bodyMs,
  });
  const guard = documentHostGuard(
    { allow: opts.documentHosts?.allow ?? [], allowLoopback: opts.documentHosts?.allowLoopback ?? false },
    ...(opts.documentHosts?.resolve ? [opts.documentHosts.resolve] : []),
  );
  const downloadAgent = new Agent({
    connections: 4,
    connect: { timeout: opts.timeouts.connectMs, lookup: guard.lookup },
    headersTimeout: opts.timeouts.headersMs,
    bodyTimeout: opts.timeouts.bodyMs,
  });
  return { pool, guard, downloadAgent };
}

export function createTransport(opts: TransportOptions): Transport {
  const { clock } = opts;
  const logger = opts.logger.child({ component: 'platform' });
  const userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
  const base = new URL(opts.baseUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const maxResponseBytes = opts.maxResponseBytes ?? 16 * 1024 * 1024;
  const retryPolicy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...opts.retry, maxRetries: opts.maxRetries };
  const authorization = `Bearer ${opts.apiKey}`;
  const perBucket = opts.connections ?? 8;
  const { pool, guard, downloadAgent } = dispatchersOf(opts, base, perBucket);
  // A call counts in the window until its answer (settle): at most its three timeouts.
  const spend =
    opts.rateSpend ??
    new InProcessRateSpend(opts.rateState ?? createMemoryRateState(), {
      flightMs: callFlightMs(opts.timeouts),
    });
  const budget = new RateBudget({
    ...opts.rateLimit,
    clock,
    logger,
    spend,
    ...(opts.random ? { random: opts.random } : {}),
    ...(opts.pauseJitterMs ? { pauseJitterMs: opts.pauseJitterMs } : {}),
    maxInFlight: perBucket,
  });
  const book = new CallBook(clock, logger);
  const retryListeners = new Set<(w: PlatformWait) => void>();
  const attemptOnce = createAttempt({
    clock,
    logger,
    pool,
    budget,
    book,
    basePath,
    maxResponseBytes,
    authorization,
    userAgent,
  });

  function notifyRetry(w: PlatformWait): void {
    for (const l of retryListeners) {
      try {
        l(w);
      } catch {
        // A listener's failure is not the call's.
      }
    }
  }

  function callLinked<T>(spec: CallSpec<T>): Promise<T> {
    const bucket = bucketFor(spec.method);
    const refusedKey = bucket === 'write' ? missingIdempotencyKey(spec) : null;
    if (refusedKey !== null) return Promise.reject(refusedKey);
    return withRetry(
      () => attemptOnce(spec, bucket),
      {
        bucket,
        idempotent: spec.idempotencyKey !== undefined,
        operation: spec.operation,
        signal: spec.signal,
      },
      {
        policy: retryPolicy,
        clock,
        logger,
        ...(opts.random ? { random: opts.random } : {}),
        onRetry: (err, _n, delayMs) => {
          book.stats.retries += 1;
          if (retryListeners.size === 0) return;
          notifyRetry({
            kind: 'retry',
            bucket,
            operation: spec.operation,
            cause: err.status !== null ? `HTTP ${err.status}` : err.code,
            until: clock.now() + delayMs,
          });
        },
      },
    );
  }

  return {
    logger,
    userAgent,
    downloadAgent,
    guard,
    call<T>(spec: CallSpec<T>): Promise<T> {
      // A span per call (its retries and waits included), named by operation and path template:
      // never a path with ids, a query or a presigned URL.
      return inSpan(
        `platform ${spec.operation}`,
        {
          kind: 'client',
          attributes: {
            'platform.operation': spec.operation,
            'http.request.method': spec.method,
            'url.template': spec.template,
          },
        },
        async (span) => {
          try {
            // One listener per call on the caller's signal (a daemon passes one shutdown signal to every
            // call), however many waits inside the call listen: no max-listener warning, no growth.
            if (spec.signal === undefined) return await callLinked(spec);
            return await withLinkedSignal([spec.signal], (signal) => callLinked({ ...spec, signal }));
          } catch (err) {
            if (err instanceof PlatformError && err.status !== null)
              span.setAttribute('http.response.status_code', err.status);
            throw err;
          }
        },
      );
    },
    noteDownload(outcome) {
      book.stats.downloads[outcome] += 1;
    },
    health(): PlatformHealth {
      // stopped() first: while stopped it re-reads the ledger (an operator may have cleared it).
      const stopped = budget.stopped();
      return {
        lastSuccessAt: book.lastSuccessAt,
        lastFailure: book.lastFailure,
        strikes24h: budget.strikes24h(),
        trafficStopped: stopped,
        stopped,
        budgets: [budget.snapshot('read'), budget.snapshot('write')],
      };
    },
    stats: () => book.snapshot(),
    clearStrikes: (by) => budget.clearStrikes(by),
    onWait(listener) {
      const off = budget.onWait(listener);
      retryListeners.add(listener);
      return () => {
        off();
        retryListeners.delete(listener);
      };
    },
    async close(): Promise<void> {
      budget.close();
      await Promise.allSettled([pool.close(), downloadAgent.close()]);
      spend.close();
    },
  };
}
