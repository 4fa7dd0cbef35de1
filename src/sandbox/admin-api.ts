import { createHash } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { z } from 'zod';
import type { Logger } from '../lib/logger.js';
import { emptyCounters } from './counters.js';
import type { FaultInjector, FaultRule } from './faults.js';
import { makeKey, PERMISSIONS } from './keys.js';
import { LOAN_STATUSES, MALFORMATIONS, WEBHOOK_EVENT_TYPES, type LoanRecord } from './model.js';
import type { RateLimiter } from './rate-limit.js';
import { publicBoarding, publicDocument, queueItem } from './serialize.js';
import type { SandboxState } from './state.js';
import { isLoopbackHost } from './webhook-url.js';
import type { WebhookSender } from './webhook-sender.js';

export interface AdminDeps {
  state: SandboxState;
  limiter: RateLimiter;
  faults: FaultInjector;
  sender: WebhookSender;
  logger: Logger;
}

class AdminError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body ?? {});
  if (!r.success)
    throw new AdminError(
      400,
      r.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; '),
    );
  return r.data;
}

const envs = z.enum(['production', 'staging', 'development']);
const keySchema = z.strictObject({
  environment: envs.optional(),
  org: z.string().min(1).optional(),
  permissions: z.array(z.string()).optional(),
  expired: z.boolean().optional(),
  allowedCountries: z.array(z.string().length(2)).nullable().optional(),
  productionApproved: z.boolean().optional(),
  orgEnvironments: z.array(envs).optional(),
});
const faultRule = z.strictObject({
  route: z.string().min(1),
  status5xxRate: z.number().min(0).max(1).optional(),
  resetRate: z.number().min(0).max(1).optional(),
  resetAfterCommitRate: z.number().min(0).max(1).optional(),
  latencyMs: z.number().int().min(0).max(120_000).optional(),
  status429Rate: z.number().min(0).max(1).optional(),
  retryAfterSeconds: z.number().int().min(1).max(86_400).optional(),
  slowBodyRate: z.number().min(0).max(1).optional(),
  slowBodyMs: z.number().int().min(1).max(120_000).optional(),
  count: z.number().int().min(0).optional(),
});
const faultsSchema = z.strictObject({ seed: z.number().int().optional(), rules: z.array(faultRule) });
const rateSchema = z.strictObject({
  windowMs: z.number().int().min(100).optional(),
  readsPerWindow: z.number().int().min(0).optional(),
  writesPerWindow: z.number().int().min(0).optional(),
  legacyPerWindow: z.number().int().min(0).optional(),
  revokeAfterStrikes: z.number().int().min(1).nullable().optional(),
  force429: z
    .strictObject({
      bucket: z.enum(['read', 'write', 'legacy']),
      retryAfterSeconds: z.number().int().min(1).max(86_400),
    })
    .optional(),
});
const generateSchema = z.strictObject({
  count: z.number().int().min(1).max(10_000),
  release: z.boolean().optional(),
  status: z.enum(LOAN_STATUSES).optional(),
});

function internalView(state: SandboxState, loan: LoanRecord): Record<string, unknown> {
  return {
    loan: loan.fields,
    orgId: loan.orgId,
    archivedAt: loan.archivedAt,
    malformed: loan.malformed,
    rateParts: loan.rateParts,
    boarding: loan.boarding
      ? { ...publicBoarding(loan), acknowledgement: loan.boarding.acknowledgement }
      : null,
    queueItem: queueItem(loan),
    businesses: loan.businesses,
    people: loan.people,
    documents: loan.documentIds
      .map((id) => state.documents.get(id))
      .filter((d) => d !== undefined)
      .map((d) => ({
        ...publicDocument(d),
        attached: d.attached,
        sizeOnDisk: d.bytes.length,
        sha256: createHash('sha256').update(d.bytes).digest('hex'),
      })),
  };
}

