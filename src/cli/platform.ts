import type { Command } from 'commander';
import { TRAFFIC_STOP_AT_STRIKES as TRAFFIC_STOP_AT, platformStatus } from '../ops/platform-status.js';
import { clearStrikes } from '../ops/strike-clear.js';
import { openRateAdmin } from '../app/session.js';
import { UsageError } from '../lib/errors.js';
import { out, type CliContext } from './context.js';
import { shownTime, zonedJson } from './times.js';

export function registerPlatformCommands(program: Command, ctx: CliContext): void {
  const platform = program
    .command('platform')
    .description('the Loan Platform API key as the connector sees it: 429 strikes, the traffic stop, pauses');

  platform
    .command('status')
    .description(
      'show 429 strikes of the last 24 h, whether platform requests are stopped and any pause in force (reads ' +
        'the state database, on PostgreSQL the ledger every replica shares; sends no request)',
    )
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const admin = await openRateAdmin(ctx);
      const status = await platformStatus(admin, ctx.config().platform.environment);
      const zone = ctx.config().bank.timeZone;
      if (opts.json) {
        out(ctx, JSON.stringify(zonedJson(status, zone), null, 2));
        return;
      }
      out(
        ctx,
        `429 strikes in the last 24 h: ${status.strikes24h} (all platform traffic, reads and writes, stops at ` +
          `${TRAFFIC_STOP_AT}; a live key is revoked at 3)`,
      );
      for (const s of status.strikes) out(ctx, `  ${shownTime(s.at, zone)}  ${s.bucket}  ${s.path ?? ''}`);
      out(
        ctx,
        status.trafficStopped
          ? 'platform requests: STOPPED (reads and writes wait; ' +
              '`platform strikes clear` once the platform confirms the key)'
          : `platform requests: allowed${status.strikes24h > 0 ? ' at half pace' : ''}`,
      );
      for (const p of status.pauses)
        out(ctx, `pause: ${p.bucket} bucket paused until ${shownTime(p.until, zone)}`);
      if (admin.shared)
        out(
          ctx,
          'ledger: shared by every replica on this API key ' +
            '(PostgreSQL); strikes, pauses and the stop apply to all of them',
        );
    });

  const strikes = platform.command('strikes').description('the 429-strike ledger');
  strikes
    .command('clear')
    .description(
      'clear the strike ledger so platform traffic resumes; only once ' +
        'the platform has confirmed the key is in good standing (audited)',
    )
    .requiredOption('--reason <text>', 'why it is safe (e.g. the platform support ticket)')
    .option('--by <name>', 'who clears it (default: $USER)')
    .action(async (opts: { reason: string; by?: string }) => {
      const by = opts.by ?? ctx.env['USER'] ?? ctx.env['USERNAME'];
      if (!by) throw new UsageError('--by: expected who clears the strikes (no $USER to default to)');
      const admin = await openRateAdmin(ctx);
      const cleared = await clearStrikes(admin, { by, reason: opts.reason });
      ctx
        .logger()
        .warn(
          { by, reason: opts.reason, cleared, shared: admin.shared },
          'operator cleared the 429-strike ledger',
        );
      out(
        ctx,
        `cleared ${cleared} strike(s); ` +
          `${admin.shared ? 'every replica on this API key resumes' : 'a running daemon picks this up'} ` +
          `on its next request`,
      );
    });
}
