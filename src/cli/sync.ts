import type { Command } from 'commander';
import { buildRuntime, mapperOptionsFromConfig } from '../app/runtime.js';
import { batchSealDaemonJob } from '../app/seal-job.js';
import { assertSameMappingAsDaemon } from '../editloop/daemon-guard.js';
import { fatalSentence } from '../boarding/board-loan.js';
import { accountNumbersFromConfig } from '../boarding/identity.js';
import type { CycleSummary } from '../boarding/cycle.js';
import { dryRun, formatDryRun } from '../editloop/dry-run.js';
import {
  BusyError,
  EXIT_CORE_OUTAGE,
  EXIT_WALK_INCOMPLETE,
  FatalError,
  IncompleteRunError,
  UsageError,
} from '../lib/errors.js';
import { loadMapper } from '../mapping-sets/loader.js';
import { isPlatformError } from '../platform/errors.js';
import { out, type CliContext } from './context.js';
import { followPlatformWaits, showCycleProgress } from './progress.js';
import { openPlatformSession } from '../app/session.js';

function parseMs(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0)
    throw new UsageError(
      `--settle-ms: expected a whole number of milliseconds ≥ 0, got ${JSON.stringify(v)}`,
    );
  return n;
}

function leaderText(b: NonNullable<CycleSummary['busy']>): string {
  return b.pid !== null
    ? `another connector process (pid ${b.pid} on ${b.host})`
    : `another connector process (${b.holder})`;
}

/** One-line-per-fact text summary for people; `--json` prints the CycleSummary itself. */
export function formatSummary(s: CycleSummary): string {
  if (s.busy) {
    return `${leaderText(s.busy)} leads (holds the boarding lease, epoch ${s.busy.epoch}) on this state database: nothing done`;
  }
  const q = Object.entries(s.quarantined);
  const qTotal = q.reduce((a, [, n]) => a + n, 0);
  const lines = [
    `queue: ${s.walk.items} loan(s) listed in ${s.walk.pages} page(s)${s.walk.resumed ? ' (walk resumed from checkpoint)' : ''}${s.walk.complete ? '' : ' — walk incomplete, resumes next run'}${s.walk.error ? `: ${s.walk.error}` : ''}`,
    `boarded: ${s.acknowledged}${s.ackOnly > 0 ? ` (${s.ackOnly} acknowledgement-only)` : ''} · retry later: ${s.retryWait} · quarantined: ${qTotal}${qTotal > 0 ? ` (${q.map(([r, n]) => `${r} ${n}`).join(', ')})` : ''} · ${(s.durationMs / 1000).toFixed(1)} s`,
    `states: ${
      Object.entries(s.states)
        .filter(([, n]) => n > 0)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'no loans yet'
    }`,
  ];
  for (const p of s.problems.slice(0, 20))
    lines.push(`  ${p.state} ${p.loanId} [${p.code}] ${p.message.slice(0, 200)}`);
  if (s.problems.length > 20)
    lines.push(`  … ${s.problems.length - 20} more (see \`loans list --state quarantined\`)`);
  if (s.trafficStopped)
    lines.push(
      'ALERT: all platform requests are stopped after 2 rate-limit strikes in 24 h; boarding waits (see `platform status`).',
    );
  if (s.coreOutage)
    lines.push(
      `ALERT: the core was unavailable for ${s.coreOutage.failures} loans in a row (${s.coreOutage.message}); the pass stopped, the rest wait for the next run.`,
    );
  if (s.fatal) lines.push(`FATAL: ${s.fatal.message}`);
  return lines.join('\n');
}

function parseLimit(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`--limit: expected a whole number ≥ 1, got ${JSON.stringify(v)}`);
  return n;
}

/** `sync --dry-run`: the coverage of a mapping set on the live queue; nothing is written anywhere but the rate ledger. */
async function shadowRun(
  ctx: CliContext,
  opts: { json?: boolean; dir?: string; against?: string; limit?: number },
): Promise<void> {
  const progress = ctx.progress();
  const config = ctx.config();
  const options = mapperOptionsFromConfig(config);
  const mapper = await loadMapper(opts.dir ?? config.mappings.dir, options);
  const against = opts.against !== undefined ? await loadMapper(opts.against, options) : undefined;
  // Through the state database: the walk spends from the same rate budget as a running daemon.
  const { platform, store } = await openPlatformSession(ctx);
  const logger = ctx.logger();
  const numbers = accountNumbersFromConfig(config, store, logger);
  followPlatformWaits(progress, platform);
  progress.status('dry run: walking the boarding queue');
  let report;
  try {
    report = await dryRun({
      platform,
      mapper,
      accountNumberOf: (id) => numbers.preview(id),
      ...(against ? { against } : {}),
      ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
      concurrency: config.boarding.concurrency,
      signal: ctx.shutdown,
      onProgress: (n) => {
        progress.status(`dry run: ${n}${opts.limit !== undefined ? `/${opts.limit}` : ''} loan(s) mapped`);
        if (n % 100 === 0) logger.info({ mapped: n }, 'dry run progress');
      },
    });
  } catch (err) {
    // Refused credentials are fatal (1); an unreachable or failing platform left the walk
    // incomplete (4), as for sync --once: cron alerts on both, and tells them apart.
    if (isPlatformError(err) && err.fatal) throw new FatalError(`sync --dry-run: ${err.describe()}`);
    if (isPlatformError(err))
      throw new IncompleteRunError(
        `sync --dry-run: the boarding queue walk did not complete: ${err.describe()}`,
        EXIT_WALK_INCOMPLETE,
      );
    throw err;
  }
  progress.done();
  out(ctx, opts.json === true ? JSON.stringify(report) : formatDryRun(report));
}

