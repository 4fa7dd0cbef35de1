import type { Command } from 'commander';
import { connectionCheckDeps } from '../app/connection-check.js';
import type { ConnectionCheck } from '../ops/check-result.js';
import { connectionChecks, localChecks, portChecks, shownConfig } from '../ops/connection-check.js';
import { FatalError } from '../lib/errors.js';
import { out, type CliContext } from './context.js';

export function registerConfigCommands(program: Command, ctx: CliContext): void {
  const config = program.command('config').description('inspect the configuration');
  config
    .command('check')
    .description(
      'validate the config (file + env), check mappings.dir and ' +
        'lint the mapping set; print the config with secrets hidden',
    )
    .option(
      '--connect',
      'also connect: the platform answers, the key and its tax-id permissions, the webhook endpoint, the core ' +
        'with these credentials, the state database takes a write',
    )
    .option('--json', 'print {ok, source, checks, config} as JSON')
    .addHelpText(
      'after',
      '\nOne line per check (ok, FAIL, warn, skip). Exit 1 when any check fails (an invalid config too), 2 ' +
        'without a config.\n--connect spends at most 10 platform reads (and downloads one document), from the ' +
        'same rate budget as a running daemon, and writes nothing\n' +
        '(the state database check takes the write lock and rolls back).',
    )
    .action(async (opts: { connect?: boolean; json?: boolean }) => {
      const c = ctx.config();
      const source = ctx.configPath() ?? '(none)';
      const deps = connectionCheckDeps(c, { logger: ctx.logger(), clock: ctx.clock, signal: ctx.shutdown });
      const checks: ConnectionCheck[] =
        opts.connect === true
          ? await connectionChecks(c, source, deps)
          : localChecks(c, source, deps.mapperOptions).checks;
      // Local, so without --connect too: a port another process holds fails `run` at start.
      checks.push(...(await portChecks(c)));
      const failed = checks.filter((k) => k.status === 'fail');
      if (opts.json === true) {
        out(
          ctx,
          JSON.stringify({ ok: failed.length === 0, source, checks, config: shownConfig(c) }, null, 2),
        );
      } else {
        for (const k of checks) out(ctx, formatCheck(k));
        if (opts.connect !== true)
          out(ctx, `config (secrets hidden):\n${JSON.stringify(shownConfig(c), null, 2)}`);
      }
      if (failed.length > 0)
        throw new FatalError(
          `config check: ${failed.length} check(s) failed: ${failed.map((k) => k.name).join(', ')}`,
        );
    });
}

/** One check as a line: status tag, name, what it found. */
export function formatCheck(c: ConnectionCheck): string {
  const tag = { ok: 'ok  ', fail: 'FAIL', warn: 'warn', skip: 'skip' }[c.status];
  return `${tag}  ${c.name.padEnd(18)} ${c.detail}`;
}
