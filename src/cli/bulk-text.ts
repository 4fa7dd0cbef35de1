/**
 * The text of `loans retry` / `loans skip` (ops/bulk-run.ts returns plain data; the CLI renders it).
 */
import type { BulkAction, BulkResult } from '../ops/bulk.js';
import type { OpPlan } from '../ops/loan-plan.js';
import type { BulkRunResult } from '../ops/bulk-run.js';

const ACK_ONLY = ' (the core already holds this release: the next cycle only acknowledges it)';
const VERB: Record<BulkAction, string> = { retry: 'retried', skip: 'skipped' };

/** The --dry-run listing of `loans retry` / `loans skip`. */
function plansText(plans: readonly OpPlan[], action: BulkAction): string {
  const verb = VERB[action];
  const would = (p: Extract<OpPlan, { ok: true }>): string =>
    action === 'skip' ? 'would be skipped' : p.ackOnly ? `would be queued${ACK_ONLY}` : 'would be queued';
  const lines = ['dry run: nothing changed'];
  for (const p of plans) {
    if (!p.ok) lines.push(`loan ${p.loanId}: cannot be ${verb}: ${p.why}`);
    else {
      const reason = p.quarantineReason ? ` (${p.quarantineReason})` : '';
      lines.push(
        `loan ${p.loanId}${p.loanNumber ? ` (${p.loanNumber})` : ''} ${p.state}${reason}: ${would(p)}`,
      );
    }
  }
  const ok = plans.filter((p) => p.ok).length;
  const cannot =
    ok < plans.length ? `, ${plans.length - ok} cannot be (the command would refuse them all)` : '';
  lines.push(plans.length === 0 ? 'no loans match' : `${ok} loan(s) would be ${verb}${cannot}`);
  return lines.join('\n');
}

/** What was done: one line a loan up to 20, else one in all; the loans that moved since the plan, named. */
function bulkResultText(
  action: BulkAction,
  res: BulkResult,
  o: { actor: string; reason: string; total: number },
): string {
  const lines: string[] = [];
  for (const r of o.total <= 20 ? res.done : []) {
    if (action === 'skip') lines.push(`loan ${r.loanId} skipped by ${o.actor}: ${o.reason}`);
    else lines.push(`loan ${r.loanId} queued by ${o.actor}${r.ackOnly ? ACK_ONLY : ''}`);
  }
  const ackOnly = res.done.filter((r) => r.ackOnly).length;
  const only = ackOnly > 0 ? ` (${ackOnly} only need their acknowledgement)` : '';
  if (o.total > 20)
    lines.push(
      action === 'skip'
        ? `${res.done.length} loans skipped by ${o.actor}: ${o.reason}`
        : `${res.done.length} loans queued by ${o.actor}${only}`,
    );
  for (const f of res.failed) lines.push(`loan ${f.loanId}: not ${VERB[action]}: ${f.message}`);
  return lines.join('\n');
}

/** The lines `loans retry|skip` prints for what ops/bulk-run.ts did (or would do). */
export function bulkRunLines(action: BulkAction, r: BulkRunResult): string[] {
  if (r.kind === 'dry-run') return [plansText(r.plans, action)];
  if (r.kind === 'none') return [`no loans match: nothing ${VERB[action]}`];
  const lines: string[] = [];
  const text = bulkResultText(action, r.result, { actor: r.actor, reason: r.reason, total: r.total });
  if (text !== '') lines.push(text);
  if (r.daemonPids !== null)
    lines.push(
      r.daemonPids.length > 0
        ? `asked the running daemon (pid ${r.daemonPids.join(', ')}) for a cycle now`
        : 'no daemon is running: board them with `sync --once` (or start `run`)',
    );
  return lines;
}
