import { Command, CommanderError, Option } from 'commander';
import { PROGRESS_MODES } from '../lib/terminal.js';
import type { CliContext } from './context.js';
import { registerCommandGroups } from './groups.js';

import { CONNECTOR_VERSION } from '../version.js';

/** Builds the commander program; main.ts runs it. Separate so tests can drive the CLI in-process. */
export function buildProgram(ctxFactory: (program: Command) => CliContext): { program: Command; ctx: CliContext } {
  const program = new Command();
  program
    .name('boarding-connector')
    .description('Boards loans from the Loan Platform boarding queue into the bank core, exactly once.')
    .version(CONNECTOR_VERSION)
    .option('-c, --config <file>', 'YAML config file (else $BOARDING_CONFIG, else built-in demo defaults)')
    .addOption(
      new Option('--progress <mode>', 'progress line of long commands on stderr: auto (when stderr is a terminal), always, never (scripts)').choices(PROGRESS_MODES).default('auto'),
    )
    .option('--verbose', 'with a progress line: logs at the configured level (else warnings and errors only)')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => process.stdout.write(s),
      writeErr: (s) => process.stderr.write(s),
    });
  const ctx = ctxFactory(program);
  registerCommandGroups(program, ctx);
  return { program, ctx };
}

export { CommanderError };
