import type { Command } from 'commander';
import { cliActor, consolePasswordHash, readNewPassword, unlockFromCli } from '../app/console.js';
import { UsageError } from '../lib/errors.js';
import { out, type CliContext } from './context.js';

export function registerConsoleCommands(program: Command, ctx: CliContext): void {
  const group = program
    .command('console')
    .description('the ops console on the admin listener (docs/operations.md "Ops console")');
  group
    .command('passwd')
    .description(
      'read a password from stdin (not echoed on a terminal) and print its hash for console.users[].passwordHash',
    )
    .addHelpText(
      'after',
      '\nOn a terminal it asks twice; from a pipe it takes the first line. Nothing else is printed on stdout, ' +
        'so\n  HASH=$(node dist/main.js console passwd < pwfile)\n' +
        'works. The hash is scrypt (Node crypto) with a random ' +
        'salt: the same password gives a new hash each time.',
    )
    .action(async () => {
      const password = await readNewPassword(process.stdin, (text) => ctx.stderr.write(text));
      if (password.length === 0)
        throw new UsageError('console passwd: the password is empty (give it on stdin)');
      if (password.length < 12)
        ctx.stderr.write('warning: a password shorter than 12 characters is easy to guess\n');
      out(ctx, await consolePasswordHash(password));
    });
  group
    .command('unlock')
    .argument('<name>', 'a user of console.users')
    .description(
      'lift the login locks of a console user (written to the audit log; the running daemon lifts them within 5 s)',
    )
    .action(async (name: string) => {
      const actor = cliActor();
      const user = { name: await unlockFromCli(ctx, name, actor) };
      out(
        ctx,
        `console unlock: ${user.name}: recorded in the audit log by ${actor}; the daemon lifts the lock at its ` +
          `next login check (within 5 s)`,
      );
    });
}
