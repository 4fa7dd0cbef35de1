/**
 * Requests: made from the queue, the loan page and the batches page; listed; decided (approve, reject) or
 * withdrawn by their maker.
 */
import {
  ConsoleError,
  REQUEST_ACTIONS,
  REQUEST_STATUSES,
  type NewRequest,
  type RequestAction,
  type RequestStatus,
} from '../contract.js';
import { consoleHref, seg } from './html.js';
import { BULK_FILTER_PREFIX, FILTER_KEYS, QueueParamError, filterOf, type QueueParams } from './queue.js';
import { requestPage, requestsPage } from './requests.js';
import { locals, field, fieldList } from './context.js';
import { queueParams } from './queue-routes.js';
import type { PageContext } from './context.js';

export function mountRequestRoutes(ctx: PageContext): void {
  const { router, sendPage, sendError } = ctx;
  const { service } = ctx.deps;
  // ---------------------------------------------------------------------------------------------
  // Requests
  // ---------------------------------------------------------------------------------------------

  router.post('/requests', async (req, res, next) => {
    const { session, user } = locals(res);
    try {
      const action = field(req.body, 'action') ?? '';
      if (!(REQUEST_ACTIONS as readonly string[]).includes(action))
        throw new ConsoleError(400, `action: expected one of ${REQUEST_ACTIONS.join(', ')}`, 'action');
      const input: NewRequest = {
        action: action as RequestAction,
        reason: (field(req.body, 'reason') ?? '').trim(),
      };
      const loans = fieldList(req.body, 'loans');
      if (field(req.body, 'by') === 'filter') {
        // The filter's own keys only (sort and paging are not part of what the request covers).
        const params = queueParams(req.body, BULK_FILTER_PREFIX);
        for (const k of Object.keys(params))
          if (!(FILTER_KEYS as readonly string[]).includes(k)) delete params[k as keyof QueueParams];
        input.filter = filterOf(params, session.search);
      } else if (loans !== undefined) {
        input.loans = loans.filter((x) => x !== '');
      }
      const batch = field(req.body, 'batch');
      if (batch) input.batch = batch;
      const made = await service.createRequest(user, input);
      session.flash = {
        kind: 'ok',
        text:
          made.status === 'pending'
            ? `Request ${made.id} (${made.action}, ${made.previewCount} ` +
              `loan${made.previewCount === 1 ? '' : 's'}) is waiting for an approver.`
            : `Request ${made.id} (${made.action}) is ${made.status}.`,
      };
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
      if (status !== undefined && status !== '' && !(REQUEST_STATUSES as readonly string[]).includes(status))
        throw new ConsoleError(400, `status: expected one of ${REQUEST_STATUSES.join(', ')}`);
      const st = status ? (status as RequestStatus) : undefined;
      const page = await service.requests({
        ...(st ? { status: st } : {}),
        ...(cursor ? { cursor } : {}),
        limit: 50,
      });
      sendPage(
        res,
        200,
        'Requests',
        'requests',
        requestsPage({ session, user, status: st, page, cursor }),
        session,
      );
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
      sendPage(
        res,
        200,
        `Request ${request.id}`,
        'requests',
        requestPage({ session, user, request }),
        session,
      );
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
      session.flash = {
        kind: r.status === 'failed' || r.status === 'rejected' ? 'error' : 'ok',
        text:
          `Request ${r.id} ${r.status}` +
          (r.result
            ? `: ${r.result.done} done` +
              (r.result.failed.length > 0 ? `, ${r.result.failed.length} failed` : '')
            : '') +
          '.',
      };
      res.redirect(303, consoleHref(`/console/requests/${seg(r.id)}`));
    } catch (err) {
      next(err);
    }
  });
}