/** The admin API (outside /api): lifecycle actions, keys, faults, limits and counters. */
export function createAdminRouter(deps: AdminDeps): express.Router {
  const r = express.Router();
  r.use(express.json({ limit: '1mb' }));
  r.use((req, _res, next) => {
    // Loopback only: the admin API has no auth.
    if (!isLoopbackHost(req.socket.remoteAddress ?? '')) {
      next(new AdminError(403, 'the admin API only answers loopback callers'));
      return;
    }
    next();
  });
  mountCounterRoutes(r, deps);
  mountLoanRoutes(r, deps);
  mountKeyRoutes(r, deps);
  mountFaultRoutes(r, deps);
  mountRateLimitRoutes(r, deps);
  mountEventRoutes(r, deps);
  // The index the banners link to (`admin: http://…/admin`): every operation, read off the router
  // itself so it cannot drift (regression, issue 42: the printed link answered 404).
  r.get('/', (_req, res) => {
    res.json({
      name: 'Loan Platform sandbox: admin API',
      docs: 'docs/sandbox.md, "Admin API"',
      access: 'loopback callers only, no auth, JSON bodies',
      operations: adminOperations(r),
    });
  });
  r.use((req, _res, next) =>
    next(
      new AdminError(404, `no such admin operation: ${req.method} /admin${req.path} (GET /admin lists them)`),
    ),
  );
  r.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
    void next;
    if (err instanceof AdminError) {
      res.status(err.status).json({ code: 'admin.error', message: err.message });
      return;
    }
    const e = err as { status?: number; type?: string; message?: string };
    if (e.type === 'entity.parse.failed') {
      res.status(400).json({ code: 'admin.error', message: 'request body is not valid JSON' });
      return;
    }
    deps.logger.error({ err }, 'sandbox admin failed');
    res.status(500).json({ code: 'admin.error', message: e.message ?? 'internal error' });
  });
  return r;
}

/** `METHOD /admin/path` of every route on the router, in the order they were mounted. */
function adminOperations(r: express.Router): string[] {
  const ops: string[] = [];
  for (const layer of r.stack as Array<{ route?: { path: unknown; methods?: Record<string, boolean> } }>) {
    const route = layer.route;
    if (route === undefined || typeof route.path !== 'string') continue;
    const path = `/admin${route.path === '/' ? '' : route.path}`;
    for (const [method, on] of Object.entries(route.methods ?? {}))
      if (on && method !== '_all') ops.push(`${method.toUpperCase()} ${path}`);
  }
  return ops;
}

/** What the sandbox counted and the rate-limited requests it logged. */
function mountCounterRoutes(r: express.Router, { state, limiter }: AdminDeps): void {
  r.get('/counters', (_req, res) => {
    res.json(state.counters);
  });
  r.post('/counters/reset', (_req, res) => {
    state.counters = emptyCounters();
    state.requestLog.clear();
    res.json({ ok: true });
  });

  r.get('/requests', (req, res) => {
    const since = req.query['since'];
    const sinceMs = typeof since === 'string' && since !== '' ? Number(since) : 0;
    if (!Number.isFinite(sinceMs))
      throw new AdminError(400, `since: expected epoch milliseconds, got ${JSON.stringify(since)}`);
    const s = limiter.settings;
    res.json({
      windowMs: s.windowMs,
      limits: { read: s.readsPerWindow, write: s.writesPerWindow, legacy: s.legacyPerWindow },
      dropped: state.requestLog.dropped,
      data: state.requestLog.since(sinceMs),
    });
  });
}

function loanOr404(state: SandboxState, id: string | undefined): LoanRecord {
  const loan = state.loans.get(id ?? '');
  if (!loan) throw new AdminError(404, `no loan ${id ?? ''}`);
  return loan;
}

