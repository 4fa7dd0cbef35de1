import type { Command } from 'commander';
import { assertCycleCompleted, cycleSummaryText, formatDryRun, shadowRun, syncOnce } from '../app/sync.js';
import { UsageError } from '../lib/errors.js';
import { out, type CliContext } from './context.js';
import { followPlatformWaits, showCycleProgress } from './progress.js';

function parseMs(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0)
    throw new UsageError(
      `--settle-ms: expected a whole number of milliseconds ≥ 0, got ${JSON.stringify(v)}`,
    );
  return n;
}

function parseLimit(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`--limit: expected a whole number ≥ 1, got ${JSON.stringify(v)}`);
  return n;
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
      'shadow run: walk the live queue with reads only, map every ' +
        'loan, write and acknowledge nothing; print a coverage table',
    )
    .option('--dir <dir>', 'with --dry-run: the mapping set to try (default: mappings.dir)')
    .option(
      '--against <dir>',
      'with --dry-run: a second mapping set (the baseline); list loans whose records would change',
    )
    .option('--limit <n>', 'with --dry-run: stop after this many loans', parseLimit)
    .addHelpText(
      'after',
      '\nOn a terminal a progress line on stderr shows done/total and why a call waits (the rate budget, a\n' +
        '429 pause, a retry); logs are then at warn level unless --verbose. --progress=never turns it off.',
    )
    .addHelpText(
      'after',
      '\nExit status: 0 when the cycle completed (even if some loans were quarantined or wait for a retry);\n' +
        '1 on a configuration error or when the platform or the core refuses the credentials;\n' +
        '2 on wrong usage or no config (--config FILE or BOARDING_CONFIG);\n' +
        '3 when another connector process holds the boarding lease on this state database (nothing done);\n' +
        '4 when the queue walk did not complete (platform unreachable or failing, or traffic stopped after 429 ' +
        'strikes);\n5 when a core outage stopped the boarding pass.\n' +
        'With --dry-run: 0 when the walk finished (whatever the verdicts), 1 on an error.',
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
          const progress = ctx.progress();
          const report = await shadowRun(ctx, opts, progress, (p) => followPlatformWaits(progress, p));
          progress.done();
          out(ctx, opts.json === true ? JSON.stringify(report) : formatDryRun(report));
          return;
        }
        if (opts.dir !== undefined || opts.against !== undefined || opts.limit !== undefined)
          throw new UsageError('--dir, --against and --limit go with --dry-run');
        if (opts.once !== true)
          throw new UsageError(
            'sync runs one cycle: use `sync --once` (the long-running ' +
              'daemon is `run`; a shadow run is `sync --dry-run`)',
          );
        const progress = ctx.progress();
        const summary = await syncOnce(ctx, {
          settleMs: opts.settleMs,
          onPlatform: (p) => followPlatformWaits(progress, p),
          onStart: () => progress.status('walking the boarding queue'),
          onProgress: (p) => showCycleProgress(progress, p),
        });
        progress.done();
        out(ctx, opts.json === true ? JSON.stringify(summary) : cycleSummaryText(summary));
        assertCycleCompleted(summary, ctx.shutdown.aborted);
      },
    );
}
