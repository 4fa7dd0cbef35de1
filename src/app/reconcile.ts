import type { ProgressLine } from '../lib/terminal.js';
import { createProgressBar } from '../reports/progress.js';
import type { PlatformApi } from '../platform/api.js';
import { reconcileNow, type ReconcileRunResult } from '../ops/reconcile.js';
import { openCore, openPlatformSession, type CommandScope } from './session.js';

/**
 * What `reconcile` runs with: a platform session (the shared rate budget), the core, and a progress
 * bar on the command's progress line; the run itself is src/ops/reconcile.ts reconcileNow.
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
    return await reconcileNow(
      { config, platform, reads: store.reports, core, logger, clock: scope.clock },
      {
        since: input.since,
        outDir: input.outDir,
        signal: scope.shutdown,
        onProgress: (p) => bar.update(p),
      },
    );
  } finally {
    bar.done();
  }
}
