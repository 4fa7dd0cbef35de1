import { basename, dirname } from 'node:path';
import { reconcileWithDaemon, type ReconcileAdapters } from '../reports/daemon-job.js';
import type { ConsoleStore } from '../store/console.js';
import { refuse } from './refusal.js';
import type { ReconcileProgress } from '../reports/types.js';
import type { ReconcileRunResult } from '../reports/run.js';

/**
 * "Reconcile now": the platform (within the rate budget), the state database and the core compared
 * into report.json, report.csv and report.html — the same run as the nightly job (src/reports). The
 * CLI's `reconcile` and the console's "Run reconciliation now" call this; the result is plain data
 * (src/cli/reconcile.ts renders it).
 */
export type ReconcileNowDeps = ReconcileAdapters;
export type { ReconcileProgress, ReconcileRunResult };

export function reconcileNow(
  deps: ReconcileNowDeps,
  input: {
    since?: string | null;
    outDir?: string | undefined;
    signal?: AbortSignal;
    onProgress?: (p: ReconcileProgress) => void;
  } = {},
): Promise<ReconcileRunResult> {
  return reconcileWithDaemon(deps, input.signal, {
    since: input.since ?? null,
    ...(input.outDir !== undefined ? { outDir: input.outDir } : {}),
    ...(input.onProgress ? { onProgress: input.onProgress } : {}),
  });
}

/** `reconcile --json`: where the files are, whether the totals tie, the exceptions and totals. */
export function reconcileSummary(result: ReconcileRunResult) {
  const s = result.summary;
  return {
    runId: result.runId,
    dir: result.dir,
    files: result.files,
    latest: result.latest,
    ties: s.tieOut.every((c) => c.ties),
    exceptionCount: s.exceptionCount,
    exceptionsByReason: s.exceptionsByReason,
    totals: s.totals,
    tieOut: s.tieOut,
    notes: s.notes,
  };
}

export interface OperatorRunDeps {
  /** The run itself (reconcileNow with the daemon's adapters); resolves with the run's folder. */
  run: () => Promise<{ dir: string }>;
  audit: Pick<ConsoleStore, 'appendAudit'>;
  now: () => number;
}

/**
 * "Run reconciliation now" by an operator (the console's face): one at a time (a second one is
 * refused, naming who started the first), and audited either way: `reconcile` with the run's
 * day/run and its seconds when it wrote a run, or `run now: failed` with the error.
 * Resolves with the run's day and folder under reports.dir.
 */
export function operatorReconcileNow(
  deps: OperatorRunDeps,
): (actor: string) => Promise<{ day: string; run: string }> {
  let running: string | null = null;
  return async (actor) => {
    if (running !== null)
      refuse('conflict', `a reconciliation started by ${running} is still running: wait for it`);
    running = actor;
    const started = deps.now();
    try {
      let dir: string;
      try {
        ({ dir } = await deps.run());
      } catch (err) {
        await deps.audit.appendAudit({
          at: deps.now(),
          actor,
          kind: 'reconcile',
          action: 'reconcile',
          reason: 'run now: failed',
          detail: { error: (err as Error).message?.slice(0, 500) ?? String(err) },
        });
        throw err;
      }
      const run = basename(dir);
      const day = basename(dirname(dir));
      await deps.audit.appendAudit({
        at: deps.now(),
        actor,
        kind: 'reconcile',
        action: 'reconcile',
        reason: `run now: ${day}/${run}`,
        detail: { day, run, seconds: Math.round((deps.now() - started) / 1000) },
      });
      return { day, run };
    } finally {
      running = null;
    }
  };
}
