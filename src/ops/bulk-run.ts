/**
 * `loans retry` / `loans skip` from start to end, under ops/bulk.ts's rule: select the loans, plan
 * (a dry run stops here), refuse unless every loan can be acted on, confirm (the caller's hook),
 * apply in chunks, and after a retry ask a running daemon for a cycle now. The caller parses the
 * flags, confirms on its terminal, prints `lines` and turns `notDone` into its exit code.
 */
import { UsageError } from '../lib/errors.js';
import type { BoardingStore } from '../store/index.js';
import {
  applyLoanAction,
  bulkResultText,
  bulkTargets,
  planLoans,
  plannedLoans,
  plansText,
  refuseUnlessAll,
  type BulkAction,
} from './bulk.js';
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

export interface BulkRunResult {
  lines: string[];
  /** Loans named but not acted on (moved since the plan, failed, or left by a stop). */
  notDone: number;
}

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
  if (flags.dryRun === true) return { lines: [plansText(plans, action)], notDone: 0 };
  const reason = flags.reason?.trim() ?? '';
  if (action === 'skip') {
    actor = hooks.actor();
    if (reason === '')
      throw new UsageError('loans skip: --reason must say why (it is kept in the audit log)');
  }
  if (targets.length === 0) return { lines: [`no loans match: nothing ${verb}`], notDone: 0 };
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
  const lines: string[] = [];
  const text = bulkResultText(action, res, { actor, reason, total: targets.length });
  if (text !== '') lines.push(text);
  if (action === 'retry' && res.done.length > 0) {
    const pids = await askDaemonForCycle(store.daemon, actor, deps.now());
    lines.push(
      pids.length > 0
        ? `asked the running daemon (pid ${pids.join(', ')}) for a cycle now`
        : 'no daemon is running: board them with `sync --once` (or start `run`)',
    );
  }
  return { lines, notDone: res.failed.length > 0 || res.stopped ? targets.length - res.done.length : 0 };
}
