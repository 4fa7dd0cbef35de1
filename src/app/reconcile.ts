import type { ProgressLine } from '../lib/terminal.js';
import { createProgressBar } from '../reports/progress.js';
import { runReconcile, type ReconcileRunResult } from '../reports/run.js';
import type { PlatformApi } from '../platform/api.js';
import { CONNECTOR_VERSION } from '../version.js';
import { openCore, openPlatformSession, type CommandScope } from './session.js';

export type { ReconcileRunResult };

/**
 * `reconcile`: the platform (within the rate budget), the state database and the core, compared
 * into report.json, report.csv and report.html; a progress bar on the command's progress line.
 */
export async function reconcileOnce(
  scope: CommandScope & { readonly stderr: NodeJS.WritableStream; readonly shutdown: AbortSignal },
  input: {
    since: string | null;
    outDir?: string | undefined;
    line: ProgressLine;
    /** Called with the platform client before the first call (the CLI shows its waits). */
    onPlatform?: (platform: Pick<PlatformApi, 'onWait'>) => void;
  },
): Promise<ReconcileRunResult> {
  const config = scope.config();
  const logger = scope.logger();
  const { db, store, platform } = await openPlatformSession(scope);
  input.onPlatform?.(platform);
  // The state database maps the digests Fineract lists back to platform ids.
  const core = openCore(scope, db);
  const bar = createProgressBar(scope.stderr, scope.clock, { line: input.line });
  try {
    return await runReconcile({
      config,
      platform,
      reads: store.reports,
      core,
      logger: logger.child({ component: 'reconcile' }),
      clock: scope.clock,
      connectorVersion: CONNECTOR_VERSION,
      since: input.since,
      ...(input.outDir !== undefined ? { outDir: input.outDir } : {}),
      signal: scope.shutdown,
      onProgress: (p) => bar.update(p),
    });
  } finally {
    bar.done();
  }
}

/** Plain-text result for people: where the files are and whether the totals tie. */
export function reconcileText(r: ReconcileRunResult): string {
  const s = r.summary;
  const lines = [
    `reconciliation ${r.runId} as of ${s.header.asOfLocal}`,
    ...s.tieOut.map(
      (c) =>
        `  ${c.ties ? 'ties         ' : 'DOES NOT TIE '} ${c.title}: ${c.left.label} ${c.left.count} vs ` +
        `${c.right.label} ${c.right.count}` +
        (c.ties ? '' : ` (difference ${c.differenceCount} loans, ${c.differenceCents} cents)`),
    ),
    `  exceptions: ${s.exceptionCount}${
      s.exceptionCount > 0
        ? ` (${Object.entries(s.exceptionsByReason)
            .map(([k, n]) => `${k} ${n}`)
            .join(', ')})`
        : ''
    }`,
    ...s.notes.map((n) => `  note: ${n}`),
    `  ${r.files.html}`,
    `  ${r.files.csv}`,
    `  ${r.files.json}`,
  ];
  if (r.latest) lines.push(`  latest: ${r.latest}`);
  return lines.join('\n');
}

/** `reconcile --json`: where the files are, whether the totals tie, the exceptions and totals. */
export function reconcileJson(result: ReconcileRunResult) {
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
