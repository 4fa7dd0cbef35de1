import type { Disposition } from '../lib/disposition.js';
import { scrubText } from '../lib/redact.js';
import { errorBodySchema, validationErrorBodySchema } from '../contract/schemas.js';
import { serverClockOffsetMs, toHostTime } from './server-clock.js';

/**
 * Every way a Loan Platform call can fail, classified once at the HTTP boundary (stripe-node's
 * Error.ts idea): the pipeline switches on `disposition`, never on status numbers, code strings or
 * message text. The documented codes come first; the rest are ours.
 */
export const DOCUMENTED_CODES = [
  'auth.invalid_key',
  'auth.insufficient_permissions',
  'auth.org_mismatch',
  'auth.env_mismatch',
  'auth.env_not_available',
  'auth.country_restricted',
  'api_key.production_not_allowed',
  'loan.not_found',
  'rate_limit.exceeded',
  'input.invalid',
  'period_key_required',
  'validation',
] as const;

export const CLIENT_CODES = [
  /** 404 on something other than a loan (codes for other resources are not documented). */
  'not_found',
  /** 409: a conflicting write (e.g. an idempotency key reused with another body). */
  'conflict',
  /**
   * 409 whose server code says the first request with this Idempotency-Key is still being
   * processed (a retry overlapped it): the outcome is unknown, so try again later with the same key.
   */
  'in_progress',
  /** Any other 4xx, with the server's code in `serverCode`. */
  'request.rejected',
  /** After 2 strikes in 24 h the client refuses every call on its own (the key is revoked at 3). */
  'rate_limit.traffic_stopped',
  /** A presigned address was refused (expired after 5 minutes, or signature invalid): ask for a new one. */
  'download.expired',
  'download.not_found',
  'download.too_large',
  'download.failed',
  /**
   * The presigned address leads to a loopback, private, metadata or other special-purpose address
   * not in boarding.documentHosts.allow: refused before connecting; a person decides.
   */
  'download.refused',
  /** 2xx whose body does not match the documented shape. */
  'response.invalid',
  'network',
  'timeout',
  'server',
  'aborted',
  'unknown',
] as const;

export type PlatformErrorCode = (typeof DOCUMENTED_CODES)[number] | (typeof CLIENT_CODES)[number];

const KNOWN = new Set<string>([...DOCUMENTED_CODES, ...CLIENT_CODES]);

/** Auth and permission problems an operator must fix: the daemon stops (exit 1) instead of retrying. */
const FATAL_CODES = new Set<PlatformErrorCode>([
  'auth.invalid_key',
  'auth.insufficient_permissions',
  'auth.org_mismatch',
  'auth.env_mismatch',
  'auth.env_not_available',
  'auth.country_restricted',
  'api_key.production_not_allowed',
]);

/** Transient: worth another attempt (writes only with their Idempotency-Key). */
const RETRYABLE_CODES = new Set<PlatformErrorCode>([
  'network',
  'timeout',
  'server',
  'rate_limit.exceeded',
  'in_progress',
]);

/**
 * What the caller does about a failed call (src/lib/disposition.ts), decided here once for every
 * code:
 * - `retry-call`: transient (network, timeout, 5xx, 429, a write still in progress); the client
 *   retries the call itself (writes with the same Idempotency-Key), and when it gives up the loan
 *   is retried later.
 * - `retry-later`: this attempt is lost but a later one may work (a download to fetch again, an
 *   answer of the wrong shape, an abort without our shutdown, something unclassified).
 * - `quarantine`: no retry changes the outcome (a 4xx on this loan, a document over the limit): a
 *   person looks at it.
 * - `fatal`: the credentials or the environment are wrong: every loan would fail alike, so stop.
 * - `stop-cycle`: the client stopped all platform traffic after rate-limit strikes: stop this
 *   cycle, nothing is the loan's fault.
 */
export type PlatformDisposition = Extract<
  Disposition,
  'retry-call' | 'retry-later' | 'quarantine' | 'fatal' | 'stop-cycle'
>;

const RETRY_LATER_CODES = new Set<PlatformErrorCode>([
  'download.expired',
  'download.not_found',
  'download.failed',
  'response.invalid',
  'unknown',
  'aborted',
]);

/** The disposition of a platform error code (any error: src/pipeline/failures.ts dispositionOf). */
export function platformDisposition(code: PlatformErrorCode): PlatformDisposition {
  if (FATAL_CODES.has(code)) return 'fatal';
  if (code === 'rate_limit.traffic_stopped') return 'stop-cycle';
  if (RETRYABLE_CODES.has(code)) return 'retry-call';
  if (RETRY_LATER_CODES.has(code)) return 'retry-later';
  return 'quarantine';
}

