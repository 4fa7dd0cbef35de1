/** Login, logout, the session guard (a user on every route below it) and the same-origin + CSRF check of every POST. */
import { hasRole } from '../contract.js';
import { setConsoleUser, throttledMessage } from '../auth.js';
import { clearSessionCookie, sameOrigin, sessionCookieOf, setSessionCookie } from './security.js';
import { errorBody, loginPage } from './other.js';
import { locals, field, isSecureRequest, PENDING_SHOWN } from './context.js';
import type { PageContext } from './context.js';

/** The login routes, then the session guard, the POST check and logout: in this order (express middleware order). */
export function mountSessionRoutes(ctx: PageContext): void {
  mountLoginRoutes(ctx);
  mountSessionGuard(ctx);
}

/** The login form and its POST (before the guard: no session needed). */
function mountLoginRoutes(ctx: PageContext): void {
  const { router, sessions, form, log, sendPage, sendError } = ctx;
  const { service, auth } = ctx.deps;
  // ---------------------------------------------------------------------------------------------
  // Login and logout
  // ---------------------------------------------------------------------------------------------

  router.get('/login', (req, res) => {
    if (!auth.enabled) {
      sendPage(
        res,
        503,
        'Console off',
        'none',
        errorBody(
          503,
          'The console has no users: add console.users (hashes from `boarding-connector console passwd`) and restart.',
        ),
        null,
      );
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
        log.warn(
          { why: origin.why, client: auth.clientAddress(req) },
          'console login POST refused: not from this site',
        );
        sendError(res, 403, 'Refused: the form was not sent from this console (Origin check).');
        return;
      }
      const name = field(req.body, 'name')?.trim() ?? '';
      const password = field(req.body, 'password') ?? '';
      if (name === '' || password === '') {
        sendPage(
          res,
          400,
          'Log in',
          'none',
          loginPage({ error: 'Enter your user name and password.', name }),
          null,
        );
        return;
      }
      const outcome = await auth.verifyLogin(name, password, auth.clientAddress(req));
      if (!outcome.ok) {
        if (outcome.why === 'throttled') {
          res.setHeader('Retry-After', String(outcome.retryAfterSeconds));
          sendPage(
            res,
            429,
            'Log in',
            'none',
            loginPage({
              error: throttledMessage(outcome),
              name,
            }),
            null,
          );
        } else
          sendPage(
            res,
            401,
            'Log in',
            'none',
            loginPage({ error: 'Unknown user or wrong password.', name }),
            null,
          );
        return;
      }
      // A fresh id at every login (no session fixation); the old one, if any, ends.
      sessions.destroy(sessionCookieOf(req));
      const { id } = sessions.create(outcome.user.name, outcome.user.roles);
      setSessionCookie(res, id, isSecureRequest(req));
      locals(res).user = outcome.user;
      log.info(
        { user: outcome.user.name, roles: outcome.user.roles, client: auth.clientAddress(req) },
        'console login',
      );
      // An approver lands on what waits for them (requests another person made), others on the queue.
      const waiting = hasRole(outcome.user, 'approver')
        ? (await service.requests({ status: 'pending', limit: PENDING_SHOWN + 1 })).items.some(
            (r) => r.maker !== outcome.user.name,
          )
        : false;
      res.redirect(303, waiting ? '/console/requests?status=pending' : '/console/queue');
    } catch (err) {
      next(err);
    }
  });
}

/** The session guard (a user on every route below it), the same-origin + CSRF check of every POST, logout. */
function mountSessionGuard(ctx: PageContext): void {
  const { router, sessions, form, log, sendError } = ctx;
  const { service, auth } = ctx.deps;
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
      log.warn(
        { user: locals(res).user.name, path: req.path, why: origin.why },
        'console POST refused: not from this site',
      );
      sendError(res, 403, 'Refused: the form was not sent from this console (Origin check).');
      return;
    }
    if (!sessions.csrfMatches(locals(res).session, field(req.body, '_csrf'))) {
      log.warn(
        { user: locals(res).user.name, path: req.path },
        'console POST refused: missing or wrong CSRF token',
      );
      sendError(
        res,
        403,
        'Refused: the form is missing its security token or it has expired. Reload the page and try again.',
      );
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
}
