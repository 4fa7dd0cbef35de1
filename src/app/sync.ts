import { EXIT_WALK_INCOMPLETE, FatalError, IncompleteRunError } from '../lib/errors.js';
import type { ProgressLine } from '../lib/terminal.js';
import { loadMapper } from '../mapping-sets/loader.js';
import { isPlatformError } from '../platform/errors.js';
import { dispositionOf } from '../pipeline/failures.js';
import type { PlatformApi } from '../platform/api.js';
import { accountNumbersFromConfig } from '../identity/account-numbers.js';
import type { CycleProgress, CycleSummary } from '../pipeline/cycle.js';
import { assertSameMappingAsDaemon } from '../ops/daemon-guard.js';
import { dryRun, type DryRunReport } from '../ops/dry-run.js';
import { batchSealDaemonJob } from './seal-job.js';
import { imagingSealDaemonJob } from './imaging.js';
import { buildRuntime, mapperOptionsFromConfig } from './runtime.js';
import { openPlatformSession, type CommandScope } from './session.js';

type SyncScope = CommandScope & {
  readonly shutdown: AbortSignal;
  readonly env?: Readonly<Record<string, string | undefined>>;
};

/**
 * `sync --once`: one boarding cycle with the runtime of the config, beside (never against) a
 * running daemon's mapping version; a batch past its cut-off is sealed after it (sync from cron
 * has no daemon to do it).
 */
export async function syncOnce(
  scope: SyncScope,
  input: {
    settleMs: number | undefined;
    onPlatform?: (platform: Pick<PlatformApi, 'onWait'>) => void;
    onStart?: () => void;
    onProgress?: (p: CycleProgress) => void;
  },
): Promise<CycleSummary> {
  const config = scope.config();
  const logger = scope.logger();
  const rt = await buildRuntime(config, logger, {
    clock: scope.clock,
    ...(scope.env ? { env: scope.env } : {}),
  });
  scope.onClose(() => rt.close());
  const mine = { version: rt.mapper.version, dir: config.mappings.dir };
  await assertSameMappingAsDaemon(rt.store.daemon, mine, scope.clock.now(), 'sync --once');
  // Shutdown: stop taking loans at once; steps in flight get boarding.shutdownTimeoutMs.
  const abort = new AbortController();
  const onShutdown = (): void => {
    scope.clock.timeout(config.boarding.shutdownTimeoutMs, () => abort.abort(new Error('shutdown timeout')));
  };
  scope.shutdown.addEventListener('abort', onShutdown, { once: true });
  input.onPlatform?.(rt.platform);
  input.onStart?.();
  // Renewed while the cycle runs (a long walk outlasts one lease); released when the runtime closes.
  await rt.leadership.start();
  const summary = await rt.runner.run({
    reason: 'sync --once',
    stop: scope.shutdown,
    abort: abort.signal,
    settleMs: input.settleMs ?? 2 * config.boarding.retryBaseMs,
    ...(input.onProgress ? { onProgress: input.onProgress } : {}),
  });
  scope.shutdown.removeEventListener('abort', onShutdown);
  // Without a daemon (sync from cron) a batch past its cut-off is sealed here, boards or not.
  const seal = batchSealDaemonJob(rt.core, logger);
  if (seal && rt.leadership.term !== null) await rt.leadership.guard(rt.db, () => seal.run(scope.shutdown));
  const imagingSeal = imagingSealDaemonJob(rt.imaging, logger);
  if (imagingSeal && rt.leadership.term !== null)
    await rt.leadership.guard(rt.db, () => imagingSeal.run(scope.shutdown));
  logger.info({ cycle: { ...summary, problems: summary.problems.length } }, 'sync finished');
  return summary;
}

/**
 * `sync --dry-run`: the coverage of a mapping set on the live queue; nothing is written anywhere but the rate
 * ledger.
 */
export async function shadowRun(
  scope: SyncScope,
  opts: { dir?: string | undefined; against?: string | undefined; limit?: number | undefined },
  progress: ProgressLine,
  onPlatform?: (platform: Pick<PlatformApi, 'onWait'>) => void,
): Promise<DryRunReport> {
  const config = scope.config();
  const options = mapperOptionsFromConfig(config);
  const mapper = await loadMapper(opts.dir ?? config.mappings.dir, options);
  const against = opts.against !== undefined ? await loadMapper(opts.against, options) : undefined;
  // Through the state database: the walk spends from the same rate budget as a running daemon.
  const { platform, store } = await openPlatformSession(scope);
  const logger = scope.logger();
  const numbers = accountNumbersFromConfig(config, store, logger);
  onPlatform?.(platform);
  progress.status('dry run: walking the boarding queue');
  try {
    return await dryRun({
      platform,
      mapper,
      accountNumberOf: (id) => numbers.preview(id),
      ...(against ? { against } : {}),
      ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
      concurrency: config.boarding.concurrency,
      signal: scope.shutdown,
      onProgress: (n) => {
        progress.status(`dry run: ${n}${opts.limit !== undefined ? `/${opts.limit}` : ''} loan(s) mapped`);
        if (n % 100 === 0) logger.info({ mapped: n }, 'dry run progress');
      },
    });
  } catch (err) {
    // Refused credentials are fatal (1); an unreachable or failing platform (traffic stopped after
    // strikes included) left the walk incomplete (4), as for sync --once: cron alerts on both, and
    // tells them apart.
    if (isPlatformError(err) && dispositionOf(err) === 'fatal')
      throw new FatalError(`sync --dry-run: ${err.describe()}`);
    if (isPlatformError(err))
      throw new IncompleteRunError(
        `sync --dry-run: the boarding queue walk did not complete: ${err.describe()}`,
        EXIT_WALK_INCOMPLETE,
      );
    throw err;
  }
}
