import { Command, CommanderError, Option } from 'commander';
import { PROGRESS_MODES } from '../lib/terminal.js';
import {
  COMMANDS_WITHOUT_CONFIG,
  STATE_ONLY_COMMANDS,
  SUBCOMMANDS_WITHOUT_CONFIG,
  noConfigMessage,
  type CliContext,
} from './context.js';
import { UsageError } from '../lib/errors.js';
import { registerCommandGroups } from './groups.js';

import { CONNECTOR_VERSION } from '../version.js';

/** Builds the commander program; main.ts runs it. Separate so tests can drive the CLI in-process. */
export function buildProgram(ctxFactory: (program: Command) => CliContext): {
  program: Command;
  ctx: CliContext;
} {
  const program = new Command();
  program
    .name('boarding-connector')
    .description('Boards loans from the Loan Platform boarding queue into the bank core, exactly once.')
    .version(CONNECTOR_VERSION)
    .option(
      '-c, --config <file>',
      'YAML config file (else $BOARDING_CONFIG); needed by every command but demo, sandbox and those that name ' +
        'their files (mappings lint/test --dir, mappings schema, state verify)',
    )
    .addOption(
      new Option(
        '--progress <mode>',
        'progress line of long commands on stderr: auto (when stderr is a terminal), always, never (scripts)',
      )
        .choices(PROGRESS_MODES)
        .default('auto'),
    )
    .option('--verbose', 'with a progress line: logs at the configured level (else warnings and errors only)')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => process.stdout.write(s),
      writeErr: (s) => process.stderr.write(s),
    });
  const ctx = ctxFactory(program);
  // No silent demo defaults: a command other than demo/sandbox without a config stops here (exit 2),
  // before it opens a database or calls anything. --help and --version never get this far.
  program.hook('preAction', (_root, action) => {
    let top: Command = action;
    while (top.parent && top.parent !== program) top = top.parent;
    if (STATE_ONLY_COMMANDS.has(`${top.name()} ${action.name()}`)) ctx.platformOptional();
    if (
      COMMANDS_WITHOUT_CONFIG.has(top.name()) ||
      SUBCOMMANDS_WITHOUT_CONFIG.has(`${top.name()} ${action.name()}`)
    )
      return;
    if (ctx.configPath() === undefined) throw new UsageError(noConfigMessage());
  });
  registerCommandGroups(program, ctx);
  return { program, ctx };
}

export { CommanderError };
