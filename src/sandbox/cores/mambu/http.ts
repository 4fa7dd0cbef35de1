import type { NextFunction, Request, Response } from 'express';
import { takeFault } from '../faults.js';
import { z } from 'zod';
import {
  MAMBU_OPERATIONS,
  contractProblem,
  type MambuOperation,
  type MambuOperationName,
} from './contract.js';
import { MambuFail, fail } from './rules.js';
import type { MambuFault, SimState } from './state.js';

export const MEDIA = 'application/vnd.mambu.v2+json';
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
/** Mambu keeps an Idempotency-Key's answer six hours (API v2 "Idempotency"). */
const SIX_HOURS = 6 * 60 * 60 * 1000;

export function record(
  st: SimState,
  req: Request,
  status: number,
  fromCache: boolean,
  reason: string | null,
  operation: string | null,
): void {
  st.requests.push({
    method: req.method,
    path: req.path,
    status,
    idempotencyKey: req.header('idempotency-key') ?? null,
    fromCache,
    reason,
    operation,
  });
}

/** Mambu's error envelope: `{"errors":[{errorCode, errorReason, errorSource}]}`. */
export function sendError(
  st: SimState,
  req: Request,
  res: Response,
  e: MambuFail,
  operation: string | null,
): void {
  record(st, req, e.status, false, e.reason, operation);
  res.status(e.status).json({
    errors: [
      { errorCode: e.errorCode, errorReason: e.reason, ...(e.source ? { errorSource: e.source } : {}) },
    ],
  });
}

function userOf(st: SimState, req: Request): string | null {
  const key = req.header('apikey');
  if (key !== undefined) return st.tenant.apiKeys.includes(key) ? `apikey:${key.slice(0, 4)}` : null;
  const m = /^Basic (.+)$/.exec(req.header('authorization') ?? '');
  if (!m) return null;
  const [u, ...rest] = Buffer.from(m[1] as string, 'base64')
    .toString('utf8')
    .split(':');
  const p = rest.join(':');
  return st.tenant.users.some((x) => x.username === u && x.password === p) ? (u as string) : null;
}

/** The API v2 media type on every call (Accept), then credentials: an apiKey header or HTTP Basic. */
export function authenticate(st: SimState) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.header('accept') !== MEDIA) {
      sendError(st, req, res, fail('INVALID_API_VERSION', `Accept: ${MEDIA} is required`, 400, 1), null);
      return;
    }
    const user = userOf(st, req);
    if (user === null) {
      sendError(st, req, res, fail('INVALID_CREDENTIALS', undefined, 401, 2), null);
      return;
    }
    res.locals['user'] = user;
    next();
  };
}

/** Paging (API v2 "Pagination"): offset, limit ≤ 1000 (default 50), paginationDetails=ON → item headers. */
export function paged(req: Request, res: Response, items: unknown[]): unknown[] {
  const offset = req.query['offset'] === undefined ? 0 : Number(req.query['offset']);
  const limit = req.query['limit'] === undefined ? 50 : Number(req.query['limit']);
  if (!Number.isInteger(offset) || offset < 0) throw fail('INVALID_PAGINATION_OFFSET_VALUE', 'offset');
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw fail('INVALID_PAGINATION_LIMIT_VALUE', 'limit');
  if (req.query['paginationDetails'] === 'ON') {
    res.setHeader('items-offset', String(offset));
    res.setHeader('items-limit', String(limit));
    res.setHeader('items-total', String(items.length));
  }
  return items.slice(offset, offset + limit);
}

const detailsLevel = z.enum(['BASIC', 'FULL']).optional();

export type Handler = (
  req: Request,
  res: Response,
) => Promise<{ status?: number; body: unknown }> | { status?: number; body: unknown };

/** Faults before anything runs: an answer, or a read that finds nothing. True when answered. */
function answeredByFault(
  st: SimState,
  req: Request,
  res: Response,
  fault: MambuFault | undefined,
  name: string,
): boolean {
  if (fault?.kind === 'status-before') {
    const status = fault.status ?? 503;
    record(st, req, status, false, 'fault', name);
    res.status(status).json({ errors: [{ errorCode: 0, errorReason: 'SERVICE_UNAVAILABLE' }] });
    return true;
  }
  if (fault?.kind === 'miss') {
    if (req.method === 'GET') {
      sendError(st, req, res, fail('INVALID_ID', undefined, 404, 301), name);
      return true;
    }
    record(st, req, 200, false, 'fault', name);
    res.status(200).json([]);
    return true;
  }
  return false;
}

