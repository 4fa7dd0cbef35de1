import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Writable } from 'node:stream';
import { configNotes, loadConfig } from '../config/load.js';
import { transportWarnings } from '../config/security.js';
import type { Config } from '../config/schema.js';
import { ConfigError, UsageError, errorMessage } from '../lib/errors.js';
import { createLogger, type Logger } from '../lib/logger.js';
import type { Clock } from '../lib/clock.js';
import { createProgressLine, type ProgressLine, type ProgressMode } from '../lib/terminal.js';

/**
 * What every CLI command gets: lazily loaded config and logger, output streams, and a place to
 * register cleanup. It is a CommandScope (session.ts): commands ask src/app for the adapters
 * they need, built from this config (modules below src/cli never read env or files on their own).
 */
export interface CliContext {
  readonly env: Record<string, string | undefined>;
  readonly stdout: Writable;
  readonly stderr: Writable;
  readonly clock: Clock;
  /** --config, else BOARDING_CONFIG, else undefined (then config() refuses: exit 2). */
  configPath(): string | undefined;
  /** The validated config; without --config or BOARDING_CONFIG a UsageError (no silent defaults). */
  config(): Config;
  /**
   * Called before config() by commands that only read the state database (STATE_ONLY_COMMANDS):
   * their config may leave out `platform` (README: `customers list` with only `store.path`).
   */
  platformOptional(): void;
  logger(): Logger;
  /** Registers cleanup run (in reverse order) when the command finishes or the process stops. */
  onClose(fn: () => Promise<void> | void): void;
  close(): Promise<void>;
  /** Resolves when SIGTERM/SIGINT arrives (installed by main.ts). */
  readonly shutdown: AbortSignal;
  /**
   * Calls fn on SIGHUP (installed by main.ts): `run` reloads its mapping set. Returns the unsubscribe.
   * With no subscriber, SIGHUP stops the process like SIGTERM (its default meaning).
   */
  onHangup(fn: () => void): () => void;
  /**
   * Asks the operator a question on the terminal and resolves with the answer; undefined when
   * there is no terminal to ask on (stdin or stderr not a TTY: cron, a pipe, a script).
   */
  readonly prompt: ((question: string) => Promise<string>) | undefined;
  /**
   * The progress line of a long command on stderr (--progress: auto = when stderr is a terminal,
   * always, never). While it is shown, logs are at warn level unless --verbose: call this before
   * the first logger().
   */
  progress(): ProgressLine;
  /** Runs a write to stdout with the progress line (if one is shown) cleared around it. */
  output(write: () => void): void;
  /** Clears the progress line for good (before an error message; close() does it too). */
  endProgress(): void;
}

/** The program's own options (before or after the command): --progress, --verbose. */
export interface GlobalOptions {
  progress?: ProgressMode;
  verbose?: boolean;
}

export interface ContextOptions {
  env: Record<string, string | undefined>;
  stdout: Writable;
  stderr: Writable;
  getConfigOption: () => string | undefined;
  shutdown: AbortSignal;
  clock: Clock;
  /** SIGHUP, as main.ts relays it; tests dispatch it themselves. */
  hangup?: HangupSource;
  /** A question on the terminal (main.ts, when stdin and stderr are TTYs; tests give their own). */
  prompt?: (question: string) => Promise<string>;
  getGlobalOptions?: () => GlobalOptions;
  /** Where the config's relative paths start (default: the process's working directory; tests give another). */
  cwd?: string;
}

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export interface HangupSource {
  subscribe(fn: () => void): () => void;
}

/** Relays SIGHUP to subscribers; `dispatch` says whether anyone listened. */
export function createHangupSource(): HangupSource & { dispatch(): boolean } {
  const subs = new Set<() => void>();
  return {
    subscribe(fn) {
      const f = (): void => fn();
      subs.add(f);
      return () => subs.delete(f);
    },
    dispatch() {
      for (const f of [...subs]) f();
      return subs.size > 0;
    },
  };
}

