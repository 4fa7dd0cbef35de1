import { Option, type Command } from 'commander';
import { runDemo, type DemoOptions } from '../app/demo.js';
import { CORE_SIMULATORS } from '../app/sandbox.js';
import { UsageError } from '../lib/errors.js';
import { out, type CliContext } from './context.js';

/** `demo` (what `npm start` runs): src/app/demo.ts wires it; this parses its options and prints. */

const positiveInt =
  (name: string) =>
  (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0)
      throw new UsageError(`${name}: expected a whole number ≥ 0, got ${JSON.stringify(v)}`);
    return n;
  };

/** The live status line: a single updating line on a TTY, one line per change otherwise. */
function statusPrinter(stream: NodeJS.WritableStream & { isTTY?: boolean }): {
  show(text: string): void;
  println(text: string): void;
} {
  const tty = stream.isTTY === true;
  let last = '';
  let drawn = false;
  return {
    show(text) {
      if (text === last) return;
      last = text;
      if (tty) {
        stream.write(`\r\x1b[2K${text}`);
        drawn = true;
      } else stream.write(`${text}\n`);
    },
    println(text) {
      if (tty && drawn) stream.write('\r\x1b[2K');
      stream.write(`${text}\n`);
      if (tty && drawn) stream.write(last);
    },
  };
}

export function registerDemoCommands(program: Command, ctx: CliContext): void {
  program
    .command('demo')
    .description(
      'sandbox + connector daemon together on embedded defaults (what `npm start` runs); Ctrl-C stops',
    )
    .option(
      '--dir <dir>',
      'where the demo keeps its state, core files and reports (wiped at start)',
      './var/demo',
    )
    .option('--loans <n>', 'loans the sandbox starts with', positiveInt('--loans'), 25)
    .addOption(
      new Option(
        '--core <name>',
        "board into a core simulator held to its vendor's published contract instead of the file core",
      ).choices(CORE_SIMULATORS),
    )
    .option(
      '--exit-after <seconds>',
      'stop by itself after this many seconds (default: run until Ctrl-C)',
      positiveInt('--exit-after'),
    )
    .option(
      '--report-after <seconds>',
      'also reconcile this many seconds after start (reports are ' +
        'written after the first cycle and when the demo stops too)',
      positiveInt('--report-after'),
      60,
    )
    .option(
      '--window-ms <ms>',
      'rate-limit window of the sandbox and the connector',
      positiveInt('--window-ms'),
      10_000,
    )
    .addOption(
      new Option('--step-ms <ms>', 'between two scripted sandbox steps')
        .argParser(positiveInt('--step-ms'))
        .default(5_000)
        .hideHelp(),
    )
    .addHelpText(
      'after',
      '\nTimeline: the sandbox starts with --loans loans (some released), the daemon boards them; over the\n' +
        'next minute more loans are released and funded (loan.funded webhooks start early cycles); a\n' +
        'reconciliation runs at the end of that minute and every 5 minutes. Logs go to --dir/demo.log.',
    )
    .action(async (opts: DemoOptions) => {
      if (opts.windowMs < 1000) throw new UsageError('--window-ms: expected at least 1000');
      const { env, clock, shutdown } = ctx;
      const status = statusPrinter(ctx.stderr);
      const io = { env, clock, shutdown, status, say: (text: string) => out(ctx, text) };
      await runDemo({ ...io, onClose: (fn) => ctx.onClose(fn), onHangup: (fn) => ctx.onHangup(fn) }, opts);
    });
}
