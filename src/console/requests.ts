/**
 * The requests page group: a new request previewed and made, decided with four eyes (approved or
 * rejected by another approver, withdrawn by its maker), and read. The daemon's executor
 * (executor.ts) applies an approved one.
 */
import { randomBytes } from 'node:crypto';
import { planTargets, type TargetsPlan } from '../ops/action-targets.js';
import type { ExceptionFilter } from '../ops/exception-filter.js';
import type { RequestRow } from '../store/console.js';
import {
  ConsoleError,
  REQUEST_ACTIONS,
  REQUEST_STATUSES,
  type ActionRequest,
  type ConsoleService,
  type ConsoleUser,
  type NewRequest,
  type RequestAction,
  type RequestStatus,
} from './contract.js';
import { decodeCursor, encodeCursor, isRequestCursor, iso, parseJson } from './paging.js';
import {
  DEFAULT_LIMIT,
  MAX_LIMIT,
  MAX_REASON,
  orRefuse,
  requireRole,
  type ServiceContext,
} from './service-context.js';

export function requestView(r: RequestRow, loans: string[] | null): ActionRequest {
  return {
    id: r.id,
    action: r.action as RequestAction,
    loans,
    filter: (parseJson(r.filter) as ExceptionFilter | null) ?? null,
    batch: r.batch,
    previewCount: r.previewCount,
    reason: r.reason,
    maker: r.maker,
    createdAt: iso(r.createdAt) as string,
    status: r.status as RequestStatus,
    decidedBy: r.decidedBy,
    decidedAt: iso(r.decidedAt),
    decisionNote: r.decisionNote,
    executedAt: iso(r.executedAt),
    result: parseJson(r.result) as ActionRequest['result'],
  };
}

/** What a new request is checked against: its targets, overlap with requests still to run, its fields. */
function requestChecks(c: ServiceContext) {
  const { deps, store, cs, tz } = c;
  /** What a request acts on (ops/action-targets.ts), or 400 naming what is wrong. */
  function resolveTargets(input: NewRequest, now: number): Promise<TargetsPlan> {
    return orRefuse(() =>
      planTargets(
        {
          store,
          exceptions: cs,
          batching: deps.batching !== undefined,
          imagingEnabled: deps.config.imaging?.enabled === true,
          now,
          timeZone: tz,
        },
        input,
      ),
    );
  }

  /** A loan in two requests still to run: the later one would end "failed"; refused now, pointing at the first. */
  async function refuseOverlap(action: RequestAction, loans: readonly string[]): Promise<void> {
    if (action === 'seal' || action === 'strike_clear') {
      const open = await cs.openRequestsOf(action);
      if (open[0] !== undefined)
        throw new ConsoleError(
          409,
          `request ${open[0]} (${action}) is still to run: approve, reject or withdraw it first`,
          'action',
          `/console/requests/${encodeURIComponent(open[0])}`,
        );
      return;
    }
    const hits = await cs.openRequestsCovering(loans, 20);
    const first = hits[0];
    if (first === undefined) return;
    const same = hits.filter((h) => h.requestId === first.requestId).map((h) => h.loanId);
    throw new ConsoleError(
      409,
      `request ${first.requestId} is still to run and already covers loan${same.length === 1 ? '' : 's'} ` +
        `${same.slice(0, 5).join(', ')}${same.length > 5 ? ', …' : ''}` +
        (hits.length > same.length ? ' (and other requests cover more)' : '') +
        ': nothing requested; wait for it, or have it withdrawn or rejected',
      'loans',
      `/console/requests/${encodeURIComponent(first.requestId)}`,
    );
  }

  function checkNew(user: ConsoleUser, input: NewRequest): void {
    requireRole(user, 'operator', 'making a request');
    if (typeof input !== 'object' || input === null)
      throw new ConsoleError(400, 'body: expected a JSON object { action, loans | filter, reason }');
    if (!(REQUEST_ACTIONS as readonly string[]).includes(input.action))
      throw new ConsoleError(400, `action: expected one of ${REQUEST_ACTIONS.join(', ')}`, 'action');
    if (typeof input.reason !== 'string' || input.reason.trim() === '')
      throw new ConsoleError(400, 'reason: required: say why (it is kept in the audit log)', 'reason');
    if (input.reason.length > MAX_REASON)
      throw new ConsoleError(400, `reason: at most ${MAX_REASON} characters`, 'reason');
    if (
      input.batch !== undefined &&
      (input.action !== 'seal' || typeof input.batch !== 'string' || input.batch === '')
    )
      throw new ConsoleError(400, 'batch: only with action seal, a batch id', 'batch');
  }

  const exempt = (action: RequestAction): boolean =>
    action === 'retry' && deps.config.console.fourEyes.exemptRetries;

  return { resolveTargets, refuseOverlap, checkNew, exempt };
}

