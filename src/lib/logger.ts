import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

/**
 * Object paths whose values never reach a log line. Keys are matched at the top level and one or
 * two levels down, which covers how this codebase logs (`{ err }`, `{ req: { headers } }`, config).
 */
const SECRET_KEYS = [
  'apiKey',
  'authorization',
  'Authorization',
  'password',
  'secret',
  'secrets',
  'ein',
  'ssn',
  'tin',
  'taxId',
  'webhookSecret',
];
export const REDACT_PATHS: string[] = SECRET_KEYS.flatMap((k) => [
  k,
  `*.${k}`,
  `*.*.${k}`,
  `headers["${k.toLowerCase()}"]`,
  `*.headers["${k.toLowerCase()}"]`,
]);

const API_KEY_RE = /\b(pk|sk)_(live|test)_[A-Za-z0-9_-]+/g;
const WHSEC_RE = /\bwhsec_[A-Za-z0-9+/=_-]+/g;
const BEARER_RE = /\bBearer\s+[A-Za-z0-9._~+/=-]+/gi;
// A URL with a query string: presigned addresses carry their signature there.
const URL_QUERY_RE = /\b(https?:\/\/[^\s?#"'<>]+)\?[^\s#"'<>]*/g;
// Full US tax ids (EIN 12-3456789, SSN 123-45-6789 or 9 bare digits).
const TIN_RE = /\b(\d{2}-\d{7}|\d{3}-\d{2}-\d{4})\b/g;

/** Scrubs secrets that can hide inside free text (error messages, URLs). */
export function scrubText(text: string): string {
  return text
    .replace(API_KEY_RE, '[redacted-key]')
    .replace(WHSEC_RE, '[redacted-secret]')
    .replace(BEARER_RE, 'Bearer [redacted]')
    .replace(URL_QUERY_RE, '$1?[redacted]')
    .replace(TIN_RE, '[redacted-tin]');
}

function scrubDeep(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) {
    const out: Record<string, unknown> = { type: value.name, message: scrubText(value.message) };
    if (value.stack) out['stack'] = scrubText(value.stack);
    for (const [k, v] of Object.entries(value)) out[k] = scrubDeep(v, depth + 1);
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = scrubDeep(v, depth + 1);
  return out;
}

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
    return pino({ ...base, transport: { target: 'pino-pretty', options: { colorize: true, destination: 2 } } });
  }
  // Logs go to stderr so commands can print machine-readable results on stdout.
  return pino(base, pino.destination({ fd: 2, sync: false }));
}

/** A logger that drops everything (for library use in tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