export function registerSyncCommands(program: Command, ctx: CliContext): void {
  program
    .command('sync')
    .description(
      'run one boarding cycle: walk the whole boarding queue, board every eligible loan, print a summary',
    )
    .option('--once', 'run a single cycle and exit (required; the daemon is `run`)')
    .option('--json', 'print the cycle summary as JSON')
    .option(
      '--settle-ms <ms>',
      'wait up to this long for short retries before exiting (default: 2 × boarding.retryBaseMs)',
      parseMs,
    )
    .option(
      '--dry-run',
      'shadow run: walk the live queue with reads only, map every loan, write and acknowledge nothing; print a coverage table',
    )
    .option('--dir <dir>', 'with --dry-run: the mapping set to try (default: mappings.dir)')
    .option(
      '--against <dir>',
      'with --dry-run: a second mapping set (the baseline); list loans whose records would change',
    )
    .option('--limit <n>', 'with --dry-run: stop after this many loans', parseLimit)
    .addHelpText(
      'after',
      '\nOn a terminal a progress line on stderr shows done/total and why a call waits (the rate budget, a\n429 pause, a retry); logs are then at warn level unless --verbose. --progress=never turns it off.',
    )
    .addHelpText(
      'after',
      '\nExit status: 0 when the cycle completed (even if some loans were quarantined or wait for a retry);\n1 on a configuration error or when the platform or the core refuses the credentials;\n2 on wrong usage or no config (--config FILE or BOARDING_CONFIG);\n3 when another connector process holds the boarding lease on this state database (nothing done);\n4 when the queue walk did not complete (platform unreachable or failing, or traffic stopped after 429 strikes);\n5 when a core outage stopped the boarding pass.\nWith --dry-run: 0 when the walk finished (whatever the verdicts), 1 on an error.',
    )
    .action(
      async (opts: {
        once?: boolean;
        json?: boolean;
        settleMs?: number;
        dryRun?: boolean;
        dir?: string;
        against?: string;
        limit?: number;
      }) => {
        if (opts.dryRun === true) {
          if (opts.once === true)
            throw new UsageError('--dry-run and --once: pick one (a dry run writes nothing)');
          await shadowRun(ctx, opts);
          return;
        }
        if (opts.dir !== undefined || opts.against !== undefined || opts.limit !== undefined)
          throw new UsageError('--dir, --against and --limit go with --dry-run');
        if (opts.once !== true)
          throw new UsageError(
            'sync runs one cycle: use `sync --once` (the long-running daemon is `run`; a shadow run is `sync --dry-run`)',
          );
        const progress = ctx.progress();
        const config = ctx.config();
        const logger = ctx.logger();
        const rt = await buildRuntime(config, logger, { clock: ctx.clock });
        ctx.onClose(() => rt.close());
        await assertSameMappingAsDaemon(
          rt.store.daemon,
          { version: rt.mapper.version, dir: config.mappings.dir },
          ctx.clock.now(),
          'sync --once',
        );
        // Shutdown: stop taking loans at once; steps in flight get boarding.shutdownTimeoutMs.
        const abort = new AbortController();
        const onShutdown = (): void => {
          ctx.clock.timeout(config.boarding.shutdownTimeoutMs, () =>
            abort.abort(new Error('shutdown timeout')),
          );
        };
        ctx.shutdown.addEventListener('abort', onShutdown, { once: true });
        followPlatformWaits(progress, rt.platform);
        progress.status('walking the boarding queue');
        // Renewed while the cycle runs (a long walk outlasts one lease); released when the runtime closes.
        await rt.leadership.start();
        const summary = await rt.runner.run({
          reason: 'sync --once',
          stop: ctx.shutdown,
          abort: abort.signal,
          settleMs: opts.settleMs ?? 2 * config.boarding.retryBaseMs,
          onProgress: (p) => showCycleProgress(progress, p),
        });
        progress.done();
        ctx.shutdown.removeEventListener('abort', onShutdown);
        // Without a daemon (sync from cron) a batch past its cut-off is sealed here, boards or not.
        const seal = batchSealDaemonJob(rt.core, logger);
        if (seal && rt.leadership.term !== null)
          await rt.leadership.guard(rt.db, () => seal.run(ctx.shutdown));
        logger.info({ cycle: { ...summary, problems: summary.problems.length } }, 'sync finished');
        out(ctx, opts.json === true ? JSON.stringify(summary) : formatSummary(summary));
        if (summary.busy)
          throw new BusyError(`${leaderText(summary.busy)} holds the boarding lease: nothing done`);
        if (summary.fatal) throw new FatalError(fatalSentence(summary.fatal.code, summary.fatal.message));
        if (summary.coreOutage) {
          throw new IncompleteRunError(
            `the core was unavailable (${summary.coreOutage.failures} loans in a row): the boarding pass stopped`,
            EXIT_CORE_OUTAGE,
          );
        }
        if (summary.trafficStopped) {
          throw new IncompleteRunError(
            'platform traffic is stopped after 2 rate-limit strikes in 24 h: nothing was boarded (see `platform status`)',
            EXIT_WALK_INCOMPLETE,
          );
        }
        if (!summary.walk.complete && !ctx.shutdown.aborted) {
          throw new IncompleteRunError(
            `the boarding queue walk did not complete${summary.walk.error ? `: ${summary.walk.error}` : ''}; it resumes on the next run`,
            EXIT_WALK_INCOMPLETE,
          );
        }
      },
    );
}
