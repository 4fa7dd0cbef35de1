import { Command, CommanderError } from 'commander';
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
