/**
 * Applying an action planned earlier (ops/action-targets.ts) — a console request approved by a
 * second person — through each action's own apply: retry and skip under ops/bulk.ts's rule (the
 * loan as it was planned, chunked), a re-board per loan (ops/reboard.ts; it re-checks that the loan
 * is still acknowledged), the imaging re-export per loan (ops/imaging.ts, re-checked likewise), the
 * early seal (ops/seal.ts) and the strike clear (ops/strike-clear.ts). Plain data out: how many
 * loans were done, which failed and why, and a line of detail.
 */
import type { BatchingCapability } from '../core/port.js';
import { errorMessage } from '../lib/errors.js';
import type { BoardingStore } from '../store/index.js';
import type { TargetedAction } from './action-targets.js';
import { applyLoanAction } from './bulk.js';
import { planReexport } from './imaging.js';
import type { OpsOrigin } from './loan-plan.js';
import type { ReboardResult } from './reboard.js';
import { sealEarly } from './seal.js';
import { clearStrikes } from './strike-clear.js';

export interface PlannedAction {
  action: TargetedAction;
  /** The loans planned, with the state each was planned in (none for seal and strike clear). */
  loans: ReadonlyArray<{ id: string; fromState: string | null }>;
  /** seal: the open batch it expects (null: whichever is open). */
  batch: string | null;
  actor: string;
  reason: string;
  /** The reason a re-board's or re-export's loan event gets (the plan's reason, with where it came from). */
  loanReason: string;
  /** Where the plan came from, kept in each retried or skipped loan's event. */
  origin?: Omit<OpsOrigin, 'expectedState'>;
  signal: AbortSignal;
}

export interface PlannedActionDeps {
  store: Pick<BoardingStore, 'loans' | 'write'>;
  now: () => number;
  /** Re-boards one loan with the daemon's runtime (ops/reboard.ts reboardLoan). */
  reboard?: (loanId: string, actor: string, reason: string, signal: AbortSignal) => Promise<ReboardResult>;
  batching?: Pick<BatchingCapability, 'sealNow'>;
  /** The platform client's strike clear (forgets the ledger, in memory and stored). */
  clearStrikes?: (by: string) => number | Promise<number>;
  /** Sends one loan's documents to imaging again (ops/imaging.ts reexportLoan). */
  imagingReexport?: (
    loanId: string,
    actor: string,
    reason: string,
    signal: AbortSignal,
  ) => Promise<{ batchId: string | null; documents: string[] }>;
}

export interface PlannedResult {
  /** failed: nothing done and something failed (or the action could not run at all). */
  status: 'executed' | 'failed';
  done: number;
  failed: Array<{ loanId: string | null; message: string }>;
  detail: string | null;
}

/** Thrown when a stop (the signal) ends the apply before every loan was handled; the rest is untouched. */
export class StoppedError extends Error {
  override readonly name = 'StoppedError';
}

const outcome = (done: number, failed: PlannedResult['failed'], detail: string | null): PlannedResult => ({
  status: done === 0 && failed.length > 0 ? 'failed' : 'executed',
  done,
  failed,
  detail,
});

/** Applies a planned action; throws when this process cannot run it (no re-board runtime, no batches…). */
export async function applyPlanned(deps: PlannedActionDeps, p: PlannedAction): Promise<PlannedResult> {
  switch (p.action) {
    case 'retry':
    case 'skip': {
      const res = await applyLoanAction(
        { store: deps.store, now: deps.now },
        {
          action: p.action,
          loans: p.loans,
          actor: p.actor,
          reason: p.reason,
          ...(p.origin ? { origin: p.origin } : {}),
          signal: p.signal,
        },
      );
      if (res.stopped)
        throw new StoppedError(
          'the daemon stopped before the request finished; it runs again on the next start',
        );
      return outcome(res.done.length, res.failed, null);
    }
    case 'reboard':
      return applyReboards(deps, p);
    case 'seal': {
      if (!deps.batching) throw new Error('this core has no batches to seal');
      const sealed = await sealEarly(deps.batching, {
        reason: p.reason,
        by: p.actor,
        id: p.batch ?? undefined,
      });
      if (!sealed.ok) return outcome(0, [{ loanId: null, message: sealed.message }], null);
      return outcome(1, [], `sealed ${sealed.id}`);
    }
    case 'strike_clear': {
      const ledger = deps.clearStrikes;
      if (!ledger) throw new Error('the strike ledger is not available in this process');
      const n = await clearStrikes({ clearStrikes: ledger }, { by: p.actor, reason: p.reason });
      return outcome(n, [], `cleared ${n} strike(s)`);
    }
    case 'imaging_reexport':
      return applyReexports(deps, p);
  }
}

/** Re-boards one loan at a time: rewritten or unchanged is done; anything else is named with why. */
async function applyReboards(deps: PlannedActionDeps, p: PlannedAction): Promise<PlannedResult> {
  if (!deps.reboard) throw new Error('re-board is not available in this process');
  const outcomes: Record<string, number> = {};
  const failed: PlannedResult['failed'] = [];
  let done = 0;
  for (const { id } of p.loans) {
    if (p.signal.aborted) throw new StoppedError('the daemon stopped before the request finished');
    const res = await deps.reboard(id, p.actor, p.loanReason, p.signal);
    outcomes[res.outcome] = (outcomes[res.outcome] ?? 0) + 1;
    if (res.outcome === 'rewritten' || res.outcome === 'unchanged') done += 1;
    else
      failed.push({
        loanId: id,
        message:
          res.outcome === 'failed'
            ? res.message
            : res.outcome === 'would_quarantine'
              ? `would quarantine (${res.reason}): ${res.message}`
              : `not acknowledged (${res.state})`,
      });
  }
  const detail = Object.entries(outcomes)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  return outcome(done, failed, detail);
}

/** Re-exports one loan at a time, each still acknowledged as planned (else named, not exported). */
async function applyReexports(deps: PlannedActionDeps, p: PlannedAction): Promise<PlannedResult> {
  const reexport = deps.imagingReexport;
  if (!reexport) throw new Error('the imaging export is not on in this process (imaging.enabled)');
  const batches: string[] = [];
  const failed: PlannedResult['failed'] = [];
  let done = 0;
  let documents = 0;
  for (const { id } of p.loans) {
    if (p.signal.aborted) throw new StoppedError('the daemon stopped before the request finished');
    const now = await planReexport(deps.store.loans, id);
    if (!now.ok) {
      failed.push({ loanId: id, message: `${now.why}; not acted on` });
      continue;
    }
    try {
      const res = await reexport(id, p.actor, p.loanReason, p.signal);
      done += 1;
      documents += res.documents.length;
      if (res.batchId !== null) batches.push(res.batchId);
    } catch (err) {
      failed.push({ loanId: id, message: errorMessage(err) });
    }
  }
  const into = batches.length > 0 ? ` into ${batches.join(', ')}` : '';
  return outcome(done, failed, `${documents} document(s) re-exported${into}`);
}
