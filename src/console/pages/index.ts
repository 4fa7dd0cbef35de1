/**
 * The console's browser pages under /console/ (mounted by src/console/index.ts on the admin
 * listener, after /console/api). Server-rendered HTML, no script, one stylesheet.
 *
 * Guards, in order, on every route but the stylesheet and the login form:
 * 1. a live server-side session (cookie `bc_console_session`), or the trusted proxy's user (a
 *    session is then made for them, so their forms carry a CSRF token too); else → /console/login;
 * 2. on POST: the request's Origin (or Referer) is this host, and `_csrf` is the session's token;
 *    else 403 before anything is read or changed;
 * 3. roles: the service checks them on every action (a viewer's POST gets its 403 from there,
 *    whatever page it came from); the pages only leave out forms a user cannot use.
 * Every request is logged with its user (path only: no query string, no form fields).
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { ConsoleDeps } from '../index.js';
import { ConsoleError, hasRole, REQUEST_ACTIONS, REQUEST_STATUSES, type ConsoleUser, type NewRequest, type RequestAction, type ReboardDiff, type RequestPreview, type RequestStatus } from '../contract.js';
import { setConsoleUser } from '../auth.js';
import { type Html } from './html.js';
import { layout, type NavKey } from './layout.js';
import { createSessionStore, type BrowserSession, type SessionStore } from './sessions.js';
import { clearSessionCookie, pageHeaders, sameOrigin, sessionCookieOf, setSessionCookie } from './security.js';
import { CONSOLE_CSS } from './style.js';
import { displayZone } from './format.js';
import { REPORT_HTML_CSP } from '../../reports/render-html.js';
import { BULK_FILTER_PREFIX, FILTER_KEYS, QUEUE_KEYS, QueueParamError, filterOf, queryOf, queueHref, queuePage, type QueueParams } from './queue.js';
import { loanPage } from './loan.js';
import { requestPage, requestsPage } from './requests.js';
import { auditPage, batchesPage, errorBody, loginPage, reportPage, reportsPage, statusPage } from './other.js';
import { consoleHref, seg } from './html.js';

interface PageLocals {
  session: BrowserSession;
  user: ConsoleUser;
  /** Requests waiting for an approver (shown in the approver's navigation), when looked up. */
  pending?: number;
}

const locals = (res: Response): PageLocals => res.locals as unknown as PageLocals;