/** A loan's lifecycle (generate, release, fund, malform, restore) and its documents. */
function mountLoanRoutes(r: express.Router, { state }: AdminDeps): void {
  r.get('/loans', (req, res) => {
    const released = req.query['released'];
    const boarded = req.query['boarded'];
    const loans = [...state.loans.values()].filter((l) => {
      if (released === 'true' && !l.boarding) return false;
      if (released === 'false' && l.boarding) return false;
      if (boarded === 'true' && !l.boarding?.boarded) return false;
      if (boarded === 'false' && (!l.boarding || l.boarding.boarded)) return false;
      return true;
    });
    res.json({
      data: loans.map((l) => ({
        id: l.fields.id,
        status: l.fields.status,
        archived: l.archivedAt !== null,
        malformed: l.malformed,
        boarding: publicBoarding(l),
      })),
      total: loans.length,
    });
  });
  r.post('/loans', (req, res) => {
    const b = parse(generateSchema, req.body);
    const opts: Parameters<SandboxState['generate']>[1] = {
      emit: true,
      atNow: true,
      release: b.release ?? false,
    };
    if (b.status) opts.status = b.status;
    res.status(201).json({ ids: state.generate(b.count, opts) });
  });
  r.get('/loans/:id', (req, res) => {
    res.json(internalView(state, loanOr404(state, req.params['id'])));
  });
  r.post('/loans/:id/release', (req, res) => {
    const loan = loanOr404(state, req.params['id']);
    if (loan.archivedAt !== null) throw new AdminError(409, 'loan is archived');
    state.release(loan.fields.id);
    res.json({ id: loan.fields.id, boarding: publicBoarding(loan) });
  });
  r.post('/loans/:id/fund', (req, res) => {
    const loan = loanOr404(state, req.params['id']);
    if (loan.archivedAt !== null) throw new AdminError(409, 'loan is archived');
    state.setStatus(loan.fields.id, 'funded');
    res.json({ id: loan.fields.id, status: loan.fields.status });
  });
  r.post('/loans/:id/status', (req, res) => {
    const loan = loanOr404(state, req.params['id']);
    const { status } = parse(z.strictObject({ status: z.enum(LOAN_STATUSES) }), req.body);
    state.setStatus(loan.fields.id, status);
    res.json({ id: loan.fields.id, status: loan.fields.status });
  });
  r.post('/loans/:id/malform', (req, res) => {
    const loan = loanOr404(state, req.params['id']);
    const { kind } = parse(z.strictObject({ kind: z.enum(MALFORMATIONS).default('amount') }), req.body);
    loan.malformed = kind;
    res.json({ id: loan.fields.id, malformed: kind });
  });
  r.delete('/loans/:id/malform', (req, res) => {
    const loan = loanOr404(state, req.params['id']);
    loan.malformed = null;
    res.json({ id: loan.fields.id, malformed: null });
  });
  r.post('/loans/:id/restore', (req, res) => {
    const loan = loanOr404(state, req.params['id']);
    loan.archivedAt = null;
    res.json({ id: loan.fields.id, archived: false });
  });
  r.post('/loans/:id/documents', (req, res) => {
    const loan = loanOr404(state, req.params['id']);
    const b = parse(
      z.strictObject({
        name: z.string().min(1).optional(),
        size: z.number().int().min(0).optional(),
        periods: z.array(z.string().min(1)).optional(),
      }),
      req.body,
    );
    const opts: { name?: string; size?: number; periods?: string[] } = {};
    if (b.name !== undefined) opts.name = b.name;
    if (b.size !== undefined) opts.size = b.size;
    if (b.periods !== undefined) opts.periods = b.periods;
    const doc = state.createPendingDocument(loan.fields.id, opts);
    if (!doc) throw new AdminError(409, 'loan is archived');
    res
      .status(201)
      .json({ documentId: doc.id, loanId: loan.fields.id, periods: doc.requirement?.periods ?? [] });
  });
  r.post('/documents/:id/sign', (req, res) => {
    const doc = state.signDocument(req.params['id'] ?? '');
    if (!doc) throw new AdminError(404, `no document ${req.params['id'] ?? ''}`);
    res.json({ id: doc.id, signed: true });
  });
}

