import type { DaemonJob } from '../scheduler/daemon.js';
import type { Config } from '../config/schema.js';
import type { CoreSystem } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { PlatformApi } from '../platform/api.js';
import type { ReportReads } from '../store/index.js';
import { CONNECTOR_VERSION } from '../version.js';
import { runReconcile, type ReconcileRunResult, type RunReconcileDeps } from './run.js';

export interface ReconcileAdapters {
  config: Config;
  platform: PlatformApi;
  reads: ReportReads;
  core: CoreSystem;
  logger: Logger;
  clock: Clock;
}

/**
 * The nightly reconcile inside `run` (schedule.reconcile, in the bank's time zone), over the
 * daemon's own platform client, state database and core.
 */
export function reconcileDaemonJob(a: ReconcileAdapters): DaemonJob {
  return {
    name: 'reconcile',
    schedule: a.config.schedule.reconcile,
    timeZone: a.config.bank.timeZone,
    async run(signal) {
      await reconcileWithDaemon(a, signal);
    },
  };
}

/** What one run may be asked for beyond its adapters (the CLI's --since and --out, its progress bar). */
export type ReconcileRunOptions = Pick<RunReconcileDeps, 'since' | 'outDir' | 'onProgress'>;

/**
 * One reconciliation over a platform client, state database and core: the nightly job, and through
 * src/ops/reconcile.ts the CLI's `reconcile` and the console's "Run reconciliation now".
 */
export function reconcileWithDaemon(
  a: ReconcileAdapters,
  signal?: AbortSignal,
  options: ReconcileRunOptions = {},
): Promise<ReconcileRunResult> {
  return runReconcile({
    ...options,
    config: a.config,
    platform: a.platform,
    reads: a.reads,
    core: a.core,
    logger: a.logger.child({ component: 'reconcile' }),
    clock: a.clock,
    connectorVersion: CONNECTOR_VERSION,
    ...(signal ? { signal } : {}),
  });
}
