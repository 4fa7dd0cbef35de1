import type { Command } from 'commander';
import { shadowRun, syncOnce } from '../app/sync.js';
import {
  BusyError,
  EXIT_CORE_OUTAGE,
  EXIT_WALK_INCOMPLETE,
  FatalError,
  IncompleteRunError,
  UsageError,
} from '../lib/errors.js';
import type { DryRunReport } from '../ops/dry-run.js';
import { cycleVerdict, type CycleSummary } from '../ops/sync.js';
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

/** The coverage table as text: verdict totals, then one line per reason and field with example loans. */
function formatDryRun(r: DryRunReport): string {
  const total = r.loans + r.invalid.length;
  const pct = (n: number): string => (total === 0 ? '0%' : `${Math.round((n / total) * 100)}%`);
  const lines = [
    `dry run with mapping ${r.mappingVersion}${r.againstVersion ? ` against ${r.againstVersion}` : ''}: nothing ` +
      `was written to the core, nothing acknowledged`,
    `${r.loans} loan(s) mapped${r.complete ? '' : ' (stopped at --limit; the queue has more)'}`,
    `  would board:               ${String(r.verdicts.board).padStart(6)}  ${pct(r.verdicts.board)}`,
    `  would board with warnings: ${String(r.verdicts.board_with_warnings).padStart(6)}  ` +
      `${pct(r.verdicts.board_with_warnings)}`,
    `  would quarantine:          ${String(r.verdicts.quarantine + r.invalid.length).padStart(6)}  ` +
      pct(r.verdicts.quarantine + r.invalid.length) +
      (r.invalid.length > 0 ? ` (incl. ${r.invalid.length} malformed queue item(s))` : ''),
  ];
  const table = r.rows.filter((x) => x.verdict !== 'board');
  if (table.length > 0) {
    const head = ['VERDICT', 'REASON', 'FIELD', 'LOANS', 'EXAMPLES'];
    const cells = [
      head,
      ...table.map((x) => [x.verdict, x.reason, x.field, String(x.loans), x.examples.join(' ')]),
    ];
    const widths = head.map((_, i) => Math.max(...cells.map((c) => (c[i] ?? '').length)));
    lines.push(
      '',
      ...cells.map((c) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i] ?? 0))).join('  ')),
    );
  }
  for (const bad of r.invalid.slice(0, 10))
    lines.push(`  malformed queue item ${bad.loanId ?? '(no id)'}: ${bad.message}`);
  if (r.unreadable.length > 0) {
    lines.push('', `${r.unreadable.length} loan(s) could not be read (not mapped):`);
    for (const u of r.unreadable.slice(0, 10)) lines.push(`  ${u.loanId}: ${u.message}`);
  }
  if (r.changes) {
    lines.push('', `${r.changes.length} loan(s) would change between the two mapping sets`);
    for (const c of r.changes.slice(0, 50)) {
      lines.push(`  ${c.loanId}`);
      for (const d of c.diffs.slice(0, 20)) lines.push(`    ${d}`);
      if (c.diffs.length > 20) lines.push(`    … ${c.diffs.length - 20} more`);
    }
    if (r.changes.length > 50) lines.push(`  … ${r.changes.length - 50} more loans (--json lists all)`);
  }
  return lines.join('\n');
}

function leaderText(b: NonNullable<CycleSummary['busy']>): string {
  return b.pid !== null
    ? `another connector process (pid ${b.pid} on ${b.host})`
    : `another connector process (${b.holder})`;
}

/** One-line-per-fact text summary for people; `--json` prints the CycleSummary itself. */
function cycleSummaryText(s: CycleSummary): string {
  if (s.busy) {
    return (
      `${leaderText(s.busy)} leads (holds the boarding lease, ` +
      `epoch ${s.busy.epoch}) on this state database: nothing done`
    );
  }
  const q = Object.entries(s.quarantined);
  const qTotal = q.reduce((a, [, n]) => a + n, 0);
  const lines = [
    `queue: ${s.walk.items} loan(s) listed in ${s.walk.pages} page(s)` +
      (s.walk.resumed ? ' (walk resumed from checkpoint)' : '') +
      (s.walk.complete ? '' : ' — walk incomplete, resumes next run') +
      (s.walk.error ? `: ${s.walk.error}` : ''),
    `boarded: ${s.acknowledged}${s.ackOnly > 0 ? ` (${s.ackOnly} acknowledgement-only)` : ''} · ` +
      `retry later: ${s.retryWait} · ` +
      `quarantined: ${qTotal}${qTotal > 0 ? ` (${q.map(([r, n]) => `${r} ${n}`).join(', ')})` : ''} · ` +
      `${(s.durationMs / 1000).toFixed(1)} s`,
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
      'ALERT: all platform requests are stopped after 2 rate-limit ' +
        'strikes in 24 h; boarding waits (see `platform status`).',
    );
  if (s.coreOutage)
    lines.push(
      `ALERT: the core was unavailable for ${s.coreOutage.failures} loans in a row (${s.coreOutage.message}); ` +
        `the pass stopped, the rest wait for the next run.`,
    );
  if (s.fatal) lines.push(`FATAL: ${s.fatal.message}`);
  return lines.join('\n');
}

/**
 * `sync --once`'s exit: nothing thrown when the cycle completed; else the error whose code tells cron why
 * (docs: exit status).
 */
export function assertCycleCompleted(summary: CycleSummary, stopped: boolean): void {
  const v = cycleVerdict(summary, stopped);
  switch (v.kind) {
    case 'completed':
      return;
    case 'busy':
      throw new BusyError(`${leaderText(v.busy)} holds the boarding lease: nothing done`);
    case 'fatal':
      throw new FatalError(v.sentence);
    case 'core-outage':
      throw new IncompleteRunError(
        `the core was unavailable (${v.failures} loans in a row): the boarding pass stopped`,
        EXIT_CORE_OUTAGE,
      );
    case 'traffic-stopped':
      throw new IncompleteRunError(
        'platform traffic is stopped after 2 rate-limit strikes in 24 h: nothing was boarded (see `platform status`)',
        EXIT_WALK_INCOMPLETE,
      );
    case 'walk-incomplete':
      throw new IncompleteRunError(
        `the boarding queue walk did not complete${v.error ? `: ${v.error}` : ''}; it resumes on the next run`,
        EXIT_WALK_INCOMPLETE,
      );
  }
}
