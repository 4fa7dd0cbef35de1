import type { Writable } from 'node:stream';
import { Agent, Pool, type Dispatcher } from 'undici';
import { z } from 'zod';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { createMemoryRateState, type RateStateStore } from '../store/rate-state.js';
import type {
  Bucket,
  DownloadResult,
  PlatformApi,
  PlatformCallFailure,
  PlatformHealth,
  PlatformWait,
  QueuePage,
  QueueWalkOptions,
  ReadOptions,
  WriteOptions,
} from './api.js';
import { bucketFor, RateBudget, type RateLimitSettings, type Token } from './budget.js';
import { downloadPresigned } from './download.js';
import { documentHostGuard, type DocumentHostPolicy, type DocumentResolver } from './download-guard.js';
import { classifyResponse, classifyThrown, PlatformError, type HttpContext } from './errors.js';
import { walkBoardingQueue, type RawPage } from './queue.js';
import { DEFAULT_RETRY_POLICY, withRetry, type RetryPolicy } from './retry.js';
import {
  ackResponseSchema,
  businessSchema,
  dataOf,
  documentSchema,
  downloadAddressSchema,
  entitiesSchema,
  loanSchema,
  loanSummarySchema,
  paginationMetaSchema,
  productSchema,
  rawPageSchema,
  webhookEndpointSchema,
  webhookEndpointWithSecretSchema,
  type Business,
  type DownloadAddress,
  type Entities,
  type Loan,
  type LoanSummary,
  type PlatformDocument,
  type Product,
  type WebhookEndpoint,
  type WebhookEndpointWithSecret,
} from '../contract/schemas.js';

export const DEFAULT_USER_AGENT = 'boarding-connector/0.1';

