import type { Command } from 'commander';
import { UsageError } from '../lib/errors.js';
import { reconcileOnce } from '../app/reconcile.js';
import { reconcileSummary, type ReconcileRunResult } from '../ops/reconcile.js';
import { out, type CliContext } from './context.js';
import { followPlatformWaits } from './progress.js';

/** --since: an ISO 8601 date-time (or a date, read as 00:00 UTC), normalised to UTC. */
export function parseSince(v: string): string {
  const ok = /^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(v.trim());
  const ms = Date.parse(v.trim());
  if (!ok || Number.isNaN(ms))
    throw new UsageError(
      `--since: expected an ISO 8601 date-time such as 2026-11-01T00:00:00Z, got ${JSON.stringify(v)}`,
    );
  return new Date(ms).toISOString();
}

export function registerReconcileCommands(program: Command, ctx: CliContext): void {
  program
    .command('reconcile')
    .description(
      'compare the platform (boarded loans), the connector state ' +
        'and the core; write report.json, report.csv, report.html',
    )
    .option(
      '--since <iso>',
      'only loans boarded/acknowledged since this ISO date-time (open items are always included)',
      parseSince,
    )
    .option(
      '--out <dir>',
      'write the three files into this folder, which must hold no report yet (default: a new ' +
        'reports.dir/<date>/run-<HHMMSS>/, and reports.dir/latest points at it)',
    )
    .option('--json', 'print the summary as JSON')
    .addHelpText(
      'after',
      '\nExit status 0 when the report was written, whatever it found (exceptions are for ops to work);\n' +
        '1 on a configuration error or when a source (platform, core, state) cannot be read.\n' +
        'A progress bar is drawn on stderr when it is a terminal (--progress), with the reason of any wait for ' +
        'the platform.\nSee docs/reconciliation.md.',
    )
    .action(async (opts: { since?: string; out?: string; json?: boolean }) => {
      const line = ctx.progress();
      const result = await reconcileOnce(ctx, {
        since: opts.since ?? null,
        outDir: opts.out,
        line,
        onPlatform: (platform) => followPlatformWaits(line, platform),
      });
      out(ctx, opts.json === true ? JSON.stringify(reconcileSummary(result)) : reconcileText(result));
    });
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
