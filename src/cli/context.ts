import { printable } from '../lib/terminal.js';
import type { CliContext } from '../app/cli-context.js';

export {
  COMMANDS_WITHOUT_CONFIG,
  STATE_ONLY_COMMANDS,
  SUBCOMMANDS_WITHOUT_CONFIG,
  createCliContext,
  createHangupSource,
  noConfigMessage,
  type CliContext,
  type ContextOptions,
  type GlobalOptions,
  type HangupSource,
} from '../app/cli-context.js';

/** Prints a line of JSON or text on stdout, without terminal control characters (a progress line steps aside). */
export function out(ctx: CliContext, text: string): void {
  const clean = printable(text);
  ctx.output(() => ctx.stdout.write(clean.endsWith('\n') ? clean : `${clean}\n`));
}
