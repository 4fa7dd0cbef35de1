import { FatalError, UsageError } from '../lib/errors.js';
import { printable } from '../lib/terminal.js';
import type { CliContext } from './context.js';

export interface BulkConfirmation {
  /** The command, for messages: `loans reboard`. */
  command: string;
  /** What will happen, for the question: `re-write 28 loans in the core`. */
  action: string;
  count: number;
  /** Ask above this many (config boarding.confirmAbove). */
  threshold: number;
  /** --yes was given. */
  yes: boolean;
  /** A few of the loans, shown with the question. */
  sample: readonly string[];
}

/**
 * A bulk operator action above the threshold goes ahead only with --yes or an explicit "yes" on
 * the terminal. With no terminal to ask on (cron, a pipe) and no --yes it is refused: exit 2 and
 * nothing done. A "no" at the prompt is exit 1, nothing done.
 */
export async function confirmBulk(ctx: CliContext, c: BulkConfirmation): Promise<void> {
  if (c.count <= c.threshold || c.yes) return;
  const hint = `see them first with \`${c.command} … --dry-run\``;
  if (ctx.prompt === undefined) {
    throw new UsageError(
      `${c.command}: ${c.count} loans is more than boarding.confirmAbove (${c.threshold}) and there is no ` +
        `terminal to confirm on: nothing done. ` +
        `${hint[0]?.toUpperCase()}${hint.slice(1)}, then pass --yes to go ahead`,
    );
  }
  const shown = c.sample.slice(0, 10).join(', ');
  ctx.stderr.write(
    printable(
      `${c.command} will ${c.action} (more than boarding.confirmAbove = ${c.threshold}): ` +
        `${shown}${c.count > 10 ? `, … ${c.count - 10} more` : ''}\n(${hint}; --yes skips this question)\n`,
    ),
  );
  const answer = (await ctx.prompt(`Go ahead? Type "yes" to ${c.action}: `)).trim().toLowerCase();
  if (answer !== 'yes' && answer !== 'y') throw new FatalError(`${c.command}: not confirmed: nothing done`);
}
