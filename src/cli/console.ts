import type { Command } from 'commander';
import { userInfo } from 'node:os';
import { hashPassword, unlockFromCli } from '../app/console.js';
import { UsageError } from '../lib/errors.js';
import { out, type CliContext } from './context.js';

/** Reads a password typed on a terminal without echoing it (raw mode; Enter ends, Ctrl-C aborts). */
function readHidden(
  input: NodeJS.ReadStream,
  prompt: (s: string) => void,
  question: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    prompt(question);
    let value = '';
    input.setRawMode(true);
    input.resume();
    input.setEncoding('utf8');
    const finish = (err: Error | null): void => {
      input.setRawMode(false);
      input.pause();
      input.off('data', onData);
      prompt('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: string): void => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return finish(null);
        if (ch === '\u0003' || ch === '\u0004') return finish(new UsageError('console passwd: aborted'));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    input.on('data', onData);
  });
}

/** Reads the first line of a piped stdin (`printf '%s' "$PW" | … console passwd`). */
async function readPiped(input: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of input) {
    text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    if (text.length > 10_000) throw new UsageError('console passwd: stdin is too long for a password');
  }
  return text.replace(/\r?\n[\s\S]*$/, '');
}

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
      '\nOn a terminal it asks twice; from a pipe it takes the first line. Nothing else is printed on stdout, so\n  HASH=$(boarding-connector console passwd < pwfile)\nworks. The hash is scrypt (Node crypto) with a random salt: the same password gives a new hash each time.',
    )
    .action(async () => {
      const stdin = process.stdin;
      let password: string;
      if (stdin.isTTY) {
        const say = (s: string): void => {
          ctx.stderr.write(s);
        };
        password = await readHidden(stdin, say, 'New console password: ');
        const again = await readHidden(stdin, say, 'Again: ');
        if (again !== password)
          throw new UsageError('console passwd: the two passwords differ; nothing printed');
      } else {
        password = await readPiped(stdin);
      }
      if (password.length === 0)
        throw new UsageError('console passwd: the password is empty (give it on stdin)');
      if (password.length < 12)
        ctx.stderr.write('warning: a password shorter than 12 characters is easy to guess\n');
      out(ctx, await hashPassword(password));
    });
  group
    .command('unlock')
    .argument('<name>', 'a user of console.users')
    .description(
      'lift the login locks of a console user (written to the audit log; the running daemon lifts them within 5 s)',
    )
    .action(async (name: string) => {
      let actor = 'cli';
      try {
        actor = `cli:${userInfo().username}`;
      } catch {
        // no user name for this uid (a container): 'cli'
      }
      const user = { name: await unlockFromCli(ctx, name, actor) };
      out(
        ctx,
        `console unlock: ${user.name}: recorded in the audit log by ${actor}; the daemon lifts the lock at its next login check (within 5 s)`,
      );
    });
}
