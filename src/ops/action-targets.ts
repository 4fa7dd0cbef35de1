/**
 * What an operator action acts on, planned before anything changes (the console's request, made now
 * and applied on approval): the loans named, each checked by its action's own plan (ops/retry.ts,
 * ops/skip.ts, ops/reboard.ts, ops/imaging.ts), or the loans an exception filter selects for the
 * action; seal and strike clear act on no loan. Each loan keeps the state it was planned in: the
 * apply acts only on a loan still in it (ops/bulk.ts, OpsOrigin.expectedState).
 */
import type { ConsoleStore } from '../store/console.js';
import type { BoardingStore } from '../store/index.js';
import { checkExceptionFilter, sqlFilter, type ExceptionFilter } from './exception-filter.js';
import { planReexport } from './imaging.js';
import type { OpPlan } from './loan-plan.js';
import { planReboard } from './reboard.js';
import { RefusedError, refuse } from './refusal.js';
import { planRetry } from './retry.js';
import { planSkip } from './skip.js';

/** An action covers at most this many loans (narrow the filter beyond). */
export const MAX_ACTION_LOANS = 100_000;

export type TargetedAction = 'retry' | 'skip' | 'reboard' | 'seal' | 'strike_clear' | 'imaging_reexport';
type LoanAction = Exclude<TargetedAction, 'seal' | 'strike_clear'>;

export interface TargetsInput {
  action: TargetedAction;
  /** Loan ids as given (checked here: a non-empty list of ids). */
  loans?: unknown;
  /** An exception filter as given (checked here: ops/exception-filter.ts). */
  filter?: unknown;
}

export interface TargetsDeps {
  store: Pick<BoardingStore, 'loans'>;
  /** The exception queue's ids by filter (store/console.ts). */
  exceptions: Pick<ConsoleStore, 'exceptionIds'>;
  /** What this process can do: the file core's batches (seal), the imaging export (re-export). */
  batching: boolean;
  imagingEnabled: boolean;
  now: number;
  timeZone: string;
}

export interface TargetsPlan {
  /** The loans it would act on, each with the state it was planned in (null: not found). */
  loans: Array<{ id: string; fromState: string | null }>;
  /** The filter it selected by (null: loans named, or none). */
  filter: ExceptionFilter | null;
  /** Loans named that the action cannot take now, with why. */
  refused: Array<{ loanId: string; why: string }>;
}

const PLAN: Record<LoanAction, (loans: BoardingStore['loans'], id: string) => Promise<OpPlan>> = {
  retry: planRetry,
  skip: planSkip,
  reboard: planReboard,
  imaging_reexport: planReexport,
};

/** Plans what `input.action` acts on; throws a RefusedError (ops/refusal.ts) naming the field when it cannot. */
export async function planTargets(deps: TargetsDeps, input: TargetsInput): Promise<TargetsPlan> {
  const action = input.action;
  if (action === 'seal' || action === 'strike_clear') {
    if (input.loans !== undefined || input.filter !== undefined)
      refuse('invalid', `${action} takes no loans or filter`, input.loans !== undefined ? 'loans' : 'filter');
    if (action === 'seal' && !deps.batching)
      refuse(
        'invalid',
        'action: seal needs the file core with batches (core.adapter file, a layout.yaml and core.file.csvBatches)',
        'action',
      );
    return { loans: [], filter: null, refused: [] };
  }
  if (action === 'imaging_reexport') {
    if (!deps.imagingEnabled)
      refuse('invalid', 'action: imaging_reexport needs the imaging export (imaging.enabled)', 'action');
    if (input.filter !== undefined)
      refuse('invalid', 'imaging_reexport: give "loans" (a list of ids), not a filter', 'filter');
  }
  if ((input.loans === undefined) === (input.filter === undefined))
    refuse('invalid', `${action}: give "loans" (a list of ids) or "filter" (one of them)`, 'loans');
  if (input.loans !== undefined) return planNamed(deps, action, input.loans);
  const filter = checkExceptionFilter(input.filter);
  if ('ok' in filter) throw new RefusedError(filter);
  // imaging_reexport with a filter was refused above.
  return planFiltered(deps, action as 'retry' | 'skip' | 'reboard', filter);
}

async function planNamed(deps: TargetsDeps, action: LoanAction, given: unknown): Promise<TargetsPlan> {
  if (!Array.isArray(given) || given.length === 0 || given.some((l) => typeof l !== 'string' || l === ''))
    refuse('invalid', 'loans: expected a non-empty list of loan ids', 'loans');
  const ids = [...new Set(given as string[])];
  if (ids.length > MAX_ACTION_LOANS)
    refuse('invalid', `loans: at most ${MAX_ACTION_LOANS} per request`, 'loans');
  const loans: TargetsPlan['loans'] = [];
  const refused: TargetsPlan['refused'] = [];
  for (const id of ids) {
    const p = await PLAN[action](deps.store.loans, id);
    loans.push({ id, fromState: p.state });
    if (!p.ok) refused.push({ loanId: id, why: p.why });
  }
  return { loans, filter: null, refused };
}

/** By filter: retry and skip take quarantined exceptions, a re-board the acknowledged ones with review items. */
async function planFiltered(
  deps: TargetsDeps,
  action: 'retry' | 'skip' | 'reboard',
  filter: ExceptionFilter,
): Promise<TargetsPlan> {
  const sql = sqlFilter(filter, deps.now, deps.timeZone);
  if (action === 'reboard') {
    if (filter.state === 'quarantined')
      refuse(
        'invalid',
        'filter.state: reboard takes loans boarded with review items (state review); retry quarantined loans',
        'filter.state',
      );
    sql.state = 'review';
  } else {
    if (filter.state === 'review')
      refuse(
        'invalid',
        `filter.state: ${action} takes quarantined loans; boarded loans with review items are re-boarded`,
        'filter.state',
      );
    sql.state = 'quarantined';
  }
  const ids = await deps.exceptions.exceptionIds(sql, MAX_ACTION_LOANS + 1);
  // The query selected quarantined loans for retry and skip; review items are kept on written loans too.
  const loans: TargetsPlan['loans'] = [];
  if (action !== 'reboard') for (const id of ids) loans.push({ id, fromState: 'quarantined' });
  else
    for (const id of ids)
      if ((await deps.store.loans.get(id))?.state === 'acknowledged')
        loans.push({ id, fromState: 'acknowledged' });
  if (loans.length > MAX_ACTION_LOANS)
    refuse('invalid', `filter: matches more than ${MAX_ACTION_LOANS} loans; narrow it`, 'filter');
  return { loans, filter, refused: [] };
}