export interface PlatformErrorInit {
  code: PlatformErrorCode;
  message: string;
  status?: number | null;
  /** The code string the server sent, when it differs from `code` or is not one we know. */
  serverCode?: string | null;
  /** The `error` array of a 400 validation body. */
  validationErrors?: unknown[];
  /** Operation and path (no query string: presigned queries and cursors stay out of messages). */
  operation?: string | null;
  method?: string | null;
  path?: string | null;
  /** Seconds the server asked us to wait (429, 503). */
  retryAfterSeconds?: number | null;
  cause?: unknown;
}

export class PlatformError extends Error {
  override readonly name = 'PlatformError';
  readonly code: PlatformErrorCode;
  readonly status: number | null;
  readonly serverCode: string | null;
  readonly disposition: PlatformDisposition;
  readonly validationErrors: unknown[];
  readonly operation: string | null;
  readonly method: string | null;
  readonly path: string | null;
  readonly retryAfterSeconds: number | null;

  constructor(init: PlatformErrorInit) {
    // Messages may end up in logs, SQLite and reports: scrub whatever the server echoed back.
    super(scrubText(init.message), init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status ?? null;
    this.serverCode = init.serverCode ?? null;
    this.disposition = platformDisposition(init.code);
    this.validationErrors = init.validationErrors ?? [];
    this.operation = init.operation ?? null;
    this.method = init.method ?? null;
    this.path = init.path ?? null;
    this.retryAfterSeconds = init.retryAfterSeconds ?? null;
  }

  /** A plain object for logs and the loans table: no stack, no request data. */
  /** Transient: the client retries the call itself. */
  get retryable(): boolean {
    return this.disposition === 'retry-call';
  }

  /** Credentials or environment: every call would fail alike. */
  get fatal(): boolean {
    return this.disposition === 'fatal';
  }

  /** A 409 saying the loan is boarded already (our earlier ack whose key the platform no longer remembers). */
  get alreadyBoarded(): boolean {
    return this.status === 409 && /already_boarded/.test(this.serverCode ?? this.code);
  }

  /**
   * A 422 to a write sent under an Idempotency-Key: the body may simply be invalid, or the key may
   * have carried an earlier request with another body (the spec leaves idempotency's rules unsaid;
   * the sandbox answers 422 `idempotency.key_reused`, as such platforms do). The caller that can
   * tell the two apart by sending once more under a key of its own (the acknowledgement) does so.
   */
  get refusedUnderKey(): boolean {
    return this.status === 422;
  }

  /** The message with its HTTP status and the server's code, as commands print a refused call. */
  describe(): string {
    if (this.status === null) return this.message;
    const server = this.serverCode !== null ? `, ${this.serverCode}` : '';
    return `${this.message} (HTTP ${this.status}${server})`;
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      code: this.code,
      status: this.status,
      serverCode: this.serverCode,
      retryable: this.retryable,
      fatal: this.fatal,
      disposition: this.disposition,
      message: this.message,
      operation: this.operation,
      validationErrors: this.validationErrors.length > 0 ? this.validationErrors : undefined,
    };
  }
}

export function isPlatformError(err: unknown): err is PlatformError {
  return err instanceof PlatformError;
}

export interface HttpContext {
  operation: string;
  method: string;
  /** Path without query string. */
  path: string;
}

