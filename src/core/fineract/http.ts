import { Agent, request, type FormData } from 'undici';
import { FatalError, errorMessage } from '../../lib/errors.js';
import { scrubText } from '../../lib/redact.js';
import { inCoreCallSpan, injectTraceHeaders, noteHttpStatus } from '../../lib/tracing.js';
import { CoreRejectedError, CoreUnavailableError } from '../port.js';
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  neverSent,
  networkErrorCode,
  parseAnswerBody,
  readAnswerText,
} from '../http-answer.js';

export interface FineractHttpOptions {
  /** e.g. https://core.bank.local/fineract-provider/api/v1 */
  baseUrl: string;
  username: string;
  password: string;
  tenantId: string;
  timeoutMs: number;
  insecureTls: boolean;
  /** The answer size cap (core.http.maxResponseBytes); default DEFAULT_MAX_RESPONSE_BYTES. */
  maxResponseBytes?: number | undefined;
}

export interface CallOptions {
  body?: unknown;
  form?: FormData;
  /** Sent on every write; Fineract replays the first result for a key it has seen. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

/** Fineract's error body (`PlatformApiDataValidationException` and friends). */
interface FineractErrorBody {
  developerMessage?: string;
  defaultUserMessage?: string;
  userMessageGlobalisationCode?: string;
  errors?: Array<{
    defaultUserMessage?: string;
    developerMessage?: string;
    parameterName?: string;
    userMessageGlobalisationCode?: string;
  }>;
}

/**
 * Fineract replayed a failure it stored under this Idempotency-Key (`x-served-from-cache: true`).
 * The command behind the key did not commit, so the caller may send the write again under the
 * next key of its chain (keys.ts). `failure` is what the answer means if nobody does.
 */
export class ReplayedFailureError extends Error {
  override readonly name = 'ReplayedFailureError';
  constructor(readonly failure: CoreRejectedError | CoreUnavailableError) {
    super(`${failure.message} (replayed by Fineract for an Idempotency-Key it already holds)`);
  }
}

/**
 * The HTTP boundary to Fineract: basic auth, tenant header, JSON, timeouts, and the one place
 * where failures are classified — 4xx → CoreRejectedError with Fineract's own message; errors of
 * the operator's configuration → FatalError, because every loan would fail the same way: 401
 * (credentials), 400 without a JSON body (an unknown tenant: Fineract's tenant filter answers in
 * plain text), 403 `error.msg.not.authorized` (a missing permission); 5xx, 408, 409, 425 (the same
 * Idempotency-Key still in flight), 429, timeouts and resets → CoreUnavailableError, ambiguous
 * for writes that may have committed. A failure Fineract replays from its idempotency store is
 * wrapped in ReplayedFailureError.
 */
export class FineractHttp {
  private readonly agent: Agent;
  private readonly auth: string;
  private readonly base: string;