/** A request with its loans (and their rows), or null. */
async function loadRequest(c: ServiceContext, id: string): Promise<ActionRequest | null> {
  const { cs } = c;
  const r = await cs.request(id);
  if (!r) return null;
  const loans = r.action === 'seal' || r.action === 'strike_clear' ? null : await cs.requestLoans(id);
  const view = requestView(r, loans);
  if (loans !== null) view.loanDetails = await cs.requestLoanRows(id, 500);
  return view;
}

/** Kicks the executor and waits (console.approveWaitMs at most) for it to run the request. */
async function waitForExecution(c: ServiceContext, id: string): Promise<ActionRequest> {
  const { deps } = c;
  if (deps.executor) {
    deps.executor.kick();
    await deps.executor.settled(id, deps.config.console.approveWaitMs);
  }
  return (await loadRequest(c, id)) as ActionRequest;
}

/** Requests: preview, make (four eyes, no overlap), decide, withdraw, read. */
export function requestMethods(
  c: ServiceContext,
): Pick<
  ConsoleService,
  'previewRequest' | 'createRequest' | 'approve' | 'reject' | 'withdraw' | 'request' | 'requests'
> {
  return { ...makeRequestMethods(c), ...decideRequestMethods(c), ...readRequestMethods(c) };
}

/** A new request: its preview, and making it (an exempt retry approved at once). */
function makeRequestMethods(c: ServiceContext): Pick<ConsoleService, 'previewRequest' | 'createRequest'> {
  const { cs, clock, log } = c;
  const { resolveTargets, refuseOverlap, checkNew, exempt } = requestChecks(c);

  return {
    async previewRequest(user, input) {
      checkNew(user, input);
      const t = await resolveTargets(input, clock.now());
      const ids = t.loans.map((l) => l.id);
      return {
        action: input.action,
        count: ids.length - t.refused.length,
        sample: ids.filter((l) => !t.refused.some((r) => r.loanId === l)).slice(0, 20),
        refused: t.refused,
        exempt: exempt(input.action),
      };
    },

    async createRequest(user, input) {
      checkNew(user, input);
      const now = clock.now();
      const t = await resolveTargets(input, now);
      if (t.refused.length > 0) {
        const why =
          t.refused
            .slice(0, 10)
            .map((r) => r.why)
            .join('; ') + (t.refused.length > 10 ? `; … ${t.refused.length - 10} more` : '');
        throw new ConsoleError(409, `${why}: nothing requested`, 'loans');
      }
      if (input.filter !== undefined && t.loans.length === 0)
        throw new ConsoleError(400, `filter: matches no loan that ${input.action} can take`, 'filter');
      await refuseOverlap(
        input.action,
        t.loans.map((l) => l.id),
      );
      const id = `r-${randomBytes(8).toString('hex')}`;
      const reason = input.reason.trim();
      const isExempt = exempt(input.action);
      await cs.insertRequest(
        {
          id,
          action: input.action,
          filter: t.filter ? JSON.stringify(t.filter) : null,
          batch: input.batch ?? null,
          previewCount: t.loans.length,
          reason,
          maker: user.name,
          createdAt: now,
          status: 'pending',
        },
        t.loans.map((l) => ({ id: l.id, state: l.fromState })),
        {
          at: now,
          actor: user.name,
          kind: 'request',
          action: input.action,
          requestId: id,
          reason,
          detail: {
            count: t.loans.length,
            ...(t.filter ? { filter: t.filter } : {}),
            ...(input.batch ? { batch: input.batch } : {}),
            ...(t.loans.length === 1 ? { loan: t.loans[0]?.id } : {}),
          },
        },
      );
      log.info(
        { user: user.name, requestId: id, action: input.action, count: t.loans.length },
        'console request made',
      );
      if (isExempt) {
        await cs.decide(id, 'approved', 'system', now, 'console.fourEyes.exemptRetries', {
          at: now,
          actor: 'system',
          kind: 'approve',
          action: input.action,
          requestId: id,
          reason: 'exempt from four eyes (console.fourEyes.exemptRetries)',
        });
        return waitForExecution(c, id);
      }
      return (await loadRequest(c, id)) as ActionRequest;
    },
  };
}