/** API keys of any environment, organisation and permissions. */
function mountKeyRoutes(r: express.Router, { state }: AdminDeps): void {
  r.post('/keys', (req, res) => {
    const b = parse(keySchema, req.body);
    const unknown = (b.permissions ?? []).filter((p) => !(PERMISSIONS as readonly string[]).includes(p));
    if (unknown.length > 0)
      throw new AdminError(
        400,
        `unknown permissions: ${unknown.join(', ')} (known: ${PERMISSIONS.join(', ')})`,
      );
    const opts: Parameters<typeof makeKey>[0] = {};
    if (b.environment) opts.environment = b.environment;
    if (b.org) opts.org = b.org;
    if (b.permissions) opts.permissions = b.permissions;
    if (b.expired !== undefined) opts.expired = b.expired;
    if (b.allowedCountries !== undefined)
      opts.allowedCountries = b.allowedCountries?.map((c) => c.toUpperCase()) ?? null;
    if (b.productionApproved !== undefined) opts.productionApproved = b.productionApproved;
    if (b.orgEnvironments) opts.orgEnvironments = b.orgEnvironments;
    const key = state.addKey(makeKey(opts));
    res.status(201).json({
      apiKey: key.key,
      org: key.orgId,
      environment: key.environment,
      permissions: [...key.permissions],
    });
  });
}

/** Injected faults (5xx, resets, latency, 429s, slow bodies) per route. */
function mountFaultRoutes(r: express.Router, { faults }: AdminDeps): void {
  r.get('/faults', (_req, res) => {
    res.json(faults.describe());
  });
  r.put('/faults', (req, res) => {
    const b = parse(faultsSchema, req.body);
    faults.set(
      b.seed,
      b.rules.map(
        (rule) =>
          Object.fromEntries(Object.entries(rule).filter(([, v]) => v !== undefined)) as unknown as FaultRule,
      ),
    );
    res.json(faults.describe());
  });
  r.delete('/faults', (_req, res) => {
    faults.clear();
    res.json(faults.describe());
  });
}

/** The platform's rate limits, and a forced 429. */
function mountRateLimitRoutes(r: express.Router, { limiter }: AdminDeps): void {
  r.get('/rate-limit', (_req, res) => {
    res.json(limiter.settings);
  });
  r.post('/rate-limit', (req, res) => {
    const b = parse(rateSchema, req.body);
    const patch: Partial<typeof limiter.settings> = {};
    if (b.windowMs !== undefined) patch.windowMs = b.windowMs;
    if (b.readsPerWindow !== undefined) patch.readsPerWindow = b.readsPerWindow;
    if (b.writesPerWindow !== undefined) patch.writesPerWindow = b.writesPerWindow;
    if (b.legacyPerWindow !== undefined) patch.legacyPerWindow = b.legacyPerWindow;
    if (b.revokeAfterStrikes !== undefined) patch.revokeAfterStrikes = b.revokeAfterStrikes;
    if (Object.keys(patch).length > 0) limiter.update(patch);
    if (b.force429) limiter.force(b.force429.bucket, b.force429.retryAfterSeconds);
    res.json(limiter.settings);
  });
}

/** Events to send, webhook deliveries and the sender's retry settings. */
function mountEventRoutes(r: express.Router, { state, sender }: AdminDeps): void {
  r.post('/events', (req, res) => {
    const b = parse(
      z.strictObject({
        type: z.enum(WEBHOOK_EVENT_TYPES),
        data: z.record(z.string(), z.unknown()).optional(),
        org: z.string().min(1).optional(),
      }),
      req.body,
    );
    const event = state.emit(b.type, b.data ?? {}, b.org);
    res.status(201).json({ id: event.id, type: event.type, createdAt: event.createdAt });
  });
  r.get('/webhooks/deliveries', async (req, res) => {
    // ?wait=true: answer once no delivery (or retry backoff) is pending.
    if (req.query['wait'] === 'true') await sender.idle();
    res.json({
      data: sender.attempts,
      endpoints: [...state.endpoints.values()].map((e) => ({ ...e, secret: undefined })),
    });
  });
  r.post('/webhooks/settings', (req, res) => {
    const b = parse(
      z.strictObject({
        attempts: z.number().int().min(1).optional(),
        baseMs: z.number().int().min(0).optional(),
        autoDisableAfter: z.number().int().min(1).optional(),
      }),
      req.body,
    );
    if (b.attempts !== undefined) sender.retry = { ...sender.retry, attempts: b.attempts };
    if (b.baseMs !== undefined) sender.retry = { ...sender.retry, baseMs: b.baseMs };
    if (b.autoDisableAfter !== undefined) sender.autoDisableAfter = b.autoDisableAfter;
    res.json({ retry: sender.retry, autoDisableAfter: sender.autoDisableAfter });
  });
}