/**
 * Parses a Retry-After header: delta seconds or an HTTP date. Returns seconds (≥ 0) or null. A date
 * is on the platform's clock: `serverOffsetMs` (serverClockOffsetMs of the answer's Date header)
 * lays it on this host's.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  nowMs: number,
  serverOffsetMs = 0,
): number | null {
  if (value === null || value === undefined || value.trim() === '') return null;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, (toHostTime(at, serverOffsetMs) - nowMs) / 1000);
}

function codeForStatus(status: number, body: unknown): PlatformErrorCode {
  if (status === 400)
    return validationErrorBodySchema.safeParse(body).success ? 'validation' : 'input.invalid';
  if (status === 401) return 'auth.invalid_key';
  if (status === 403) return 'auth.insufficient_permissions';
  if (status === 404) return 'not_found';
  if (status === 408) return 'timeout';
  if (status === 409) return 'conflict';
  if (status === 422) return 'validation';
  if (status === 429) return 'rate_limit.exceeded';
  if (status >= 500) return 'server';
  return 'request.rejected';
}

/** Classifies a non-2xx answer. `body` is the parsed JSON (or the raw text / null). */
export function classifyResponse(
  ctx: HttpContext,
  status: number,
  body: unknown,
  headers: { retryAfter?: string | null | undefined; date?: string | null | undefined },
  nowMs: number,
): PlatformError {
  const parsed = errorBodySchema.safeParse(body);
  const serverCode = parsed.success ? parsed.data.code : null;
  let code: PlatformErrorCode;
  if (status === 429) {
    // Whatever the body says, a 429 is the rate limit: the budget must see it as such.
    code = 'rate_limit.exceeded';
  } else if (
    status === 409 &&
    serverCode !== null &&
    /in_progress|in-progress|processing/i.test(serverCode)
  ) {
    code = 'in_progress';
  } else if (status >= 500 || status === 408) {
    code = codeForStatus(status, body);
  } else if (serverCode !== null && KNOWN.has(serverCode) && !CLIENT_CODES.includes(serverCode as never)) {
    code = serverCode as PlatformErrorCode;
  } else if (serverCode !== null && /^auth\./.test(serverCode)) {
    // An auth code we do not know yet: still an operator problem, never worth a retry.
    code = status === 401 ? 'auth.invalid_key' : 'auth.insufficient_permissions';
  } else {
    code = codeForStatus(status, body);
  }
  const validation = validationErrorBodySchema.safeParse(body);
  const serverMessage = parsed.success ? parsed.data.message : undefined;
  const bodyRetry = parsed.success ? parsed.data.retryAfter : undefined;
  const headerRetry = parseRetryAfter(headers.retryAfter, nowMs, serverClockOffsetMs(headers.date, nowMs));
  const retryAfterSeconds =
    headerRetry === null && bodyRetry === undefined ? null : Math.max(headerRetry ?? 0, bodyRetry ?? 0);
  const detail =
    serverMessage ?? (validation.success ? summarizeValidation(validation.data.error) : undefined);
  return new PlatformError({
    code,
    status,
    serverCode: serverCode !== code ? serverCode : null,
    validationErrors: validation.success ? validation.data.error : [],
    operation: ctx.operation,
    method: ctx.method,
    path: ctx.path,
    retryAfterSeconds,
    message:
      `${ctx.method} ${ctx.path} → ${status} ${code}` +
      (serverCode !== null && serverCode !== code ? ` (${serverCode})` : '') +
      (detail ? `: ${truncate(detail, 300)}` : ''),
  });
}

function summarizeValidation(errors: unknown[]): string {
  return errors
    .slice(0, 5)
    .map((e) => {
      if (e !== null && typeof e === 'object') {
        const o = e as { path?: unknown; message?: unknown; field?: unknown };
        const where = Array.isArray(o.path)
          ? o.path.map(String).join('.')
          : typeof o.field === 'string'
            ? o.field
            : '';
        const what = typeof o.message === 'string' ? o.message : JSON.stringify(e);
        return where ? `${where}: ${what}` : what;
      }
      return String(e);
    })
    .join('; ');
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);
const NETWORK_CODES = new Set([
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_REQ_RETRY',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
]);

/** Classifies a thrown error (undici, socket, abort, our own) into a PlatformError. */
export function classifyThrown(ctx: HttpContext, err: unknown, signal?: AbortSignal): PlatformError {
  if (err instanceof PlatformError) return err;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown } | null;
  const errCode = typeof e?.code === 'string' ? e.code : undefined;
  const causeCode =
    e?.cause !== null &&
    typeof e?.cause === 'object' &&
    typeof (e.cause as { code?: unknown }).code === 'string'
      ? (e.cause as { code: string }).code
      : undefined;
  const anyCode = errCode ?? causeCode;
  const base = { operation: ctx.operation, method: ctx.method, path: ctx.path, cause: err };
  const text = typeof e?.message === 'string' ? e.message : String(err);
  if (
    signal?.aborted === true ||
    e?.name === 'AbortError' ||
    errCode === 'UND_ERR_ABORTED' ||
    errCode === 'ABORT_ERR'
  ) {
    return new PlatformError({ ...base, code: 'aborted', message: `${ctx.method} ${ctx.path}: aborted` });
  }
  if (anyCode !== undefined && TIMEOUT_CODES.has(anyCode)) {
    return new PlatformError({
      ...base,
      code: 'timeout',
      message: `${ctx.method} ${ctx.path}: ${anyCode}: ${text}`,
    });
  }
  if ((anyCode !== undefined && NETWORK_CODES.has(anyCode)) || (anyCode?.startsWith('UND_ERR') ?? false)) {
    return new PlatformError({
      ...base,
      code: 'network',
      message: `${ctx.method} ${ctx.path}: ${anyCode}: ${text}`,
    });
  }
  return new PlatformError({ ...base, code: 'unknown', message: `${ctx.method} ${ctx.path}: ${text}` });
}
