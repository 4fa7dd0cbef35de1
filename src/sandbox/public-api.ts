import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Logger } from '../lib/logger.js';
import { ApiError, apiError, invalidInput } from './api-error.js';
import { authenticate, COUNTRY_HEADER, requirePermission } from './auth.js';
import type { BlobServer } from './blob-server.js';
import { bump } from './counters.js';
import type { FaultInjector } from './faults.js';
import type { ApiKeyRecord } from './keys.js';
import type { LimitBucket, RateLimiter } from './rate-limit.js';
import { keyDigest, type RequestLogEntry } from './request-log.js';
import { matchPattern, type HandlerOptions, type RouteDef, type RouteResult } from './route-table.js';
import { documentRoutes } from './routes-documents.js';
import { loanRoutes } from './routes-loans.js';
import { productRoutes } from './routes-products.js';
import { webhookRoutes } from './routes-webhooks.js';
import type { SandboxState } from './state.js';

export const ROUTES: RouteDef[] = [...loanRoutes, ...documentRoutes, ...productRoutes, ...webhookRoutes];
export const LEGACY_SUNSET = 'Mon, 01 Mar 2027 00:00:00 GMT';
const MAX_IDEMPOTENCY_KEY = 255;

export interface PublicApiDeps {
  state: SandboxState;
  limiter: RateLimiter;
  faults: FaultInjector;
  blobs: BlobServer;
  options: HandlerOptions;
  logger: Logger;
}

interface Address {
  org: string | null;
  legacy: boolean;
  rest: string;
}

/** `/orgs/:org` (optional) then `/public/v1/...` or the legacy `/public/...`. */
function parseAddress(path: string): Address | null {
  let org: string | null = null;
  let p = path;
  const orgMatch = /^\/orgs\/([^/]+)(\/.*)$/.exec(p);
  if (orgMatch?.[1] && orgMatch[2]) {
    org = decodeURIComponent(orgMatch[1]);
    p = orgMatch[2];
  }
  if (p.startsWith('/public/v1/')) return { org, legacy: false, rest: p.slice('/public/v1'.length) };
  if (p.startsWith('/public/')) return { org, legacy: true, rest: p.slice('/public'.length) };
  return null;
}

function findRoute(method: string, rest: string): { route: RouteDef; params: Record<string, string> } | null {
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const params = matchPattern(route.pattern, rest);
    if (params) return { route, params };
  }
  return null;
}

function firstValues(originalUrl: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of new URL(originalUrl, 'http://sandbox.invalid').searchParams)
    if (!(k in out)) out[k] = v;
  return out;
}

const DAY_MS = 86_400_000;

function recordStrike(state: SandboxState, limiter: RateLimiter, key: ApiKeyRecord): void {
  const now = state.nowMs();
  key.strikes = [...key.strikes.filter((t) => now - t < DAY_MS), now];
  const limit = limiter.settings.revokeAfterStrikes;
  if (limit !== null && key.strikes.length >= limit && key.revokedAt === null) {
    key.revokedAt = state.nowIso();
    state.counters.revokedKeys += 1;
  }
}

function send(res: Response, result: RouteResult, headers: Record<string, string>): void {
  if (res.headersSent || res.destroyed) return;
  res.set({ ...headers, ...(result.headers ?? {}) });
  res.status(result.status).json(result.body);
}

/** A slow body: status and headers at once, the JSON in four pieces spread over `ms`. */
function sendSlow(res: Response, result: RouteResult, headers: Record<string, string>, ms: number): void {
  if (res.headersSent || res.destroyed) return;
  const body = Buffer.from(JSON.stringify(result.body), 'utf8');
  res.set({
    ...headers,
    ...(result.headers ?? {}),
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(body.length),
  });
  res.status(result.status);
  res.flushHeaders();
  const pieces = 4;
  const size = Math.ceil(body.length / pieces);
  let i = 0;
  const next = (): void => {
    if (res.destroyed) return;
    const chunk = body.subarray(i * size, (i + 1) * size);
    i += 1;
    if (i >= pieces) {
      res.end(chunk);
      return;
    }
    res.write(chunk);
    setTimeout(next, ms / (pieces - 1));
  };
  next();
}

function errorResult(err: unknown, logger: Logger): RouteResult {
  if (err instanceof ApiError) return { status: err.status, body: err.body, headers: err.headers };
  logger.error({ err }, 'sandbox handler failed');
  return { status: 500, body: { code: 'internal', message: 'internal error' } };
}

