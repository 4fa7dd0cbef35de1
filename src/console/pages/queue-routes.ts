/** The exception queue, its search (kept in the session) and the loan page. */
import { ConsoleError, hasRole, type ReboardDiff, type RequestPreview } from '../contract.js';
import {
  QUEUE_KEYS,
  QueueParamError,
  filterOf,
  queryOf,
  queueHref,
  queuePage,
  type QueueParams,
} from './queue.js';
import { loanPage } from './loan.js';
import { locals, field } from './context.js';
import type { PageContext } from './context.js';

/** The queue's parameters from a query or a form (prefixed in the bulk request form). */
export const queueParams = (source: unknown, prefix = ''): QueueParams => {
  const p: QueueParams = {};
  for (const k of [...QUEUE_KEYS, 'cursor'] as const) {
    const v = field(source, `${prefix}${k}`)?.trim();
    if (v) p[k] = v.slice(0, 200);
  }
  return p;
};

export function mountQueueRoutes(ctx: PageContext): void {
  const { router, sendPage, sendError } = ctx;
  const { service } = ctx.deps;
  // ---------------------------------------------------------------------------------------------
  // Exception queue
  // ---------------------------------------------------------------------------------------------

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
      const [page, counts, retry, skip] = await Promise.all([
        service.exceptions(query),
        service.exceptionCounts(filter),
        canAct ? preview('retry') : null,
        canAct ? preview('skip') : null,
      ]);
      sendPage(
        res,
        200,
        'Exception queue',
        'queue',
        queuePage({
          session,
          params,
          page,
          counts,
          preview: canAct ? { retry, skip } : null,
          canAct,
          products: [],
          versions: [],
        }),
        session,
      );
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
    session.search =
      field(req.body, 'clear') === '1' ? '' : (field(req.body, 'q') ?? '').trim().slice(0, 200);
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
          if (err instanceof ConsoleError && err.status !== 404)
            return {
              loanId: id,
              outcome: 'unavailable',
              mappingVersion: null,
              previousVersion: null,
              changes: [],
              message: err.message,
            };
          throw err;
        }
      };
      const [diff, audit] = await Promise.all([check(), service.audit({ loan: id, limit: 50 })]);
      sendPage(
        res,
        200,
        `Loan ${id}`,
        'queue',
        loanPage({ session, history, diff, audit: audit.items, canAct: hasRole(user, 'operator') }),
        session,
      );
    } catch (err) {
      next(err);
    }
  });
}
