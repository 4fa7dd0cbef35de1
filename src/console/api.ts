/**
 * The console's JSON API under /console/api (docs/operations.md "Ops console"): HTTP Basic auth
 * with a console user (or the trusted proxy), JSON bodies only, no cookies (so no CSRF surface).
 * The rules live in the service; this maps HTTP to it and ConsoleError to its status.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { consoleUser } from './auth.js';
import { sameOrigin } from './pages/security.js';
import { parseExceptionQuery } from './exceptions.js';
import { ConsoleError, type NewRequest, type RequestStatus } from './contract.js';
import type { ConsoleDeps } from './index.js';

type Handler = (req: Request, res: Response) => Promise<void>;

/** Methods that change nothing: every other one is checked for its origin and its JSON body. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function one(v: unknown, name: string): string | undefined {
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string') throw new ConsoleError(400, `${name}: expected one value`, name);
  return v;
}

function intParam(v: unknown, name: string): number | undefined {
  const s = one(v, name);
  if (s === undefined) return undefined;
  if (!/^\d{1,6}$/.test(s)) throw new ConsoleError(400, `${name}: expected a whole number`, name);
  return Number(s);
}

export function createConsoleApi(deps: ConsoleDeps): Router {
  const log = deps.logger.child({ component: 'console-api' });
  const router = express.Router();

  router.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  // Cross-site first, before credentials are even checked: a browser that holds Basic credentials
  // (or sits behind the trusted proxy) must not be made to act by another site's page (issue 43 F1).
  router.use((req, res, next) => {
    if (SAFE_METHODS.has(req.method)) {
      next();
      return;
    }
    const origin = sameOrigin(req, { absentOk: true });
    if (!origin.ok) {
      log.warn(
        { method: req.method, path: req.path, why: origin.why, client: deps.auth.clientAddress(req) },
        'console api request refused: not from this console (Origin check)',
      );
      res.status(403).json({
        error:
          `refused: the request comes from another site (${origin.why}); the console API takes ` +
          "requests from this console's own pages or from clients that send no Origin",
      });
      return;
    }
    next();
  });
  router.use(deps.auth.basic);
  // Every request is logged with its user (the path only: a search may carry a name in its query).
  router.use((req, res, next) => {
    const started = deps.clock.now();
    res.on('finish', () => {
      log.info(
        {
          user: consoleUser(res).name,
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: deps.clock.now() - started,
        },
        'console api request',
      );
    });
    next();
  });
  // Every state-changing request sends a JSON body, an empty one included ({}): a form or a
  // body-less POST is what another site's page can send without a CORS preflight (issue 43 F1).
  // Refused before the body is read.
  router.use((req, res, next) => {
    if (SAFE_METHODS.has(req.method)) {
      next();
      return;
    }
    const length = req.get('content-length');
    if ((length === undefined || length === '0') && req.get('transfer-encoding') === undefined) {
      res.status(400).json({ error: 'body: expected a JSON object ({} for an action without fields)' });
      return;
    }
    if (req.is('application/json') !== 'application/json') {
      res.status(415).json({
        error:
          `send a JSON body with Content-Type: application/json (got ${req.get('content-type') ?? 'none'}); ` +
          'an action without fields takes {}',
      });
      return;
    }
    next();
  });
  router.use(express.json({ limit: '2mb', type: 'application/json' }));
  const route = (fn: Handler) => (req: Request, res: Response, next: NextFunction) => {
    fn(req, res).catch(next);
  };
  const body = (req: Request): Record<string, unknown> => {
    const b: unknown = req.body;
    if (typeof b !== 'object' || b === null || Array.isArray(b))
      throw new ConsoleError(400, 'body: expected a JSON object');
    return b as Record<string, unknown>;
  };

  mountApiRoutes(router, deps, route, body);

  router.use((_req, res) => {
    res.status(404).json({ error: 'no such console API route (docs/operations.md "Ops console")' });
  });

  router.use((err: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (err instanceof ConsoleError) {
      res.status(err.status).json({
        error: err.message,
        ...(err.field ? { field: err.field } : {}),
        ...(err.link ? { link: err.link } : {}),
      });
      return;
    }
    const e = err as { type?: string; status?: number };
    if (e?.type === 'entity.parse.failed') {
      res.status(400).json({ error: 'body: not valid JSON' });
      return;
    }
    if (e?.type === 'entity.too.large') {
      res.status(413).json({ error: 'body: too large (at most 2 MB)' });
      return;
    }
    next(err);
  });
  return router;
}

type Route = (fn: Handler) => (req: Request, res: Response, next: NextFunction) => void;

/** The API's routes (the service holds the rules; these map HTTP to it), mounted in this order. */
function mountApiRoutes(
  router: Router,
  deps: ConsoleDeps,
  route: Route,
  body: (req: Request) => Record<string, unknown>,
): void {
  mountLoanRoutes(router, deps, route);
  mountRequestRoutes(router, deps, route, body);
  mountAuditAndReportRoutes(router, deps, route, body);
  mountOpsRoutes(router, deps, route, body);
}