/** Everything under /api: address, route, auth, rate limit, faults, idempotency, handler. */
export function createPublicApiHandler(deps: PublicApiDeps) {
  const { state, limiter, faults, logger } = deps;
  const inFlight = new Set<string>();
  return async (req: Request, res: Response): Promise<void> => {
    const headers: Record<string, string> = {};
    const address = parseAddress(req.path);
    const found = address ? findRoute(req.method, address.rest) : null;
    if (!address || !found) {
      send(
        res,
        { status: 404, body: { code: 'route.not_found', message: `no operation ${req.method} ${req.path}` } },
        headers,
      );
      return;
    }
    const { route, params } = found;
    const routeKey = `${route.method} ${address.legacy ? '/public' : '/public/v1'}${route.pattern}`;
    const started = Date.now();
    // Route pattern only: ids, cursors and query strings stay out of the log.
    res.on('close', () =>
      logger.debug(
        { route: routeKey, status: res.headersSent ? res.statusCode : 'dropped', ms: Date.now() - started },
        'sandbox request',
      ),
    );
    if (address.legacy) {
      headers['Deprecation'] = 'true';
      headers['Sunset'] = LEGACY_SUNSET;
      headers['Link'] = `</api/public/v1${address.rest}>; rel="successor-version"`;
    }
    bump(state.counters.requests, routeKey);
    try {
      const country = req.get(COUNTRY_HEADER) ?? 'US';
      const key = authenticate(state, req.get('authorization'), address.org, country);
      const bucket: LimitBucket = address.legacy ? 'legacy' : route.method === 'GET' ? 'read' : 'write';
      state.counters.byBucket[bucket] += 1;
      const logged: RequestLogEntry = {
        at: state.nowMs(),
        key: keyDigest(key.key),
        bucket,
        route: routeKey,
        status: 0,
      };
      state.requestLog.add(logged);
      res.on('close', () => {
        logged.status = res.headersSent ? res.statusCode : 0;
      });
      const decision = limiter.take(key.key, bucket);
      headers['X-RateLimit-Limit'] = String(decision.limit);
      headers['X-RateLimit-Remaining'] = String(decision.remaining);
      headers['X-RateLimit-Reset'] = String(Math.ceil(decision.resetMs / 1000));
      if (!decision.allowed) {
        state.counters.rateLimited += 1;
        state.counters.rateLimitedByBucket[bucket] += 1;
        recordStrike(state, limiter, key);
        throw apiError(
          429,
          'rate_limit.exceeded',
          `too many ${bucket} requests; retry after ${decision.retryAfterSeconds} s`,
          { retryAfter: decision.retryAfterSeconds },
        ).withHeaders({
          'Retry-After': String(decision.retryAfterSeconds),
        });
      }
      requirePermission(key, route.permission);

      const isWrite = route.method !== 'GET';
      const idempotencyKey = isWrite ? (req.get('idempotency-key') ?? null) : null;
      if (
        idempotencyKey !== null &&
        (idempotencyKey.length === 0 || idempotencyKey.length > MAX_IDEMPOTENCY_KEY)
      ) {
        throw invalidInput(
          `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY} characters (got ${idempotencyKey.length})`,
          { field: 'Idempotency-Key' },
        );
      }
      const raw = Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
      let body: unknown = undefined;
      if (raw.trim() !== '') {
        try {
          body = JSON.parse(raw);
        } catch {
          throw invalidInput('request body is not valid JSON');
        }
      }

      const scopeKey = idempotencyKey !== null ? `${key.orgId}\n${idempotencyKey}` : null;
      const fingerprint = createHash('sha256')
        .update(`${route.method} ${address.rest}\n${raw}`)
        .digest('hex');
      // A retry that arrives while the first request with its key is still running (e.g. under
      // injected latency) must not run the operation a second time.
      if (scopeKey !== null && inFlight.has(scopeKey)) {
        throw apiError(
          409,
          'idempotency.in_progress',
          'a request with this Idempotency-Key is still being processed; retry later',
        );
      }
      if (scopeKey !== null) inFlight.add(scopeKey);
      try {
        const fault = faults.decide(routeKey);
        if (fault.latencyMs > 0) {
          state.counters.faults.delayed += 1;
          await new Promise((r) => setTimeout(r, fault.latencyMs));
        }
        if (fault.action === 'reset') {
          state.counters.faults.resets += 1;
          req.socket.destroy();
          return;
        }
        if (fault.action === '429') {
          // The platform throttling on its own: a strike on the key like any 429, counted apart
          // from the limiter's (which mean the client overran its budget).
          state.counters.faults.injected429 += 1;
          recordStrike(state, limiter, key);
          const body = {
            code: 'rate_limit.exceeded',
            message: `too many requests; retry after ${fault.retryAfterSeconds} s`,
            retryAfter: fault.retryAfterSeconds,
          };
          send(
            res,
            { status: 429, body },
            { ...headers, 'X-RateLimit-Remaining': '0', 'Retry-After': String(fault.retryAfterSeconds) },
          );
          return;
        }
        if (fault.action === '5xx') {
          state.counters.faults.injected5xx += 1;
          send(
            res,
            {
              status: 503,
              body: { code: 'service.unavailable', message: 'injected fault: service unavailable' },
            },
            headers,
          );
          return;
        }

        let result: RouteResult;
        const stored = scopeKey !== null ? state.idempotency.get(scopeKey) : undefined;
        if (stored) {
          if (stored.fingerprint !== fingerprint) {
            throw apiError(
              422,
              'idempotency.key_reused',
              'this Idempotency-Key was already used for a different request',
            );
          }
          state.counters.idempotentReplays += 1;
          result = { status: stored.status, body: stored.body, headers: { 'Idempotent-Replayed': 'true' } };
        } else {
          try {
            result = await route.handler({
              req,
              params,
              query: firstValues(req.originalUrl),
              body,
              key,
              legacy: address.legacy,
              state,
              blobs: deps.blobs,
              options: deps.options,
              idempotencyKey,
            });
          } catch (err) {
            result = errorResult(err, logger);
          }
          // Only successes are stored: a refused request may be retried with the same key.
          if (scopeKey !== null && result.status < 300)
            state.idempotency.set(scopeKey, { fingerprint, status: result.status, body: result.body });
        }
        if (fault.action === 'resetAfterCommit') {
          state.counters.faults.resetsAfterCommit += 1;
          req.socket.destroy();
          return;
        }
        if (fault.slowBodyMs > 0) {
          state.counters.faults.slowBodies += 1;
          sendSlow(res, result, headers, fault.slowBodyMs);
        } else send(res, result, headers);
      } finally {
        if (scopeKey !== null) inFlight.delete(scopeKey);
      }
    } catch (err) {
      send(res, errorResult(err, logger), headers);
    }
  };
}
