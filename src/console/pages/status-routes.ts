/** Batches, status, and an approver lifting a login lock. */
import { hasRole } from '../contract.js';
import { batchesPage, statusPage } from './other.js';
import { locals, field } from './context.js';
import type { PageContext } from './context.js';

export function mountStatusRoutes(ctx: PageContext): void {
  const { router, sendPage } = ctx;
  const { service, auth } = ctx.deps;
  // ---------------------------------------------------------------------------------------------
  // Batches, status
  // ---------------------------------------------------------------------------------------------

  router.get('/batches', async (_req, res, next) => {
    const { session, user } = locals(res);
    try {
      sendPage(
        res,
        200,
        'Batches',
        'batches',
        batchesPage({ session, batches: await service.batches(), canAct: hasRole(user, 'operator') }),
        session,
      );
    } catch (err) {
      next(err);
    }
  });

  router.get('/status', async (_req, res, next) => {
    const { session, user } = locals(res);
    try {
      sendPage(
        res,
        200,
        'Status',
        'status',
        statusPage({
          session,
          status: await service.status(),
          canAct: hasRole(user, 'operator'),
          locks: auth.locks(),
          canUnlock: hasRole(user, 'approver'),
        }),
        session,
      );
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
}