/** The signed-in user, the exception queue and a loan's history. */
function mountLoanRoutes(router: Router, deps: ConsoleDeps, route: Route): void {
  const { service } = deps;
  router.get('/me', (_req, res) => {
    res.json(consoleUser(res));
  });

  router.get(
    '/exceptions',
    route(async (req, res) => {
      res.json(await service.exceptions(parseExceptionQuery(req.query)));
    }),
  );

  router.get(
    '/exceptions/counts',
    route(async (req, res) => {
      const { sort: _s, dir: _d, limit: _l, cursor: _c, ...filter } = parseExceptionQuery(req.query);
      res.json({ counts: await service.exceptionCounts(filter) });
    }),
  );

  router.get(
    '/loans/:id',
    route(async (req, res) => {
      const h = await service.loan(req.params['id'] as string);
      if (!h) throw new ConsoleError(404, `no loan ${req.params['id'] as string}`);
      res.json(h);
    }),
  );

  router.get(
    '/loans/:id/reboard-diff',
    route(async (req, res) => {
      res.json(await service.reboardDiff(consoleUser(res), req.params['id'] as string));
    }),
  );
}

/** Change requests: list, preview, raise, read, approve, reject, withdraw. */
function mountRequestRoutes(
  router: Router,
  deps: ConsoleDeps,
  route: Route,
  body: (req: Request) => Record<string, unknown>,
): void {
  const { service } = deps;
  router.get(
    '/requests',
    route(async (req, res) => {
      const status = one(req.query['status'], 'status') as RequestStatus | undefined;
      const limit = intParam(req.query['limit'], 'limit');
      const cursor = one(req.query['cursor'], 'cursor');
      res.json(
        await service.requests({
          ...(status ? { status } : {}),
          ...(limit !== undefined ? { limit } : {}),
          ...(cursor ? { cursor } : {}),
        }),
      );
    }),
  );

  router.post(
    '/requests/preview',
    route(async (req, res) => {
      res.json(await service.previewRequest(consoleUser(res), body(req) as unknown as NewRequest));
    }),
  );

  router.post(
    '/requests',
    route(async (req, res) => {
      const r = await service.createRequest(consoleUser(res), body(req) as unknown as NewRequest);
      res.status(202).json(r);
    }),
  );

  router.get(
    '/requests/:id',
    route(async (req, res) => {
      const r = await service.request(req.params['id'] as string);
      if (!r) throw new ConsoleError(404, `no request ${req.params['id'] as string}`);
      res.json(r);
    }),
  );

  router.post(
    '/requests/:id/approve',
    route(async (req, res) => {
      const note = body(req)['note'];
      if (note !== undefined && typeof note !== 'string')
        throw new ConsoleError(400, 'note: expected text', 'note');
      res.json(await service.approve(consoleUser(res), req.params['id'] as string, note));
    }),
  );

  router.post(
    '/requests/:id/reject',
    route(async (req, res) => {
      const note = body(req)['note'];
      res.json(
        await service.reject(
          consoleUser(res),
          req.params['id'] as string,
          typeof note === 'string' ? note : '',
        ),
      );
    }),
  );

  router.post(
    '/requests/:id/withdraw',
    route(async (req, res) => {
      const note = body(req)['note'];
      res.json(
        await service.withdraw(
          consoleUser(res),
          req.params['id'] as string,
          typeof note === 'string' ? note : undefined,
        ),
      );
    }),
  );
}

