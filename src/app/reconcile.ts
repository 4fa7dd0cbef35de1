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
