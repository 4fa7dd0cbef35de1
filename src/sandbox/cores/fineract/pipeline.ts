import type { Request, Response } from 'express';
import { takeFault } from '../faults.js';
import {
  FINERACT_OPERATIONS,
  requestErrors,
  responseProblems,
  type FineractOperationName,
} from './contract.js';
import { HttpFail, envelope, parameterError, serverFail, validationFail } from './errors.js';
import type { Fault, FaultKind, SimState } from './model.js';

export type Handler = (
  req: Request,
) => Promise<{ status?: number; body: unknown }> | { status?: number; body: unknown };

export function record(
  s: SimState,
  req: Request,
  op: FineractOperationName | null,
  status: number,
  fromCache: boolean,
  fault: FaultKind | null,
): void {
  s.requests.push({
    method: req.method,
    path: req.path,
    operation: op,
    status,
    idempotencyKey: req.header('idempotency-key') ?? null,
    traceparent: req.header('traceparent') ?? null,
    fromCache,
    fault,
  });
}

export function sendRaw(s: SimState, req: Request, res: Response, status: number, body: unknown): void {
  record(s, req, null, status, false, null);
  res.status(status).json(body);
}

/**
 * Holds a request body to the operation's published contract (contract.ts) before any rule of
 * Fineract's own runs: a violation is Fineract's 400 validation envelope, and is kept so a test can
 * assert the adapter sent none.
 */
export function checkContract(s: SimState, op: FineractOperationName, body: unknown): void {
  const errors = requestErrors(op, body);
  if (errors.length === 0) return;
  s.contractRefusals.push({ operation: op, errors });
  throw validationFail(FINERACT_OPERATIONS[op].resource, errors);
}

function notAuthorized(action: string): unknown {
  return envelope(
    403,
    'error.msg.not.authorized',
    'Insufficient privileges to perform this action.',
    [parameterError('error.msg.not.authorized', `User has no authority to: ${action}`, 'id')],
    'The user associated with credentials passed on this request does not have sufficient privileges to ' +
      'perform this action.',
  );
}

async function execute(s: SimState, req: Request, handler: Handler, fault: Fault | undefined) {
  try {
    if (fault?.kind === 'delay') await new Promise((r) => setTimeout(r, fault.delayMs ?? 200));
    if (fault?.kind === 'fail-in-command')
      throw serverFail(fault.status ?? 500, 'Internal error', 'Command failed (injected)');
    const out = await handler(req);
    return { status: out.status ?? 200, body: out.body };
  } catch (err) {
    if (err instanceof HttpFail) return { status: err.status, body: err.body as unknown };
    const f = serverFail(500, 'Internal error', String((err as Error).message));
    return { status: f.status, body: f.body as unknown };
  }
}

/** The answer's fit to the published response schema; a misfit is the simulator's bug: 500. */
function checkAnswer(
  s: SimState,
  op: FineractOperationName | null,
  out: { status: number; body: unknown },
): { status: number; body: unknown } {
  if (op === null || s.opts.validateResponses === false || out.status < 200 || out.status >= 300) return out;
  const problems = responseProblems(op, out.body);
  if (problems.length === 0) return out;
  s.contractViolations.push({ operation: op, problems });
  const f = serverFail(500, `simulator answer breaks the published ${op} schema: ${problems.join('; ')}`);
  return { status: f.status, body: f.body };
}

function deliver(
  s: SimState,
  req: Request,
  res: Response,
  out: { status: number; body: unknown },
  fromCache: boolean,
  fault: Fault | undefined,
): void {
  if (fault?.kind === 'hang-after-commit') {
    s.held.add(res);
    res.on('close', () => s.held.delete(res));
    return;
  }
  if (fault?.kind === 'reset-after-commit') {
    req.socket.destroy();
    return;
  }
  if (fault?.kind === 'status-after-commit') {
    const f = serverFail(fault.status ?? 500, 'Internal error', 'Internal error (injected after commit)');
    res.status(f.status).json(f.body);
    return;
  }
  if (fromCache) res.setHeader('x-served-from-cache', 'true');
  res.status(out.status).json(out.body);
}

/**
 * Wraps a handler the way Fineract's stack wraps a command: faults, permissions, the command
 * pipeline's idempotency (when `command` names the action, e.g. CREATE_CLIENT), error bodies,
 * the response contract, recording. Routes without a command (reads, document uploads) ignore an
 * Idempotency-Key, as Fineract does.
 */
export function route(
  s: SimState,
  op: FineractOperationName | null | ((req: Request) => FineractOperationName | null),
  handler: Handler,
  command?: string | ((req: Request) => string),
) {
  return async (req: Request, res: Response): Promise<void> => {
    const operation = typeof op === 'function' ? op(req) : op;
    const fault = takeFault(s.faults, req);
    if (fault?.kind === 'status-before') {
      const f = serverFail(fault.status ?? 503, 'Service unavailable', 'Service unavailable (injected)');
      record(s, req, operation, f.status, false, fault.kind);
      res.status(f.status).json(f.body);
      return;
    }
    const action = typeof command === 'function' ? command(req) : command;
    if (action !== undefined && s.denied.has(action)) {
      record(s, req, operation, 403, false, null);
      res.status(403).json(notAuthorized(action));
      return;
    }
    const key = action !== undefined && req.method === 'POST' ? req.header('idempotency-key') : undefined;
    if (key !== undefined && key.length > 50) {
      // CommandSource.idempotency_key is VARCHAR(50): the insert fails before the command runs.
      const f = envelope(
        403,
        'error.msg.unknown.data.integrity.issue',
        "Unknown data integrity issue with resource: Data truncation: Data too long for column 'idempotency_key'",
        [],
        'The request caused a data integrity issue to be fired by the database.',
      );
      record(s, req, operation, 403, false, null);
      res.status(403).json(f);
      return;
    }
    // Scoped by action + entity + key (CommandSourceService), not by URL.
    const cacheKey = key === undefined || s.opts.idempotencyReplay === false ? undefined : `${action} ${key}`;
    if (cacheKey !== undefined && s.inFlight.has(cacheKey)) {
      record(s, req, operation, 425, false, null);
      res.status(425).setHeader('x-served-from-cache', 'true');
      res.json(
        envelope(
          425,
          'error.msg.idempotency.in.process',
          'The command is under processing',
          [],
          `Idempotent command with key ${key} is under processing`,
        ),
      );
      return;
    }
    const cached = cacheKey !== undefined ? s.idempotency.get(cacheKey) : undefined;
    let out: { status: number; body: unknown };
    if (cached !== undefined) out = cached;
    else {
      if (cacheKey !== undefined) s.inFlight.add(cacheKey);
      try {
        out = checkAnswer(s, operation, await execute(s, req, handler, fault));
      } finally {
        if (cacheKey !== undefined) s.inFlight.delete(cacheKey);
      }
      // Every result of the command is stored, failures included, and replayed for the key.
      if (cacheKey !== undefined) s.idempotency.set(cacheKey, out);
    }
    record(s, req, operation, out.status, cached !== undefined, fault?.kind ?? null);
    deliver(s, req, res, out, cached !== undefined, fault);
  };
}
