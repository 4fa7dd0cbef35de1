/**
 * The one rule by which several loans are retried or skipped, by the CLI (`loans retry|skip`) and
 * by the console's executor alike. Before round 5 the two composed it differently; this keeps the
 * stricter half of each:
 *
 * - **Stale state**: an action applies to each loan as the operator saw it. The state a loan had
 *   when the action was planned (the CLI: its plan, shown by --dry-run and before the confirmation;
 *   the console: when the request was made) is its expected state; a loan that moved since
 *   (boarded, retried or skipped by someone else, a daemon cycle) is named in `failed` and not acted
 *   on. The CLI used to act on whatever state the loan had reached by then.
 * - **Chunking**: CHUNK loans per store transaction (one fsync for many; a crash leaves each chunk
 *   whole or absent), the event loop breathes between chunks, and a stop between chunks leaves the
 *   rest untouched (`stopped`). The CLI used one transaction per loan.
 * - **Refusal up front** stays the caller's: the CLI refuses the whole command when one loan
 *   cannot be acted on at plan time (`refusals`), the console when the request is made.
 */
import { UsageError, errorMessage } from '../lib/errors.js';
import { selectLoans, type LoanSelection } from './loan-list.js';
import { writtenForCurrentRelease } from '../pipeline/release.js';
import type { BoardingStore } from '../store/index.js';
import type { OpPlan, OpsOrigin } from './loan-plan.js';
import { planRetry, retryLoan } from './retry.js';
import { planSkip, skipLoan } from './skip.js';

/** Loans changed per transaction. */
export const CHUNK = 200;

export type BulkAction = 'retry' | 'skip';

export interface BulkDeps {
  store: Pick<BoardingStore, 'loans' | 'write'>;
  now: () => number;
}

export interface BulkInput {
  action: BulkAction;
  /** Each loan with the state it had when the action was planned (null: a request from before states were kept). */
  loans: ReadonlyArray<{ id: string; fromState: string | null }>;
  actor: string;
  /** skip: why (required); retry: unused. */
  reason?: string;
  origin?: Omit<OpsOrigin, 'expectedState'>;
  signal?: AbortSignal;
  /** After each loan, how many of the total were handled. */
  onProgress?: (handled: number, total: number) => void;
}

export interface BulkResult {
  /** Acted on; ackOnly (retry): the core holds this release, the next cycle only acknowledges it. */
  done: Array<{ loanId: string; ackOnly: boolean }>;
  failed: Array<{ loanId: string; message: string }>;
  /** The signal stopped it between chunks: the loans after `done` and `failed` were not touched. */
  stopped: boolean;
}

/** Plans one action over loans (changes nothing): each loan's state now, or why it cannot be acted on. */
export async function planLoans(
  store: Pick<BoardingStore, 'loans'>,
  action: BulkAction,
  ids: readonly string[],
): Promise<OpPlan[]> {
  const plans: OpPlan[] = [];
  for (const id of ids) plans.push(await (action === 'retry' ? planRetry : planSkip)(store.loans, id));
  return plans;
}

/** The loans of plans that can be acted on, with the state they were planned in. */
export function plannedLoans(plans: readonly OpPlan[]): Array<{ id: string; fromState: string }> {
  return plans.flatMap((p) => (p.ok ? [{ id: p.loanId, fromState: p.state }] : []));
}

/** Applies the action to planned loans under the rule above. */
export async function applyLoanAction(deps: BulkDeps, input: BulkInput): Promise<BulkResult> {
  const { store } = deps;
  const result: BulkResult = { done: [], failed: [], stopped: false };
  const total = input.loans.length;
  for (let i = 0; i < total; i += CHUNK) {
    if (input.signal?.aborted) {
      result.stopped = true;
      break;
    }
    const now = deps.now();
    await store.write(async () => {
      for (const { id, fromState } of input.loans.slice(i, i + CHUNK)) {
        const origin: OpsOrigin = { ...input.origin, expectedState: fromState };
        try {
          const row =
            input.action === 'retry'
              ? await retryLoan(store.loans, id, input.actor, now, origin)
              : await skipLoan(store.loans, id, input.reason ?? '', input.actor, now, origin);
          result.done.push({
            loanId: id,
            ackOnly: input.action === 'retry' && writtenForCurrentRelease(row),
          });
        } catch (err) {
          result.failed.push({ loanId: id, message: errorMessage(err) });
        }
        input.onProgress?.(result.done.length + result.failed.length, total);
      }
    });
    await new Promise((resolve) => setImmediate(resolve));
  }
  return result;
}

/** Several loans are changed together or not at all: the plans that refuse, and why (empty: none). */
export function refusals(plans: readonly OpPlan[]): string[] {
  return plans.flatMap((p) => (p.ok ? [] : [p.why]));
}

/** The loans a `loans retry|skip` names: ids (once each), or with `all` a selection (ops/loan-list.ts). */
export async function bulkTargets(
  store: Pick<BoardingStore, 'loans'>,
  action: BulkAction,
  ids: readonly string[],
  f: { all?: boolean | undefined } & Omit<LoanSelection, 'reasonFlag'>,
  now: number,
): Promise<string[]> {
  const name = `loans ${action}`;
  if (f.all === true) {
    if (ids.length > 0) throw new UsageError(`${name}: give loan ids or --all, not both`);
    const reasonFlag = action === 'retry' ? '--reason' : '--quarantine-reason';
    return selectLoans(store, action, { ...f, reasonFlag }, now);
  }
  if (f.quarantineReason !== undefined || f.since !== undefined || f.state !== undefined)
    throw new UsageError(
      action === 'retry'
        ? '--reason, --since and --state go with --all'
        : '--state, --quarantine-reason and --since go with --all',
    );
  if (ids.length === 0) throw new UsageError(`${name}: give loan ids or --all`);
  return [...new Set(ids)];
}

/** Several loans are changed together or not at all: one that cannot be is named, and nothing is done. */
export function refuseUnlessAll(plans: readonly OpPlan[], verb: string): void {
  const refused = refusals(plans);
  if (refused.length === 0) return;
  const more = refused.length > 10 ? `; … ${refused.length - 10} more` : '';
  const why = refused.slice(0, 10).join('; ') + more;
  throw new UsageError(plans.length > 1 ? `${why}: nothing ${verb} (see \`--dry-run\`)` : why);
}
