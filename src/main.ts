#!/usr/bin/env node
import { createInterface } from 'node:readline/promises';
import { CommanderError } from 'commander';
import { createCliContext, createHangupSource, type CliContext, type GlobalOptions } from './cli/context.js';
import { buildProgram } from './cli/program.js';
import { systemClock } from './lib/clock.js';
import {
  BusyError,
  ConfigError,
  FatalError,
  IncompleteRunError,
  UsageError,
  errorMessage,
} from './lib/errors.js';
import { applyHeapGrowth } from './lib/heap.js';
import { scrubText } from './lib/redact.js';
import { printable } from './lib/terminal.js';

/** One question on the terminal (stderr, so stdout keeps only results); the answer line. */
async function askOnTerminal(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}

/** Composition root: the only place that installs signal handlers and calls process.exit. */
async function main(argv: string[]): Promise<number> {
  const shutdown = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      process.stderr.write(`second ${sig}: forcing exit\n`);
      process.exit(130);
    }
    shutdown.abort(new Error(`received ${sig}`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // SIGHUP: `run` reloads its mapping set (ctx.onHangup). A command that does not listen for it
  // stops as it would without a handler.
  const hangup = createHangupSource();
  process.on('SIGHUP', (sig) => {
    if (!hangup.dispatch()) onSignal(sig);
  });
  // `boarding-connector loans list | head`: the reader went away; that is not an error of ours.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw err;
    });
  }

  // Before any work: the heap follows the live data instead of letting garbage pile up (lib/heap.ts).
  try {
    applyHeapGrowth(process.env, process.execArgv);
  } catch (err) {
    process.stderr.write(`error: ${printable(errorMessage(err))}\n`);
    return 2;
  }

  let ctx: CliContext | undefined;
  const { program } = buildProgram((p) => {
    ctx = createCliContext({
      env: process.env,
      stdout: process.stdout,
      stderr: process.stderr,
      getConfigOption: () => p.opts<{ config?: string }>().config,
      getGlobalOptions: () => p.opts<GlobalOptions>(),
      shutdown: shutdown.signal,
      hangup,
      // The process entry picks the real clock; everything below takes it injected.
      clock: systemClock,
      ...(process.stdin.isTTY === true && process.stderr.isTTY === true ? { prompt: askOnTerminal } : {}),
    });
    return ctx;
  });
  try {
    if (argv.length <= 2) {
      program.outputHelp();
      return 0;
    }
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    ctx?.endProgress();
    if (err instanceof CommanderError) {
      if (
        err.code === 'commander.helpDisplayed' ||
        err.code === 'commander.version' ||
        err.code === 'commander.help'
      )
        return 0;
      return 2;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`error: ${printable(err.message)}\n`);
      return 2;
    }
    if (err instanceof BusyError) {
      process.stderr.write(`busy: ${printable(err.message)}\n`);
      return err.exitCode;
    }
    if (err instanceof IncompleteRunError) {
      process.stderr.write(`incomplete: ${printable(scrubText(err.message))}\n`);
      return err.exitCode;
    }
    if (err instanceof ConfigError || err instanceof FatalError) {
      process.stderr.write(`error: ${printable(scrubText(err.message))}\n`);
      return 1;
    }
    process.stderr.write(`error: ${printable(scrubText(errorMessage(err)))}\n`);
    if (err instanceof Error && err.stack && process.env['DEBUG'])
      process.stderr.write(`${scrubText(err.stack)}\n`);
    return 1;
  } finally {
    await ctx?.close();
  }
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`fatal: ${printable(scrubText(errorMessage(err)))}\n`);
    process.exitCode = 1;
  },
);
