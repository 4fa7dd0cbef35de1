import { Writable } from 'node:stream';
import { systemClock } from '../../src/lib/clock.js';
import { createCliContext, type GlobalOptions } from '../../src/cli/context.js';
import { buildProgram, CommanderError } from '../../src/cli/program.js';
import { BusyError, ConfigError, FatalError, UsageError } from '../../src/lib/errors.js';

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  error: string | null;
  /** The questions asked on the (fake) terminal. */
  asked: string[];
}

function sink(): { stream: Writable; text: () => string } {
  let text = '';
  return {
    stream: new Writable({
      write(chunk: Buffer, _enc, cb) {
        text += chunk.toString();
        cb();
      },
    }),
    text: () => text,
  };
}

/**
 * Runs the CLI in-process like main.ts does, with stdout and stderr kept apart and, when
 * `answers` is given, a terminal that answers the questions asked in turn (none: no terminal).
 */
export async function runCliSplit(
  args: string[],
  opts: { env?: Record<string, string | undefined>; answers?: string[]; cwd?: string } = {},
): Promise<CliRun> {
  const out = sink();
  const err = sink();
  const asked: string[] = [];
  const answers = opts.answers ? [...opts.answers] : undefined;
  const { program, ctx } = buildProgram((p) =>
    createCliContext({
      clock: systemClock,
      env: { ...opts.env },
      stdout: out.stream,
      stderr: err.stream,
      getConfigOption: () => p.opts<{ config?: string }>().config,
      getGlobalOptions: () => p.opts<GlobalOptions>(),
      shutdown: new AbortController().signal,
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
      ...(answers
        ? {
            prompt: (q: string) => {
              asked.push(q);
              return Promise.resolve(answers.shift() ?? '');
            },
          }
        : {}),
    }),
  );
  program.configureOutput({ writeOut: (s) => out.stream.write(s), writeErr: (s) => err.stream.write(s) });
  const done = (code: number, error: string | null): CliRun => ({
    code,
    stdout: out.text(),
    stderr: err.text(),
    error,
    asked,
  });
  try {
    await program.parseAsync(['node', 'boarding-connector', ...args]);
    return done(0, null);
  } catch (e) {
    if (e instanceof CommanderError) return done(e.exitCode === 0 ? 0 : 2, e.message);
    if (e instanceof UsageError) return done(2, e.message);
    if (e instanceof ConfigError || e instanceof FatalError) return done(1, e.message);
    if (e instanceof BusyError) return done(e.exitCode, e.message);
    throw e;
  } finally {
    await ctx.close();
  }
}

export interface BackgroundCli {
  /** Everything the command printed on stdout so far. */
  stdout(): string;
  /** Resolves with stdout once it matches `re` (rejects after `timeoutMs`). */
  waitFor(re: RegExp, timeoutMs?: number): Promise<string>;
  /** Its Ctrl-C: the shutdown signal main.ts raises on SIGINT, then the command's own cleanup. */
  stop(): Promise<void>;
}

/** A long-running command (`sandbox`, `run`) in-process, as main.ts runs it, until stop(). */
export function startCliInBackground(
  args: string[],
  opts: { env?: Record<string, string | undefined>; cwd?: string } = {},
): BackgroundCli {
  const out = sink();
  const err = sink();
  const shutdown = new AbortController();
  const { program, ctx } = buildProgram((p) =>
    createCliContext({
      clock: systemClock,
      env: { LOG_LEVEL: 'silent', ...opts.env },
      stdout: out.stream,
      stderr: err.stream,
      getConfigOption: () => p.opts<{ config?: string }>().config,
      getGlobalOptions: () => p.opts<GlobalOptions>(),
      shutdown: shutdown.signal,
      ...(opts.cwd !== undefined ? { cwd: opts.cwd } : {}),
    }),
  );
  program.exitOverride();
  let failure: unknown = null;
  const done = program
    .parseAsync(['node', 'boarding-connector', ...args])
    .catch((e: unknown) => {
      failure = e;
    })
    .finally(() => ctx.close());
  return {
    stdout: () => out.text(),
    waitFor: async (re, timeoutMs = 15_000) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        if (re.test(out.text())) return out.text();
        if (failure !== null)
          throw new Error(
            `${args.join(' ')} failed: ${failure instanceof Error ? failure.message : JSON.stringify(failure)}\n${err.text()}`,
          );
        if (Date.now() > until)
          throw new Error(`${args.join(' ')}: no ${String(re)} on stdout in ${timeoutMs} ms:\n${out.text()}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    stop: async () => {
      shutdown.abort(new Error('received SIGINT'));
      await done;
    },
  };
}