/**
 * The Idempotency-Key of a write (API v2 "Idempotency"): a v4 UUID; a repeat within six hours gets
 * the first answer; a key still in flight answers 409 (or an interim 102, then the exchange ends).
 * Returns the key to hold, or null when the call was answered here.
 */
function takeKey(st: SimState, req: Request, res: Response, name: string): string | undefined | null {
  const key = req.header('idempotency-key');
  if (key === undefined) return undefined;
  if (!UUID_V4.test(key)) {
    sendError(st, req, res, fail('INVALID_IDEMPOTENCY_KEY', 'Idempotency-Key must be a v4 UUID'), name);
    return null;
  }
  if (st.inFlight.has(key)) {
    if (st.inFlightAnswer === 102) {
      record(st, req, 102, false, 'in flight', name);
      res.writeProcessing();
      res.socket?.destroy();
      return null;
    }
    const busy = fail(
      'IDEMPOTENCY_KEY_IN_USE',
      'a request with this Idempotency-Key is being processed',
      409,
      10,
    );
    sendError(st, req, res, busy, name);
    return null;
  }
  const hit = st.cache.get(key);
  if (hit !== undefined && st.now() - hit.at < SIX_HOURS) {
    record(st, req, hit.status, true, null, name);
    res.status(hit.status).json(hit.body);
    return null;
  }
  if (hit !== undefined) st.cache.delete(key);
  st.inFlight.add(key);
  return key;
}

/** The request against the operation's published schema: 400 INVALID_PARAMETERS naming the property. */
function checkRequest(op: MambuOperation, req: Request): void {
  const level = detailsLevel.safeParse(req.query['detailsLevel']);
  if (!level.success) throw fail('INVALID_PARAMETERS', `detailsLevel: ${contractProblem(level.error)}`);
  if (op.request === undefined) return;
  const parsed = op.request.safeParse(req.body);
  if (!parsed.success) throw fail('INVALID_PARAMETERS', contractProblem(parsed.error));
}

/** The answer against the published response schema; a simulator that breaks it answers 500 and says so. */
function answerBreaksContract(st: SimState, op: MambuOperation, name: string, body: unknown): string | null {
  const schema = op.list ? z.array(op.response) : op.response;
  const parsed = schema.safeParse(body);
  if (parsed.success) return null;
  const problem = contractProblem(parsed.error);
  st.violations.push({ operation: name, problem });
  return problem;
}

/**
 * One contract operation: faults, the Idempotency-Key (writes), the request's and the answer's
 * published schemas, the error envelope, recording. Failures are not cached (a repeat runs again).
 */
export function route(st: SimState, name: MambuOperationName, handler: Handler) {
  const op: MambuOperation = MAMBU_OPERATIONS[name];
  return async (req: Request, res: Response): Promise<void> => {
    const fault = takeFault(st.faults, req);
    if (answeredByFault(st, req, res, fault, name)) return;
    const key = op.write === true ? takeKey(st, req, res, name) : undefined;
    if (key === null) return;
    try {
      if (fault?.kind === 'delay') await new Promise((r) => setTimeout(r, fault.delayMs ?? 500));
      let out: { status?: number; body: unknown };
      try {
        checkRequest(op, req);
        out = await handler(req, res);
      } catch (err) {
        if (err instanceof MambuFail) return sendError(st, req, res, err, name);
        throw err;
      }
      const broken = answerBreaksContract(st, op, name, out.body);
      if (broken !== null) {
        record(st, req, 500, false, `contract: ${broken}`, name);
        res.status(500).json({
          errors: [{ errorCode: 0, errorReason: 'SIMULATOR_CONTRACT_VIOLATION', errorSource: broken }],
        });
        return;
      }
      const status = out.status ?? 200;
      if (key !== undefined) st.cache.set(key, { status, body: out.body, at: st.now() });
      if (fault?.kind === 'status-after-commit') {
        record(st, req, fault.status ?? 500, false, 'fault', name);
        res.status(fault.status ?? 500).json({ errors: [{ errorCode: 0, errorReason: 'INTERNAL_ERROR' }] });
        return;
      }
      if (fault?.kind === 'reset-after-commit') {
        record(st, req, 0, false, 'fault', name);
        res.socket?.destroy();
        return;
      }
      record(st, req, status, false, null, name);
      res.status(status).json(out.body);
    } finally {
      if (key !== undefined) st.inFlight.delete(key);
    }
  };
}