export interface PlatformClientOptions {
  /** Refuse presigned download addresses that are not https (production). */
  httpsDownloadsOnly?: boolean;
  /**
   * Where presigned downloads may connect (download-guard.ts). Default: public addresses only,
   * no allow-list, loopback refused; `resolve` replaces DNS (tests).
   */
  documentHosts?: Partial<DocumentHostPolicy> & { resolve?: DocumentResolver };
  /** Service root ending in /api; paths /public/v1/... are appended. */
  baseUrl: string;
  apiKey: string;
  rateLimit: RateLimitSettings;
  timeouts: { connectMs: number; headersMs: number; bodyMs: number };
  maxRetries: number;
  pageSize: number;
  logger: Logger;
  clock: Clock;
  /** Persisted budget state; the client closes it on close(). Default: in memory. */
  rateState?: RateStateStore;
  userAgent?: string;
  /** Backoff of the retry policy (tests shorten it). maxRetries above wins over policy.maxRetries. */
  retry?: Partial<Omit<RetryPolicy, 'maxRetries'>>;
  /**
   * Most requests in flight per bucket (the pool holds twice as many connections). Default 8.
   * Fewer while the server says fewer remain, 1 before the first response and after a strike.
   */
  connections?: number;
  /** Pause jitter and randomness (tests pin them). */
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

export interface PlatformClient extends PlatformApi {
  createBusiness(loanId: string, body: Record<string, unknown>, opts: WriteOptions): Promise<Business>;
  stats(): PlatformStats;
  /** Operator action: forget the 429-strike ledger (after the platform confirmed the key is fine). */
  clearStrikes(by: string): number;
}

interface CallSpec<T> {
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

const MAX_IDEMPOTENCY_KEY = 255;

function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.map(String).join('.') || '(body)'}: ${i.message}`)
    .join('; ');
}

/** `{ data: … }` envelope parser that names the field when the answer does not match. */
function envelope<S extends z.ZodType>(schema: S, operation: string): (body: unknown) => z.infer<S> {
  const wrapped = dataOf(schema);
  return (body) => {
    const r = wrapped.safeParse(body);
    if (!r.success) {
      throw new PlatformError({ code: 'response.invalid', operation, message: `${operation}: response does not match the documented shape: ${describeIssues(r.error)}` });
    }
    return (r.data as { data: z.infer<S> }).data;
  };
}

function headerValue(h: Dispatcher.ResponseData['headers'], name: string): string | null {
  const v = h[name];
  if (Array.isArray(v)) return v[0] ?? null;
  return typeof v === 'string' ? v : null;
}

function encode(id: string, what: string): string {
  if (typeof id !== 'string' || id.length === 0) {
    throw new PlatformError({ code: 'input.invalid', message: `${what}: expected a non-empty id` });
  }
  return encodeURIComponent(id);
}

export function createPlatformClient(opts: PlatformClientOptions): PlatformClient {
  const clock = opts.clock;
  const logger = opts.logger.child({ component: 'platform' });
  const userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
  const base = new URL(opts.baseUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const maxResponseBytes = opts.maxResponseBytes ?? 16 * 1024 * 1024;
  const retryPolicy: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...opts.retry, maxRetries: opts.maxRetries };
  const authorization = `Bearer ${opts.apiKey}`;

  const perBucket = opts.connections ?? 8;
  const pool = new Pool(base.origin, {
    connections: perBucket * 2,
    connect: { timeout: opts.timeouts.connectMs },
    headersTimeout: opts.timeouts.headersMs,
    bodyTimeout: opts.timeouts.bodyMs,
  });
  // Presigned downloads go to another origin (blob storage) through a dispatcher that has never
  // seen the API key, and connect only to addresses the guard checked in the socket's own lookup.
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

  const rateState = opts.rateState ?? createMemoryRateState();
  const budget = new RateBudget({
    ...opts.rateLimit,
    clock,
    logger,
    state: rateState,
    ...(opts.random ? { random: opts.random } : {}),
    ...(opts.pauseJitterMs ? { pauseJitterMs: opts.pauseJitterMs } : {}),
    maxInFlight: perBucket,
  });

  const stats: PlatformStats = {
    calls: { read: {}, write: {} },
    rateLimited: 0,
    deprecations: 0,
    retries: 0,
    downloads: { ok: 0, failed: 0 },
  };
  const count = (bucket: Bucket, outcome: string): void => {
    stats.calls[bucket][outcome] = (stats.calls[bucket][outcome] ?? 0) + 1;
  };
  const retryListeners = new Set<(w: PlatformWait) => void>();
  const deprecationWarned = new Set<string>();
  let lastSuccessAt: number | null = null;
  let lastFailure: PlatformCallFailure | null = null;
  /** Failures that say the platform or the key is not working (readiness), not one loan's 4xx. */
  const noteFailure = (e: PlatformError, spec: CallSpec<unknown>): void => {
    if (e.code === 'aborted' || e.disposition === 'quarantine') return;
    if (e.disposition === 'retry-later' && e.code !== 'unknown') return;
    lastFailure = { at: clock.now(), code: e.code, detail: `${spec.method} ${spec.template}: ${e.code}${e.status ? ` (HTTP ${e.status})` : ''}` };
  };

  async function readBody(res: Dispatcher.ResponseData, ctx: HttpContext): Promise<unknown> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxResponseBytes) {
        res.body.destroy();
        throw new PlatformError({ ...ctx, code: 'response.invalid', status: res.statusCode, message: `${ctx.method} ${ctx.path}: response larger than ${maxResponseBytes} bytes` });
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

  function noteDeprecation(res: Dispatcher.ResponseData, spec: CallSpec<unknown>): void {
    const dep = headerValue(res.headers, 'deprecation');
    if (dep === null || dep.trim().toLowerCase() === 'false') return;
    stats.deprecations += 1;
    const key = `${spec.method} ${spec.template}`;
    if (deprecationWarned.has(key)) return;
    deprecationWarned.add(key);
    logger.warn(
      { operation: spec.operation, path: spec.template, deprecation: dep, sunset: headerValue(res.headers, 'sunset') },
      'platform marks this path deprecated (Deprecation header): migrate before its Sunset date',
    );
  }

  /**
   * One attempt: slot, token from the budget, send, classify. A 429 is never sent again within the
   * call: it pauses the bucket, goes on the strike ledger, and the call fails with the retryable
   * `rate_limit.exceeded` (the pipeline puts the loan in retry_wait). The platform revokes a key
   * at 3 strikes in 24 h and a re-send into a server that still refuses is one more strike, so
   * only a later call, through the paused, halved, one-in-flight budget, may try again.
   */
  async function attemptOnce<T>(spec: CallSpec<T>, bucket: Bucket): Promise<T> {
    const ctx: HttpContext = { operation: spec.operation, method: spec.method, path: `${basePath}${spec.path}` };
    const qs = spec.query ? `?${new URLSearchParams(spec.query).toString()}` : '';
    const headers: Record<string, string> = {
      authorization,
      accept: 'application/json',
      'user-agent': userAgent,
    };
    let payload: string | undefined;
    if (spec.body !== undefined) {
      payload = JSON.stringify(spec.body);
      headers['content-type'] = 'application/json';
    }
    if (spec.idempotencyKey !== undefined) headers['idempotency-key'] = spec.idempotencyKey;
    // The budget caps tokens in flight per bucket at perBucket (≤ 2 while strikes count), and the
    // pool holds perBucket connections per bucket: a request leaves the moment its token is taken.
    // The token stays in flight (budget.settle) until its answer is booked, a 429's pause and
    // strike included, so the next request of the bucket sees them and the in-flight cap first.
    let token: Token | undefined;
    try {
      let res: Dispatcher.ResponseData;
      let body: unknown;
      let started = clock.now();
      try {
        token = await budget.acquire(bucket, spec.signal);
        started = clock.now();
        res = await pool.request({
          method: spec.method,
          path: `${ctx.path}${qs}`,
          headers,
          body: payload ?? null,
          signal: spec.signal ?? null,
        });
        body = await readBody(res, ctx);
      } catch (err) {
        const e = classifyThrown(ctx, err, spec.signal);
        if (e.code !== 'aborted' && e.code !== 'rate_limit.traffic_stopped') count(bucket, e.code);
        noteFailure(e, spec);
        logger.debug({ operation: spec.operation, method: spec.method, path: spec.template, code: e.code }, 'platform call failed');
        throw e;
      }
      const rateHeaders = {
        limit: headerValue(res.headers, 'x-ratelimit-limit'),
        remaining: headerValue(res.headers, 'x-ratelimit-remaining'),
        reset: headerValue(res.headers, 'x-ratelimit-reset'),
      };
      budget.observe(token, rateHeaders);
      count(bucket, String(res.statusCode));
      noteDeprecation(res, spec);
      logger.debug(
        { operation: spec.operation, method: spec.method, path: spec.template, status: res.statusCode, ms: clock.now() - started, bucket },
        'platform call',
      );
      if (res.statusCode >= 200 && res.statusCode < 300) {
        lastSuccessAt = clock.now();
        return spec.parse(body);
      }
      const err = classifyResponse(ctx, res.statusCode, body, { retryAfter: headerValue(res.headers, 'retry-after') }, clock.now());
      noteFailure(err, spec);
      if (res.statusCode === 429) {
        stats.rateLimited += 1;
        budget.onRateLimited(token, { path: spec.template, retryAfterSeconds: err.retryAfterSeconds, headers: rateHeaders });
        throw err;
      }
      if (err.fatal) logger.error({ operation: spec.operation, code: err.code, status: err.status }, 'platform refused the API key: operator action needed');
      throw err;
    } finally {
      if (token !== undefined) budget.settle(token);
    }
  }

  /**
   * One listener per call on the caller's signal (a daemon passes one shutdown signal to every
   * call), however many waits inside the call listen: this keeps Node's max-listener warning away
   * without AbortSignal.any, which leaks on a long-lived source signal under Node 20.
   */
  function linkSignal(outer: AbortSignal | undefined): { signal: AbortSignal | undefined; done: () => void } {
    if (outer === undefined) return { signal: undefined, done: () => undefined };
    const inner = new AbortController();
    if (outer.aborted) {
      inner.abort(outer.reason);
      return { signal: inner.signal, done: () => undefined };
    }
    const onAbort = (): void => inner.abort(outer.reason);
    outer.addEventListener('abort', onAbort, { once: true });
    return { signal: inner.signal, done: () => outer.removeEventListener('abort', onAbort) };
  }

  async function call<T>(outerSpec: CallSpec<T>): Promise<T> {
    const link = linkSignal(outerSpec.signal);
    try {
      return await callLinked({ ...outerSpec, signal: link.signal });
    } finally {
      link.done();
    }
  }

  function callLinked<T>(spec: CallSpec<T>): Promise<T> {
    const bucket = bucketFor(spec.method);
    if (bucket === 'write') {
      const key = spec.idempotencyKey;
      if (typeof key !== 'string' || key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY) {
        return Promise.reject(
          new PlatformError({ code: 'input.invalid', operation: spec.operation, message: `${spec.operation}: Idempotency-Key is required on writes (1–${MAX_IDEMPOTENCY_KEY} characters)` }),
        );
      }
    }
    return withRetry(() => attemptOnce(spec, bucket), { bucket, idempotent: spec.idempotencyKey !== undefined, operation: spec.operation, signal: spec.signal }, {
      policy: retryPolicy,
      clock,
      logger,
      ...(opts.random ? { random: opts.random } : {}),
      onRetry: (err, _n, delayMs) => {
        stats.retries += 1;
        if (retryListeners.size === 0) return;
        const w: PlatformWait = { kind: 'retry', bucket, operation: spec.operation, cause: err.status !== null ? `HTTP ${err.status}` : err.code, until: clock.now() + delayMs };
        for (const l of retryListeners) {
          try {
            l(w);
          } catch {
            // A listener's failure is not the call's.
          }
        }
      },
    });
  }

  const get = <T>(operation: string, template: string, path: string, parse: (b: unknown) => T, o?: ReadOptions, query?: Record<string, string>): Promise<T> =>
    call({ operation, method: 'GET', template, path, parse, signal: o?.signal, ...(query ? { query } : {}) });

  const write = <T>(
    operation: string,
    method: 'POST' | 'PATCH' | 'DELETE',
    template: string,
    path: string,
    body: unknown,
    o: WriteOptions,
    parse: (b: unknown) => T,
  ): Promise<T> => call({ operation, method, template, path, body, parse, idempotencyKey: o.idempotencyKey, signal: o.signal });

  /**
   * A list whose shape the spec does not show (documents, products): `data` is an array, and a
   * `meta` pagination block, when present, is followed to the end so no document is missed.
   * Items are validated strictly: a malformed document must fail its loan, not vanish.
   */
  async function listAll<S extends z.ZodType>(operation: string, template: string, path: string, item: S, o?: ReadOptions): Promise<z.infer<S>[]> {
    const schema = z.looseObject({ data: z.array(item), meta: paginationMetaSchema.optional() });
    const parse = (body: unknown): z.infer<typeof schema> => {
      const r = schema.safeParse(body);
      if (!r.success) {
        throw new PlatformError({ code: 'response.invalid', operation, message: `${operation}: response does not match the documented shape: ${describeIssues(r.error)}` });
      }
      return r.data;
    };
    const out: z.infer<S>[] = [];
    let query: Record<string, string> = { limit: '100' };
    for (let pages = 0; pages < 10_000; pages++) {
      const page = await get(operation, template, path, parse, o, query);
      out.push(...(page.data as z.infer<S>[]));
      const meta = page.meta;
      if (meta === undefined || !meta.hasMore) return out;
      if (meta.mode === 'cursor') {
        if (meta.nextCursor === null || meta.nextCursor === query['cursor']) {
          throw new PlatformError({ code: 'response.invalid', operation, message: `${operation}: meta.hasMore is true without a new meta.nextCursor` });
        }
        query = { limit: '100', cursor: meta.nextCursor };
      } else {
        if (page.data.length === 0) throw new PlatformError({ code: 'response.invalid', operation, message: `${operation}: meta.hasMore is true on an empty page` });
        query = { limit: '100', offset: String(meta.offset + page.data.length) };
      }
    }
    throw new PlatformError({ code: 'response.invalid', operation, message: `${operation}: more than 10000 pages` });
  }

  const pageParser = (body: unknown): RawPage => {
    const r = rawPageSchema.safeParse(body);
    if (!r.success) {
      throw new PlatformError({ code: 'response.invalid', operation: 'boardingQueue', message: `boardingQueue: page does not match the documented shape: ${describeIssues(r.error)}` });
    }
    return { data: r.data.data, meta: r.data.meta };
  };

  const client: PlatformClient = {
    boardingQueue(walk?: QueueWalkOptions): AsyncGenerator<QueuePage, void, undefined> {
      return walkBoardingQueue(
        {
          pageSize: opts.pageSize,
          logger,
          fetchPage: (query, signal) =>
            get('boardingQueue', '/public/v1/loans/boarding-queue', '/public/v1/loans/boarding-queue', pageParser, signal ? { signal } : undefined, query),
        },
        walk,
      );
    },
    getLoan: (id, o): Promise<Loan> => get('getLoan', '/public/v1/loans/{id}', `/public/v1/loans/${encode(id, 'getLoan')}`, envelope(loanSchema, 'getLoan'), o),
    getLoanSummary: (id, o): Promise<LoanSummary> =>
      get('getLoanSummary', '/public/v1/loans/{id}/summary', `/public/v1/loans/${encode(id, 'getLoanSummary')}/summary`, envelope(loanSummarySchema, 'getLoanSummary'), o),
    getEntities: (loanId, o): Promise<Entities> =>
      get('getEntities', '/public/v1/loans/{id}/entities', `/public/v1/loans/${encode(loanId, 'getEntities')}/entities`, envelope(entitiesSchema, 'getEntities'), o),
    listDocuments: (loanId, o): Promise<PlatformDocument[]> =>
      listAll('listDocuments', '/public/v1/loans/{id}/documents', `/public/v1/loans/${encode(loanId, 'listDocuments')}/documents`, documentSchema, o),
    getDownloadAddress: (documentId, o): Promise<DownloadAddress> =>
      get(
        'getDownloadAddress',
        '/public/v1/documents/{id}/download',
        `/public/v1/documents/${encode(documentId, 'getDownloadAddress')}/download`,
        envelope(downloadAddressSchema, 'getDownloadAddress'),
        o,
      ),
    download: (url: string, sink: Writable, o: { maxBytes: number; signal?: AbortSignal; deadlineMs?: number }): Promise<DownloadResult> =>
      downloadPresigned(
        {
          dispatcher: downloadAgent,
          guard,
          logger,
          userAgent,
          httpsOnly: opts.httpsDownloadsOnly === true,
          onOutcome: (outcome) => {
            stats.downloads[outcome] += 1;
          },
        },
        url,
        sink,
        o,
      ),
    acknowledgeBoarding: (loanId, body, o): Promise<unknown> =>
      write('acknowledgeBoarding', 'POST', '/public/v1/loans/{id}/boarding', `/public/v1/loans/${encode(loanId, 'acknowledgeBoarding')}/boarding`, body, o, (b) => {
        const r = ackResponseSchema.parse(b);
        return r !== null && typeof r === 'object' && 'data' in r ? r.data : r;
      }),
    listProducts: (o): Promise<Product[]> => listAll('listProducts', '/public/v1/products', '/public/v1/products', productSchema, o),
    getProduct: (id, o): Promise<Product> =>
      get('getProduct', '/public/v1/products/{id}', `/public/v1/products/${encode(id, 'getProduct')}`, envelope(productSchema, 'getProduct'), o),
    createBusiness: (loanId, body, o): Promise<Business> =>
      write('createBusiness', 'POST', '/public/v1/loans/{id}/businesses', `/public/v1/loans/${encode(loanId, 'createBusiness')}/businesses`, body, o, envelope(businessSchema, 'createBusiness')),
    listWebhookEndpoints: (o): Promise<WebhookEndpoint[]> =>
      get('listWebhookEndpoints', '/public/v1/webhook-endpoints', '/public/v1/webhook-endpoints', envelope(z.array(webhookEndpointSchema), 'listWebhookEndpoints'), o),
    createWebhookEndpoint: (body, o): Promise<WebhookEndpointWithSecret> =>
      write('createWebhookEndpoint', 'POST', '/public/v1/webhook-endpoints', '/public/v1/webhook-endpoints', body, o, envelope(webhookEndpointWithSecretSchema, 'createWebhookEndpoint')),
    updateWebhookEndpoint: (id, patch, o): Promise<WebhookEndpoint> =>
      write(
        'updateWebhookEndpoint',
        'PATCH',
        '/public/v1/webhook-endpoints/{id}',
        `/public/v1/webhook-endpoints/${encode(id, 'updateWebhookEndpoint')}`,
        patch,
        o,
        envelope(webhookEndpointSchema, 'updateWebhookEndpoint'),
      ),
    health(): PlatformHealth {
      // stopped() first: while stopped it re-reads the ledger (an operator may have cleared it).
      const stopped = budget.stopped();
      return {
        lastSuccessAt,
        lastFailure,
        strikes24h: budget.strikes24h(),
        trafficStopped: stopped,
        stopped,
        budgets: [budget.snapshot('read'), budget.snapshot('write')],
      };
    },
    stats(): PlatformStats {
      return {
        calls: { read: { ...stats.calls.read }, write: { ...stats.calls.write } },
        rateLimited: stats.rateLimited,
        deprecations: stats.deprecations,
        retries: stats.retries,
        downloads: { ...stats.downloads },
      };
    },
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
      rateState.close?.();
    },
  };
  return client;
}

