import { pino, type Logger, type DestinationStream } from 'pino';

import { REDACT_PATHS, scrubDeep, scrubText } from './redact.js';
import { activeTraceIds } from './tracing.js';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level?: string;
  /** Defaults to stdout; tests pass a capturing stream. */
  destination?: DestinationStream;
  /** Pretty output; default: only when stdout is a TTY and no destination is given. */
  pretty?: boolean;
  name?: string;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? process.env['LOG_LEVEL'] ?? 'info';
  const pretty = opts.pretty ?? (opts.destination === undefined && process.stdout.isTTY === true);
  const base = {
    level,
    name: opts.name ?? 'boarding-connector',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    // The trace a line was logged in (a loan's board, a cycle), when tracing is on and it is sampled.
    mixin: () => activeTraceIds() ?? {},
    formatters: {
      log: (obj: Record<string, unknown>) => scrubDeep(obj, 0) as Record<string, unknown>,
    },
    hooks: {
      logMethod(this: Logger, args: Parameters<Logger['info']>, method: (...a: unknown[]) => void) {
        method.apply(
          this,
          (args as unknown[]).map((a) => (typeof a === 'string' ? scrubText(a) : a)),
        );
      },
    },
    serializers: { err: (e: unknown) => scrubDeep(e, 0) },
  };
  if (opts.destination) return pino(base, opts.destination);
  if (pretty) {
    return pino({
      ...base,
      transport: { target: 'pino-pretty', options: { colorize: true, destination: 2 } },
    });
  }
  // Logs go to stderr so commands can print machine-readable results on stdout.
  return pino(base, pino.destination({ fd: 2, sync: false }));
}

/** A logger that drops everything (for library use in tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
