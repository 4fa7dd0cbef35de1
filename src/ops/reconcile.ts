import { reconcileWithDaemon, type ReconcileAdapters } from '../reports/daemon-job.js';
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