/** Single string form/query fields only: a repeated field is refused rather than guessed at. */
function field(source: unknown, name: string): string | undefined {
  const v = (source as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : undefined;
}

/**
 * A repeated form field as its list (one value per field, each taken whole): a loan id may hold
 * commas or spaces, so a list is never a joined string split again.
 */
function fieldList(source: unknown, name: string): string[] | undefined {
  const v = (source as Record<string, unknown> | undefined)?.[name];
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
  return undefined;
}

export function isSecureRequest(req: Request): boolean {
  if (req.secure) return true;
  const proto = req.get('x-forwarded-proto');
  return typeof proto === 'string' && proto.split(',')[0]?.trim().toLowerCase() === 'https';
}

/** Pending requests counted for the navigation badge; more show as "99+". */
const PENDING_SHOWN = 99;

export interface ConsolePagesOptions {
  /** The session store (tests pass their own to move its clock); default: one per mount. */
  sessions?: SessionStore;
}

export function mountConsolePages(router: Router, deps: ConsoleDeps, opts: ConsolePagesOptions = {}): void {
  const { service, auth } = deps;
  const log = deps.logger.child({ component: 'console-pages' });
  const sessions = opts.sessions ?? createSessionStore({ clock: deps.clock, idleMs: deps.config.sessionIdleMinutes * 60_000 });
  // The sign-off form carries one disposition per exception: more fields than the others.
  const form = express.urlencoded({ extended: false, limit: '256kb', parameterLimit: 5000 });

  router.use(pageHeaders);
  // Every time on every page in the bank's zone (format.ts when()).
  const zone = deps.timeZone ?? 'UTC';
  router.use((_req, _res, next) => displayZone.run(zone, next));

  // Every request, with its user once known (set below), logged when the response is done.
  router.use((req, res, next) => {
    const started = deps.clock.now();
    res.on('finish', () => {
      const who = (res.locals as Partial<PageLocals>).user?.name ?? null;
      log.info({ user: who, method: req.method, path: `${req.baseUrl}${req.path}`, status: res.statusCode, ms: deps.clock.now() - started, client: auth.clientAddress(req) }, 'console page');
    });
    next();
  });

  router.get('/static/console.css', (_req, res) => {
    res.setHeader('Content-Type', 'text/css; charset=utf-8');
    res.setHeader('Cache-Control', 'private, max-age=300');
    res.send(CONSOLE_CSS);
  });

  const sendPage = (res: Response, status: number, title: string, nav: NavKey, body: Html | string, session: BrowserSession | null): void => {
    const flash = session?.flash ?? null;
    if (session) session.flash = null;
    const pending = (res.locals as Partial<PageLocals>).pending;
    res.status(status).type('html').send(layout({ title, session, nav, body, flash, ...(pending !== undefined ? { pending } : {}) }).toString());
  };

  const sendError = (res: Response, status: number, message: string, link?: string): void => {
    const l = res.locals as Partial<PageLocals>;
    sendPage(res, status, status === 403 ? 'Not allowed' : 'Error', 'none', errorBody(status, message, link), l.session ?? null);
  };

  // ---------------------------------------------------------------------------------------------
  // Login and logout
  // ---------------------------------------------------------------------------------------------

  router.get('/login', (req, res) => {
    if (!auth.enabled) {
      sendPage(res, 503, 'Console off', 'none', errorBody(503, 'The console has no users: add console.users (hashes from `boarding-connector console passwd`) and restart.'), null);
      return;
    }
    if (sessions.get(sessionCookieOf(req))) {
      res.redirect(303, '/console/queue');
      return;
    }
    sendPage(res, 200, 'Log in', 'none', loginPage({ error: null, name: '' }), null);
  });

  router.post('/login', form, async (req, res, next) => {
    try {
      // Login CSRF: a login form posted from another site is refused like any other POST.
      const origin = sameOrigin(req);
      if (!origin.ok) {
        log.warn({ why: origin.why, client: auth.clientAddress(req) }, 'console login POST refused: not from this site');
        sendError(res, 403, 'Refused: the form was not sent from this console (Origin check).');
        return;
      }
      const name = field(req.body, 'name')?.trim() ?? '';
      const password = field(req.body, 'password') ?? '';
      if (name === '' || password === '') {
        sendPage(res, 400, 'Log in', 'none', loginPage({ error: 'Enter your user name and password.', name }), null);
        return;
      }
      const outcome = await auth.verifyLogin(name, password, auth.clientAddress(req));
      if (!outcome.ok) {
        if (outcome.why === 'throttled') {
          res.setHeader('Retry-After', String(outcome.retryAfterSeconds));
          sendPage(res, 429, 'Log in', 'none', loginPage({ error: `Too many failed logins: try again in ${outcome.retryAfterSeconds} s.`, name }), null);
        } else sendPage(res, 401, 'Log in', 'none', loginPage({ error: 'Unknown user or wrong password.', name }), null);
        return;
      }
      // A fresh id at every login (no session fixation); the old one, if any, ends.
      sessions.destroy(sessionCookieOf(req));
      const { id } = sessions.create(outcome.user.name, outcome.user.roles);
      setSessionCookie(res, id, isSecureRequest(req));
      locals(res).user = outcome.user;
      log.info({ user: outcome.user.name, roles: outcome.user.roles, client: auth.clientAddress(req) }, 'console login');
      // An approver lands on what waits for them (requests another person made), others on the queue.
      const waiting = hasRole(outcome.user, 'approver') ? (await service.requests({ status: 'pending', limit: PENDING_SHOWN + 1 })).items.some((r) => r.maker !== outcome.user.name) : false;
      res.redirect(303, waiting ? '/console/requests?status=pending' : '/console/queue');
    } catch (err) {
      next(err);
    }
  });

  // ---------------------------------------------------------------------------------------------
  // Session guard (everything below needs a user)
  // ---------------------------------------------------------------------------------------------

  router.use((req, res, next) => {
    const cookie = sessionCookieOf(req);
    let session = sessions.get(cookie);
    const fromProxy = auth.proxyUser(req);
    if (fromProxy && (!session || session.user !== fromProxy.name)) {
      sessions.destroy(cookie);
      const made = sessions.create(fromProxy.name, fromProxy.roles);
      setSessionCookie(res, made.id, isSecureRequest(req));
      session = made.session;
    }
    if (!session) {
      if (req.method === 'GET' || req.method === 'HEAD') res.redirect(303, '/console/login');
      else sendError(res, 403, 'Your session has ended: log in again.');
      return;
    }
    // Roles as configured now (a user removed from the config, or given fewer roles, loses them at once).
    const configured = fromProxy ?? auth.user(session.user);
    if (!configured) {
      sessions.destroy(cookie);
      clearSessionCookie(res, isSecureRequest(req));
      if (req.method === 'GET') res.redirect(303, '/console/login');
      else sendError(res, 403, 'This user is no longer configured.');
      return;
    }
    locals(res).session = session;
    locals(res).user = configured;
    setConsoleUser(res, configured);
    // An approver sees how many requests wait for them in the navigation (pages only, not POSTs).
    if (req.method === 'GET' && hasRole(configured, 'approver')) {
      service.requests({ status: 'pending', limit: PENDING_SHOWN + 1 }).then(
        (page) => {
          locals(res).pending = page.items.filter((r) => r.maker !== configured.name).length;
          next();
        },
        (err: unknown) => next(err),
      );
      return;
    }
    next();
  });

  // Every POST: same origin, then the session's CSRF token, before the handler reads anything else.
  router.post(/.*/, form, (req, res, next) => {
    const origin = sameOrigin(req);
    if (!origin.ok) {
      log.warn({ user: locals(res).user.name, path: req.path, why: origin.why }, 'console POST refused: not from this site');
      sendError(res, 403, 'Refused: the form was not sent from this console (Origin check).');
      return;
    }
    if (!sessions.csrfMatches(locals(res).session, field(req.body, '_csrf'))) {
      log.warn({ user: locals(res).user.name, path: req.path }, 'console POST refused: missing or wrong CSRF token');
      sendError(res, 403, 'Refused: the form is missing its security token or it has expired. Reload the page and try again.');
      return;
    }
    next();
  });

  router.post('/logout', (req, res) => {
    sessions.destroy(sessionCookieOf(req));
    clearSessionCookie(res, isSecureRequest(req));
    res.redirect(303, '/console/login');
  });

  router.get('/', (_req, res) => res.redirect(303, '/console/queue'));

  // ---------------------------------------------------------------------------------------------
  // Exception queue
  // ---------------------------------------------------------------------------------------------

  const queueParams = (source: unknown, prefix = ''): QueueParams => {
    const p: QueueParams = {};
    for (const k of [...QUEUE_KEYS, 'cursor'] as const) {
      const v = field(source, `${prefix}${k}`)?.trim();
      if (v) p[k] = v.slice(0, 200);
    }
    return p;
  };

  router.get('/queue', async (req, res, next) => {
    const { session, user } = locals(res);
    const params = queueParams(req.query);
    try {
      const query = queryOf(params, session.search);
      const filter = filterOf(params, session.search);
      const canAct = hasRole(user, 'operator');
      const preview = async (action: 'retry' | 'skip'): Promise<RequestPreview | null> => {
        try {
          return await service.previewRequest(user, { action, filter, reason: '(preview)' });
        } catch (err) {
          if (err instanceof ConsoleError) return null;
          throw err;
        }
      };
      const [page, counts, retry, skip] = await Promise.all([service.exceptions(query), service.exceptionCounts(filter), canAct ? preview('retry') : null, canAct ? preview('skip') : null]);
      sendPage(res, 200, 'Exception queue', 'queue', queuePage({ session, params, page, counts, preview: canAct ? { retry, skip } : null, canAct, products: [], versions: [] }), session);
    } catch (err) {
      if (err instanceof QueueParamError) {
        sendError(res, 400, err.message);
        return;
      }
      next(err);
    }
  });

  // The search text goes by POST into the session: a borrower's name never appears in a URL.
  router.post('/queue/search', (req, res) => {
    const { session } = locals(res);
    session.search = field(req.body, 'clear') === '1' ? '' : (field(req.body, 'q') ?? '').trim().slice(0, 200);
    res.redirect(303, queueHref(queueParams(req.body)));
  });

  // ---------------------------------------------------------------------------------------------
  // Loan
  // ---------------------------------------------------------------------------------------------

  router.get('/loans/:id', async (req, res, next) => {
    const { session, user } = locals(res);
    const id = req.params['id'];
    try {
      const history = await service.loan(id);
      if (!history) {
        sendError(res, 404, `No loan ${id} in the state database.`);
        return;
      }
      // A refused check (role, one at a time, per-user limit) shows on the loan page, not instead of it.
      const check = async (): Promise<ReboardDiff | null> => {
        if (field(req.query, 'diff') !== '1') return null;
        try {
          return await service.reboardDiff(user, id);
        } catch (err) {
          if (err instanceof ConsoleError && err.status !== 404) return { loanId: id, outcome: 'unavailable', mappingVersion: null, previousVersion: null, changes: [], message: err.message };
          throw err;
        }
      };
      const [diff, audit] = await Promise.all([check(), service.audit({ loan: id, limit: 50 })]);
      sendPage(res, 200, `Loan ${id}`, 'queue', loanPage({ session, history, diff, audit: audit.items, canAct: hasRole(user, 'operator') }), session);
    } catch (err) {
      next(err);
    }
  });

  // ---------------------------------------------------------------------------------------------
  // Requests
  // ---------------------------------------------------------------------------------------------

  router.post('/requests', async (req, res, next) => {
    const { session, user } = locals(res);
    try {
      const action = field(req.body, 'action') ?? '';
      if (!(REQUEST_ACTIONS as readonly string[]).includes(action)) throw new ConsoleError(400, `action: expected one of ${REQUEST_ACTIONS.join(', ')}`, 'action');
      const input: NewRequest = { action: action as RequestAction, reason: (field(req.body, 'reason') ?? '').trim() };
      const loans = fieldList(req.body, 'loans');
      if (field(req.body, 'by') === 'filter') {
        // The filter's own keys only (sort and paging are not part of what the request covers).
        const params = queueParams(req.body, BULK_FILTER_PREFIX);
        for (const k of Object.keys(params)) if (!(FILTER_KEYS as readonly string[]).includes(k)) delete params[k as keyof QueueParams];
        input.filter = filterOf(params, session.search);
      } else if (loans !== undefined) {
        input.loans = loans.filter((x) => x !== '');
      }
      const batch = field(req.body, 'batch');
      if (batch) input.batch = batch;
      const made = await service.createRequest(user, input);
      session.flash = { kind: 'ok', text: made.status === 'pending' ? `Request ${made.id} (${made.action}, ${made.previewCount} loan${made.previewCount === 1 ? '' : 's'}) is waiting for an approver.` : `Request ${made.id} (${made.action}) is ${made.status}.` };
      res.redirect(303, consoleHref(`/console/requests/${seg(made.id)}`));
    } catch (err) {
      if (err instanceof QueueParamError) {
        sendError(res, 400, err.message);
        return;
      }
      next(err);
    }
  });

  router.get('/requests', async (req, res, next) => {
    const { session, user } = locals(res);
    const status = field(req.query, 'status');
    const cursor = field(req.query, 'cursor');
    try {
      if (status !== undefined && status !== '' && !(REQUEST_STATUSES as readonly string[]).includes(status)) throw new ConsoleError(400, `status: expected one of ${REQUEST_STATUSES.join(', ')}`);
      const st = status ? (status as RequestStatus) : undefined;
      const page = await service.requests({ ...(st ? { status: st } : {}), ...(cursor ? { cursor } : {}), limit: 50 });
      sendPage(res, 200, 'Requests', 'requests', requestsPage({ session, user, status: st, page, cursor }), session);
    } catch (err) {
      next(err);
    }
  });

  router.get('/requests/:id', async (req, res, next) => {
    const { session, user } = locals(res);
    try {
      const request = await service.request(req.params['id']);
      if (!request) {
        sendError(res, 404, `No request ${req.params['id']}.`);
        return;
      }
      sendPage(res, 200, `Request ${request.id}`, 'requests', requestPage({ session, user, request }), session);
    } catch (err) {
      next(err);
    }
  });

  router.post('/requests/:id/:decision', async (req, res, next) => {
    const { session, user } = locals(res);
    const id = req.params['id'];
    const decision = req.params['decision'];
    try {
      const note = (field(req.body, 'note') ?? '').trim();
      let r;
      if (decision === 'approve') r = await service.approve(user, id, note === '' ? undefined : note);
      else if (decision === 'reject') r = await service.reject(user, id, note);
      else if (decision === 'withdraw') r = await service.withdraw(user, id, note === '' ? undefined : note);
      else throw new ConsoleError(404, `no such decision: ${decision}`);
      session.flash = { kind: r.status === 'failed' || r.status === 'rejected' ? 'error' : 'ok', text: `Request ${r.id} ${r.status}${r.result ? `: ${r.result.done} done${r.result.failed.length > 0 ? `, ${r.result.failed.length} failed` : ''}` : ''}.` };
      res.redirect(303, consoleHref(`/console/requests/${seg(r.id)}`));
    } catch (err) {
      next(err);
    }
  });

  // ---------------------------------------------------------------------------------------------
  // Audit
  // ---------------------------------------------------------------------------------------------

  router.get('/audit', async (req, res, next) => {
    const { session } = locals(res);
    const loan = field(req.query, 'loan')?.trim() || undefined;
    const request = field(req.query, 'request')?.trim() || undefined;
    const cursor = field(req.query, 'cursor') || undefined;
    try {
      const page = await service.audit({ ...(loan ? { loan } : {}), ...(request ? { requestId: request } : {}), ...(cursor ? { cursor } : {}), limit: 100 });
      sendPage(res, 200, 'Audit log', 'audit', auditPage({ page, loan, request, cursor }), session);
    } catch (err) {
      next(err);
    }
  });

  router.get('/audit.csv', async (req, res, next) => {
    const loan = field(req.query, 'loan')?.trim() || undefined;
    try {
      res.setHeader('Content-Type', 'text/csv; charset=utf-8');
      res.setHeader('Content-Disposition', `attachment; filename="${loan ? 'audit-loan.csv' : 'audit.csv'}"`);
      for await (const chunk of service.auditCsv(loan ? { loan } : {})) {
        if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
      }
      res.end();
    } catch (err) {
      if (res.headersSent) res.destroy(err as Error);
      else next(err);
    }
  });

  // ---------------------------------------------------------------------------------------------
  // Reconciliation
  // ---------------------------------------------------------------------------------------------

  router.get('/reconciliation', async (_req, res, next) => {
    try {
      sendPage(res, 200, 'Reconciliation', 'reconciliation', reportsPage({ runs: await service.reports() }), locals(res).session);
    } catch (err) {
      next(err);
    }
  });

  router.get('/reconciliation/:day/:run', async (req, res, next) => {
    const { session, user } = locals(res);
    try {
      const view = await service.report(req.params['day'], req.params['run']);
      if (!view) {
        sendError(res, 404, 'No such reconciliation run.');
        return;
      }
      sendPage(res, 200, `Reconciliation ${view.day}`, 'reconciliation', reportPage({ session, user, view }), session);
    } catch (err) {
      next(err);
    }
  });

  router.get('/reconciliation/:day/:run/report.:kind', async (req, res, next) => {
    const kind = req.params['kind'];
    try {
      if (kind !== 'html' && kind !== 'json' && kind !== 'csv') throw new ConsoleError(404, 'no such report file');
      const file = await service.reportFile(req.params['day'], req.params['run'], kind);
      if (!file) throw new ConsoleError(404, 'no such report file');
      // report.html is self-contained with inline styles and an inline SVG: its own policy, still no script.
      if (kind === 'html') res.setHeader('Content-Security-Policy', REPORT_HTML_CSP);
      else res.setHeader('Content-Disposition', `attachment; filename="report-${(req.params['day']).replace(/[^0-9-]/g, '')}.${kind}"`);
      res.sendFile(file, { dotfiles: 'deny' });
    } catch (err) {
      next(err);
    }
  });

  router.post('/reconciliation/:day/:run/signoff', async (req, res, next) => {
    const { session, user } = locals(res);
    const as = field(req.body, 'as');
    try {
      if (as !== 'prepared' && as !== 'reviewed') throw new ConsoleError(400, 'as: expected prepared or reviewed', 'as');
      const dispositions: Record<string, string> = {};
      for (const [k, v] of Object.entries((req.body ?? {}) as Record<string, unknown>)) {
        const m = /^disposition_(\d{1,6})$/.exec(k);
        if (m && typeof v === 'string') dispositions[m[1] as string] = v;
      }
      const run = await service.signOff(user, req.params['day'], req.params['run'], as, { note: field(req.body, 'note') ?? '', dispositions });
      session.flash = { kind: 'ok', text: `Signed as ${as === 'prepared' ? 'preparer' : 'reviewer'} of ${run.day}.` };
      res.redirect(303, consoleHref(`/console/reconciliation/${seg(run.day)}/${seg(run.run)}`));
    } catch (err) {
      next(err);
    }
  });

  // ---------------------------------------------------------------------------------------------
  // Batches, status
  // ---------------------------------------------------------------------------------------------

  router.get('/batches', async (_req, res, next) => {
    const { session, user } = locals(res);
    try {
      sendPage(res, 200, 'Batches', 'batches', batchesPage({ session, batches: await service.batches(), canAct: hasRole(user, 'operator') }), session);
    } catch (err) {
      next(err);
    }
  });

  router.get('/status', async (_req, res, next) => {
    const { session, user } = locals(res);
    try {
      sendPage(res, 200, 'Status', 'status', statusPage({ session, status: await service.status(), canAct: hasRole(user, 'operator'), locks: auth.locks(), canUnlock: hasRole(user, 'approver') }), session);
    } catch (err) {
      next(err);
    }
  });

  // An approver lifts a login lock (audited first: the service checks the role).
  router.post('/logins/unlock', async (req, res, next) => {
    const { session, user } = locals(res);
    try {
      const name = field(req.body, 'name') ?? '';
      await service.recordUnlock(user, name);
      const n = auth.unlock(name);
      session.flash = { kind: 'ok', text: `Login lock${n === 1 ? '' : 's'} of ${name} lifted (${n}).` };
      res.redirect(303, '/console/status');
    } catch (err) {
      next(err);
    }
  });

  router.use((_req, res) => sendError(res, 404, 'No such console page.'));

  // A refusal of the service keeps its status and message; anything else is our bug (500, logged).
  router.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (err instanceof ConsoleError) {
      sendError(res, err.status, err.message, err.link);
      return;
    }
    const status = (err as { status?: unknown } | null)?.status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      sendError(res, status, 'The request could not be read.');
      return;
    }
    log.error({ err, user: (res.locals as Partial<PageLocals>).user?.name ?? null }, 'console page failed');
    if (!res.headersSent) sendError(res, 500, 'Internal error (logged).');
  });
}
