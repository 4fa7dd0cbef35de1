/**
 * `loans retry` / `loans skip` from start to end, under ops/bulk.ts's rule: select the loans, plan
 * (a dry run stops here), refuse unless every loan can be acted on, confirm (the caller's hook),
 * apply in chunks, and after a retry ask a running daemon for a cycle now. The caller parses the
 * flags, confirms on its terminal, renders the result (cli/bulk-text.ts) and turns `notDone` into
 * its exit code.
 */
import { UsageError } from '../lib/errors.js';
import type { BoardingStore } from '../store/index.js';
import {
  applyLoanAction,
  bulkTargets,
  planLoans,
  plannedLoans,
  refuseUnlessAll,
  type BulkAction,
  type BulkResult,
} from './bulk.js';
import type { OpPlan } from './loan-plan.js';
import { askDaemonForCycle } from './daemon-guard.js';

export interface BulkRunFlags {
  all?: boolean;
  reason?: string;
  quarantineReason?: string;
  since?: string;
  state?: string;
  dryRun?: boolean;
}

export interface BulkRunHooks {
  /** Who acts (asked only when something will be changed, or a skip needs a name). */
  actor: () => string;
  /** Asked before anything changes: resolves to go on, throws to stop. */
  confirm: (targets: readonly string[], action: string) => Promise<void>;
  progress?: (handled: number, total: number) => void;
  signal?: AbortSignal;
}

/** What a bulk action did, as plain data (the CLI renders it: cli/bulk-text.ts). */
export type BulkRunResult = (
  | { kind: 'dry-run'; plans: OpPlan[] }
  | { kind: 'none' }
  | {
      kind: 'done';
      result: BulkResult;
      actor: string;
      reason: string;
      total: number;
      /** After a retry that queued loans: the running daemons asked for a cycle (empty: none runs). */
      daemonPids: number[] | null;
    }
) & {
  /** Loans named but not acted on (moved since the plan, failed, or left by a stop). */
  notDone: number;
};

export async function runBulkAction(
  deps: { store: BoardingStore; now: () => number },
  action: BulkAction,
  ids: readonly string[],
  flags: BulkRunFlags,
  hooks: BulkRunHooks,
): Promise<BulkRunResult> {
  const verb = action === 'retry' ? 'retried' : 'skipped';
  const { store } = deps;
  let actor = action === 'retry' && flags.dryRun !== true ? hooks.actor() : '';
  const qReason = action === 'retry' ? flags.reason : flags.quarantineReason;
  const targets = await bulkTargets(store, action, ids, { ...flags, quarantineReason: qReason }, deps.now());
  const plans = await planLoans(store, action, targets);
  if (flags.dryRun === true) return { kind: 'dry-run', plans, notDone: 0 };
  const reason = flags.reason?.trim() ?? '';
  if (action === 'skip') {
    actor = hooks.actor();
    if (reason === '')
      throw new UsageError('loans skip: --reason must say why (it is kept in the audit log)');
  }
  if (targets.length === 0) return { kind: 'none', notDone: 0 };
  refuseUnlessAll(plans, verb);
  await hooks.confirm(
    targets,
    action === 'retry' ? `queue ${targets.length} loans again` : `skip ${targets.length} loans`,
  );
  const res = await applyLoanAction(
    { store, now: deps.now },
    {
      action,
      loans: plannedLoans(plans),
      actor,
      reason,
      ...(action === 'retry' && flags.all === true
        ? { origin: { bulk: { reason: flags.reason ?? null, since: flags.since ?? null } } }
        : {}),
      ...(hooks.signal ? { signal: hooks.signal } : {}),
      ...(hooks.progress ? { onProgress: hooks.progress } : {}),
    },
  );
  const daemonPids =
    action === 'retry' && res.done.length > 0
      ? await askDaemonForCycle(store.daemon, actor, deps.now())
      : null;
  return {
    kind: 'done',
    result: res,
    actor,
    reason,
    total: targets.length,
    daemonPids,
    notDone: res.failed.length > 0 || res.stopped ? targets.length - res.done.length : 0,
  };
}