export function createCliContext(opts: ContextOptions): CliContext {
  let config: Config | undefined;
  let logger: Logger | undefined;
  /** Config warnings wait for the logger, whichever is made first. */
  let pendingWarnings: string[] = [];
  let pendingNotes: string[] = [];
  const flushWarnings = (): void => {
    if (logger === undefined) return;
    for (const w of pendingWarnings) logger.warn({ config: true }, w);
    for (const n of pendingNotes) logger.info({ config: true }, n);
    pendingWarnings = [];
    pendingNotes = [];
  };
  const closers: Array<() => Promise<void> | void> = [];
  let progressLine: ProgressLine | undefined;
  let platformOptional = false;
  const configPath = (): string | undefined =>
    opts.getConfigOption() ?? (opts.env['BOARDING_CONFIG'] || undefined);
  return {
    env: opts.env,
    stdout: opts.stdout,
    stderr: opts.stderr,
    clock: opts.clock,
    shutdown: opts.shutdown,
    prompt: opts.prompt,
    onHangup(fn) {
      const unsubscribe = opts.hangup?.subscribe(fn);
      return () => {
        unsubscribe?.();
      };
    },
    configPath,
    platformOptional() {
      platformOptional = true;
    },
    config() {
      if (config) return config;
      const path = configPath();
      if (path === undefined) throw new UsageError(noConfigMessage());
      let fileText: string;
      try {
        fileText = readFileSync(resolve(opts.cwd ?? process.cwd(), path), 'utf8');
      } catch (err) {
        throw new ConfigError(`cannot read config file ${path}: ${errorMessage(err)}`);
      }
      const cwd = opts.cwd ?? process.cwd();
      config = loadConfig({
        env: opts.env,
        fileText,
        filePath: path,
        cwd,
        ...(platformOptional ? { platform: 'optional' as const } : {}),
      });
      pendingWarnings.push(...transportWarnings(config));
      pendingNotes.push(...configNotes(config));
      flushWarnings();
      return config;
    },
    logger() {
      if (logger === undefined) {
        let level = config?.log.level ?? opts.env['LOG_LEVEL'] ?? 'info';
        // A progress line on the terminal: only warnings and errors beside it, unless --verbose.
        if (
          progressLine?.enabled === true &&
          opts.getGlobalOptions?.().verbose !== true &&
          LEVELS.indexOf(level) < LEVELS.indexOf('warn')
        )
          level = 'warn';
        logger = createLogger({ level });
      }
      flushWarnings();
      return logger;
    },
    onClose(fn) {
      closers.push(fn);
    },
    progress() {
      if (progressLine === undefined) {
        progressLine = createProgressLine(opts.stderr as NodeJS.WritableStream & { isTTY?: boolean }, {
          mode: opts.getGlobalOptions?.().progress ?? 'auto',
          clock: opts.clock,
        });
      }
      return progressLine;
    },
    output(write) {
      if (progressLine) progressLine.around(write);
      else write();
    },
    endProgress() {
      progressLine?.done();
    },
    async close() {
      progressLine?.done();
      while (closers.length > 0) {
        const fn = closers.pop();
        try {
          await fn?.();
        } catch (err) {
          opts.stderr.write(`warning: cleanup failed: ${errorMessage(err)}\n`);
        }
      }
      try {
        logger?.flush();
      } catch {
        // The async destination may not have opened yet (a command that failed early): nothing
        // buffered to lose, and the exit code must not change because of it.
      }
    },
  };
}

/**
 * Subcommands that only read the state database: a config with only `store` (and `bank`,
 * `mappings`, `core.file` as they need) is enough; `platform` may be left out (issue 42: the
 * README's `customers list` hint with only store.path failed with `platform: required`).
 */
export const STATE_ONLY_COMMANDS: ReadonlySet<string> = new Set([
  'customers list',
  'customers show',
  'loans list',
  'loans show',
  'batches list',
  'batches show',
  'state leader',
]);

/** The commands that run without a config: they make their own (the demo) or need none (the sandbox). */
export const COMMANDS_WITHOUT_CONFIG: ReadonlySet<string> = new Set(['demo', 'sandbox']);

/**
 * Subcommands that work on files named on their command line (`mappings lint --dir D`, `state
 * verify FILE`): they take a config when one is given and need none otherwise. Without `--dir`
 * they ask for the config's mappings.dir, which refuses like any command without a config.
 */
export const SUBCOMMANDS_WITHOUT_CONFIG: ReadonlySet<string> = new Set([
  'mappings lint',
  'mappings test',
  'mappings schema',
  'state verify',
  'console passwd',
]);

const SHIPPED_CONFIG_DIR = fileURLToPath(new URL('../../config', import.meta.url));

/** What to say when no config was given: how to give one, and the shipped example to start from. */
export function noConfigMessage(cwd: string = process.cwd()): string {
  let examples: string[] = [];
  try {
    if (existsSync(SHIPPED_CONFIG_DIR)) {
      examples = readdirSync(SHIPPED_CONFIG_DIR)
        .filter((f) => /^example.*\.ya?ml$/.test(f))
        .sort()
        .map((f) => {
          const abs = join(SHIPPED_CONFIG_DIR, f);
          const rel = relative(cwd, abs);
          return rel.startsWith('..') ? abs : rel;
        });
    }
  } catch {
    // Only for the hint.
  }
  const start =
    examples.length > 0 ? ` Start from ${examples.join(' or ')} (every key with its default).` : '';
  return (
    'no config given: pass --config FILE or set BOARDING_CONFIG=FILE ' +
    '(the connector never falls back to built-in defaults).' +
    `${start} Only \`demo\` and \`sandbox\` run without one.`
  );
}