/** The audit trail (JSON and CSV) and the reconciliation runs with their sign-off. */
function mountAuditAndReportRoutes(
  router: Router,
  deps: ConsoleDeps,
  route: Route,
  body: (req: Request) => Record<string, unknown>,
): void {
  const { service } = deps;
  router.get(
    '/audit',
    route(async (req, res) => {
      const loan = one(req.query['loan'], 'loan');
      const requestId = one(req.query['request'], 'request');
      const limit = intParam(req.query['limit'], 'limit');
      const cursor = one(req.query['cursor'], 'cursor');
      res.json(
        await service.audit({
          ...(loan ? { loan } : {}),
          ...(requestId ? { requestId } : {}),
          ...(limit !== undefined ? { limit } : {}),
          ...(cursor ? { cursor } : {}),
        }),
      );
    }),
  );

  router.get(
    '/audit.csv',
    route(async (req, res) => {
      const loan = one(req.query['loan'], 'loan');
      res.setHeader('Content-Type', 'text/csv; charset=utf-8');
      res.setHeader('Content-Disposition', `attachment; filename="console-audit${loan ? '-loan' : ''}.csv"`);
      for await (const chunk of service.auditCsv(loan ? { loan } : {})) {
        if (!res.write(chunk)) await new Promise((resolve) => res.once('drain', resolve));
      }
      res.end();
    }),
  );

  router.get(
    '/reports',
    route(async (_req, res) => {
      res.json({ runs: await service.reports() });
    }),
  );

  router.get(
    '/reports/:day/:run',
    route(async (req, res) => {
      const r = await service.report(req.params['day'] as string, req.params['run'] as string);
      if (!r)
        throw new ConsoleError(
          404,
          `no reconciliation run ${req.params['day'] as string}/${req.params['run'] as string}`,
        );
      res.json(r);
    }),
  );

  router.post(
    '/reports/run',
    route(async (_req, res) => {
      res.status(201).json(await deps.service.runReconciliation(consoleUser(res)));
    }),
  );

  router.post(
    '/reports/:day/:run/signoff',
    route(async (req, res) => {
      const b = body(req);
      const as = b['as'];
      if (as !== 'prepared' && as !== 'reviewed')
        throw new ConsoleError(400, 'as: expected "prepared" or "reviewed"', 'as');
      const note = b['note'];
      if (typeof note !== 'string')
        throw new ConsoleError(400, 'note: required: a comment for the sign-off', 'note');
      const dispositions = b['dispositions'];
      if (
        dispositions !== undefined &&
        (typeof dispositions !== 'object' || dispositions === null || Array.isArray(dispositions))
      )
        throw new ConsoleError(
          400,
          'dispositions: expected an object { "<exception index>": "resolved" | … }',
          'dispositions',
        );
      res.json(
        await service.signOff(
          consoleUser(res),
          req.params['day'] as string,
          req.params['run'] as string,
          as,
          { note, ...(dispositions ? { dispositions: dispositions as Record<string, string> } : {}) },
        ),
      );
    }),
  );
}

/** Login locks, the file core's batches and the daemon's status. */
function mountOpsRoutes(
  router: Router,
  deps: ConsoleDeps,
  route: Route,
  body: (req: Request) => Record<string, unknown>,
): void {
  const { service } = deps;
  router.post(
    '/logins/unlock',
    route(async (req, res) => {
      const name = body(req)['name'];
      if (typeof name !== 'string' || name.trim() === '')
        throw new ConsoleError(400, 'name: the console user whose login lock to lift', 'name');
      await service.recordUnlock(consoleUser(res), name);
      res.json({ user: name, locksLifted: deps.auth.unlock(name) });
    }),
  );

  router.get('/logins/locks', (_req, res) => {
    res.json({
      locks: deps.auth.locks().map((l) => ({
        ...l,
        since: new Date(l.since).toISOString(),
        until: new Date(l.until).toISOString(),
      })),
    });
  });

  router.get(
    '/batches',
    route(async (_req, res) => {
      res.json({ batches: await service.batches() });
    }),
  );

  router.get(
    '/status',
    route(async (_req, res) => {
      res.json(await service.status());
    }),
  );
}
