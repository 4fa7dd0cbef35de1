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
import { ConsoleError } from '../contract.js';
import { type Html } from './html.js';
import { layout, type NavKey } from './layout.js';
import { createSessionStore, type BrowserSession, type SessionStore } from './sessions.js';
import { pageHeaders } from './security.js';
import { CONSOLE_CSS, CONSOLE_FAVICON_SVG } from './style.js';
import { displayZone } from './format.js';
import { errorBody } from './other.js';
import type { PageContext, PageLocals } from './context.js';
import { mountSessionRoutes } from './session-routes.js';
import { mountQueueRoutes } from './queue-routes.js';
import { mountRequestRoutes } from './request-routes.js';
import { mountReportRoutes } from './report-routes.js';
import { mountStatusRoutes } from './status-routes.js';

export { isSecureRequest } from './context.js';

export interface ConsolePagesOptions {
  /** The session store (tests pass their own to move its clock); default: one per mount. */
  sessions?: SessionStore;
}

export function mountConsolePages(router: Router, deps: ConsoleDeps, opts: ConsolePagesOptions = {}): void {
  const { auth } = deps;
  const log = deps.logger.child({ component: 'console-pages' });
  const sessions =
    opts.sessions ??
    createSessionStore({ clock: deps.clock, idleMs: deps.config.sessionIdleMinutes * 60_000 });
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
      log.info(
        {
          user: who,
          method: req.method,
          path: `${req.baseUrl}${req.path}`,
          status: res.statusCode,
          ms: deps.clock.now() - started,
          client: auth.clientAddress(req),
        },
        'console page',
      );
    });
    next();
  });

  router.get('/static/favicon.svg', (_req, res) => {
    res.setHeader('Content-Type', 'image/svg+xml');
    res.setHeader('Cache-Control', 'private, max-age=86400');
    res.send(CONSOLE_FAVICON_SVG);
  });

  router.get('/static/console.css', (_req, res) => {
    res.setHeader('Content-Type', 'text/css; charset=utf-8');
    res.setHeader('Cache-Control', 'private, max-age=300');
    res.send(CONSOLE_CSS);
  });

  const sendPage = (
    res: Response,
    status: number,
    title: string,
    nav: NavKey,
    body: Html | string,
    session: BrowserSession | null,
  ): void => {
    const flash = session?.flash ?? null;
    if (session) session.flash = null;
    const pending = (res.locals as Partial<PageLocals>).pending;
    res
      .status(status)
      .type('html')
      .send(
        layout({
          title,
          session,
          nav,
          body,
          flash,
          ...(pending !== undefined ? { pending } : {}),
        }).toString(),
      );
  };

  const sendError = (res: Response, status: number, message: string, link?: string): void => {
    const l = res.locals as Partial<PageLocals>;
    sendPage(
      res,
      status,
      status === 403 ? 'Not allowed' : 'Error',
      'none',
      errorBody(status, message, link),
      l.session ?? null,
    );
  };

  const ctx: PageContext = { router, deps, sessions, form, log, sendPage, sendError };
  mountSessionRoutes(ctx);
  mountQueueRoutes(ctx);
  mountRequestRoutes(ctx);
  mountReportRoutes(ctx);
  mountStatusRoutes(ctx);

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