  constructor(private readonly opts: FineractHttpOptions) {
    this.base = opts.baseUrl.replace(/\/+$/, '');
    this.auth = `Basic ${Buffer.from(`${opts.username}:${opts.password}`, 'utf8').toString('base64')}`;
    this.agent = new Agent({
      connect: { timeout: opts.timeoutMs, rejectUnauthorized: !opts.insecureTls },
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
  }

  /** GET that answers null on 404 (look-ups by external id). */
  async find<T>(path: string, signal?: AbortSignal): Promise<T | null> {
    const res = await this.send('GET', path, signal ? { signal } : {}, true);
    return res as T | null;
  }

  async get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return (await this.send('GET', path, signal ? { signal } : {}, false)) as T;
  }

  async post<T>(path: string, opts: CallOptions): Promise<T> {
    return (await this.send('POST', path, opts, false)) as T;
  }

  /** Every call to Fineract in a span of its own, carrying the W3C traceparent. */
  private send(
    method: 'GET' | 'POST',
    path: string,
    opts: CallOptions,
    nullOn404: boolean,
  ): Promise<unknown> {
    return inCoreCallSpan('fineract', method, path, () => this.exchange(method, path, opts, nullOn404));
  }

  private async exchange(
    method: 'GET' | 'POST',
    path: string,
    opts: CallOptions,
    nullOn404: boolean,
  ): Promise<unknown> {
    const write = method !== 'GET';
    const where = `${method} ${path.replace(/\?.*$/, '')}`;
    const headers: Record<string, string> = {
      authorization: this.auth,
      'fineract-platform-tenantid': this.opts.tenantId,
      accept: 'application/json',
    };
    if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
    injectTraceHeaders(headers);
    let body: string | FormData | undefined;
    if (opts.form !== undefined) {
      body = opts.form;
    } else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = 'application/json; charset=utf-8';
    }
    let status: number;
    let text: string;
    let replayed = false;
    try {
      const res = await request(`${this.base}${path}`, {
        method,
        headers,
        dispatcher: this.agent,
        ...(body !== undefined ? { body } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      status = res.statusCode;
      noteHttpStatus(status);
      replayed = res.headers['x-served-from-cache'] === 'true';
      text = await readAnswerText(
        res.body,
        this.opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
        'core.http.maxResponseBytes',
      );
    } catch (err) {
      const code = networkErrorCode(err);
      const ambiguous = write && !neverSent(code);
      throw new CoreUnavailableError(
        `Fineract ${where}: ${code ?? 'error'}: ` +
          `${scrubText(errorMessage(err))}${ambiguous ? ' (the write may have committed)' : ''}`,
        ambiguous,
        { cause: err },
      );
    }
    const parsed = parseAnswerBody(text);
    if (status >= 200 && status < 300) return parsed;
    if (status === 404 && nullOn404) return null;
    const message = fineractMessage(parsed, text);
    if (status === 401)
      throw new FatalError(
        `Fineract ${where} → 401: credentials refused (core.http.username/password/tenantId): ${message}`,
      );
    if (status === 400 && (parsed === null || typeof parsed !== 'object')) {
      throw new FatalError(
        `Fineract ${where} → 400 without a JSON body (${message}): Fineract answers an unknown ` +
          `tenant this way; check core.http.tenantId, and that core.http.baseUrl is the Fineract API`,
      );
    }
    if (status === 403 && fineractCodes(parsed).includes('error.msg.not.authorized')) {
      throw new FatalError(
        `Fineract ${where} → 403: the user core.http.username lacks a ` +
          `permission (${message}); grant it to the user's role in Fineract`,
      );
    }
    if (status === 425) {
      throw new CoreUnavailableError(
        `Fineract ${where} → 425: a request with the same Idempotency-Key is still being processed; will retry later`,
        write,
      );
    }
    const failure =
      status >= 500 || status === 408 || status === 409 || status === 429
        ? new CoreUnavailableError(
            `Fineract ${where} → ${status}: ${message}`,
            write && status !== 429 && !replayed,
          )
        : new CoreRejectedError(`Fineract ${where} → ${status}: ${message}`, status, parsed);
    if (replayed && write && opts.idempotencyKey !== undefined) throw new ReplayedFailureError(failure);
    throw failure;
  }

  private closing: Promise<void> | undefined;

  /** Idempotent: the composition root and a test may both close the adapter. */
  close(): Promise<void> {
    this.closing ??= this.agent.close();
    return this.closing;
  }
}

/** Fineract's own words: each `errors[].defaultUserMessage` (with its parameter), else the top message. */
export function fineractMessage(body: unknown, raw: string): string {
  if (body !== null && typeof body === 'object') {
    const b = body as FineractErrorBody;
    const parts = (b.errors ?? [])
      .map((e) => {
        const msg = e.defaultUserMessage ?? e.developerMessage;
        if (msg === undefined) return null;
        return e.parameterName && !msg.includes(e.parameterName) ? `${e.parameterName}: ${msg}` : msg;
      })
      .filter((m): m is string => m !== null);
    if (parts.length > 0) return scrubText(parts.join('; ').slice(0, 1000));
    const top = b.defaultUserMessage ?? b.developerMessage;
    if (top !== undefined) return scrubText(top.slice(0, 1000));
  }
  return scrubText(raw.slice(0, 300) || '(empty body)');
}

/** The globalisation codes of a Fineract error body (e.g. error.msg.client.duplicate.externalId). */
export function fineractCodes(body: unknown): string[] {
  if (body === null || typeof body !== 'object') return [];
  const b = body as FineractErrorBody;
  return [
    b.userMessageGlobalisationCode,
    ...(b.errors ?? []).map((e) => e.userMessageGlobalisationCode),
  ].filter((c): c is string => typeof c === 'string');
}