/** A pending request decided: approved or rejected by another approver, withdrawn by its maker. */
function decideRequestMethods(c: ServiceContext): Pick<ConsoleService, 'approve' | 'reject' | 'withdraw'> {
  const { cs, clock, log } = c;

  return {
    async approve(user, id, note) {
      const r = await cs.request(id);
      if (!r) throw new ConsoleError(404, `no request ${id}`);
      requireRole(user, 'approver', 'approving a request');
      if (r.maker === user.name)
        throw new ConsoleError(
          403,
          `four eyes: ${user.name} made request ${id} and cannot approve it; another approver must`,
        );
      if (r.status !== 'pending') throw new ConsoleError(409, `request ${id} is ${r.status}, not pending`);
      const now = clock.now();
      const ok = await cs.decide(id, 'approved', user.name, now, note?.trim() || null, {
        at: now,
        actor: user.name,
        kind: 'approve',
        action: r.action,
        requestId: id,
        reason: note?.trim() || null,
      });
      if (!ok) throw new ConsoleError(409, `request ${id} was decided by someone else meanwhile`);
      log.info(
        { user: user.name, requestId: id, action: r.action, maker: r.maker },
        'console request approved',
      );
      return waitForExecution(c, id);
    },

    async reject(user, id, note) {
      const r = await cs.request(id);
      if (!r) throw new ConsoleError(404, `no request ${id}`);
      requireRole(user, 'approver', 'rejecting a request');
      if (r.maker === user.name)
        throw new ConsoleError(
          403,
          `four eyes: ${user.name} made request ${id}; another approver decides it`,
        );
      if (typeof note !== 'string' || note.trim() === '')
        throw new ConsoleError(400, 'note: required: say why it is rejected', 'note');
      if (r.status !== 'pending') throw new ConsoleError(409, `request ${id} is ${r.status}, not pending`);
      const now = clock.now();
      const ok = await cs.decide(id, 'rejected', user.name, now, note.trim(), {
        at: now,
        actor: user.name,
        kind: 'reject',
        action: r.action,
        requestId: id,
        reason: note.trim(),
      });
      if (!ok) throw new ConsoleError(409, `request ${id} was decided by someone else meanwhile`);
      log.info({ user: user.name, requestId: id }, 'console request rejected');
      return (await loadRequest(c, id)) as ActionRequest;
    },

    async withdraw(user, id, note) {
      const r = await cs.request(id);
      if (!r) throw new ConsoleError(404, `no request ${id}`);
      if (r.maker !== user.name)
        throw new ConsoleError(
          403,
          `only its maker (${r.maker}) withdraws request ${id}; an approver rejects it`,
        );
      if (r.status !== 'pending') throw new ConsoleError(409, `request ${id} is ${r.status}, not pending`);
      const now = clock.now();
      const why = note?.trim() || null;
      const ok = await cs.decide(id, 'withdrawn', user.name, now, why, {
        at: now,
        actor: user.name,
        kind: 'withdraw',
        action: r.action,
        requestId: id,
        reason: why,
      });
      if (!ok) throw new ConsoleError(409, `request ${id} was decided meanwhile`);
      log.info({ user: user.name, requestId: id }, 'console request withdrawn by its maker');
      return (await loadRequest(c, id)) as ActionRequest;
    },
  };
}

/** One request, and a page of them. */
function readRequestMethods(c: ServiceContext): Pick<ConsoleService, 'request' | 'requests'> {
  const { cs } = c;

  return {
    request: (id) => loadRequest(c, id),

    async requests(query) {
      if (query.status !== undefined && !(REQUEST_STATUSES as readonly string[]).includes(query.status))
        throw new ConsoleError(400, `status: expected one of ${REQUEST_STATUSES.join(', ')}`, 'status');
      const limit = query.limit ?? DEFAULT_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new ConsoleError(400, `limit: expected a whole number 1–${MAX_LIMIT}`, 'limit');
      const after = query.cursor === undefined ? null : decodeCursor(query.cursor, isRequestCursor);
      const rows = await cs.requests(
        query.status ?? null,
        after === null ? null : { createdAt: after.at, id: after.id },
        limit + 1,
      );
      const page = rows.slice(0, limit);
      const tail = page[page.length - 1];
      return {
        items: page.map((r) => requestView(r, null)),
        next: rows.length > limit && tail ? encodeCursor({ at: tail.createdAt, id: tail.id }) : null,
      };
    },
  };
}
