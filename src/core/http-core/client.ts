import { Agent, request, type FormData } from 'undici';
import { errorMessage } from '../../lib/errors.js';
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

/**
 * The one HTTP client of the HTTP cores (Fineract, Mambu, a fourth): an undici Agent with the
 * connect, headers and body timeouts and the TLS choice, the answer size cap, the URL kept out of
 * error messages (method and path only, no query), and the one classification of a failed call:
 * - a network failure → CoreUnavailableError, ambiguous for a write unless the request never left;
 * - the vendor's own refusals of the operator's setup (credentials, tenant, permission) → the
 *   FatalError its error reader returns;
 * - the same Idempotency-Key still in flight → CoreUnavailableError, ambiguous for a write;
 * - 5xx and the vendor's "try later" statuses → CoreUnavailableError, ambiguous for a write that
 *   may have committed (never for 429, nor for a failure the core replays from its key store);
 * - any other 4xx → CoreRejectedError with the vendor's own words.
 * The vendor supplies its headers, its JSON encoding and its error reader (HttpVendor).
 */

export interface CoreCallOptions {
  body?: unknown;
  form?: FormData;
  /** Sent on every write the core can replay by key. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export type AnswerHeaders = Record<string, string | string[] | undefined>;

/** What a call got back: the status, the headers, the body as text and parsed (parseAnswerBody). */
export interface CoreAnswer {
  status: number;
  headers: AnswerHeaders;
  text: string;
  body: unknown;
}

/** One request as it leaves: everything a tracing hook or a log line may look at. */
export interface CoreRequest {
  method: 'GET' | 'POST';
  /** The path under the base URL, query included. */
  path: string;
  headers: Record<string, string>;
  body?: string | FormData | undefined;
  signal?: AbortSignal | undefined;
}

/** A failed call as the vendor's error reader sees it. */
export interface RefusalContext<C extends CoreCallOptions> {
  /** `POST /clients`: method and path without the query, for messages. */
  where: string;
  answer: CoreAnswer;
  /** The vendor's own words out of its error envelope (HttpVendor.message). */
  message: string;
  /** Whether the call was a write (a POST that is not a search). */
  write: boolean;
  call: C;
}

export interface HttpVendor<C extends CoreCallOptions> {
  /** The core's name in messages (`Fineract`, `Mambu`). */
  name: string;
  /** The config key of the answer size cap, named when an answer passes it. */
  maxResponseBytesKey: string;
  /** Added to a network failure's message when a write may have committed. */
  mayHaveCommitted: string;
  /** Authentication, tenant and media type headers of one call. */
  headers(call: C): Record<string, string>;
  /** A JSON body as the core wants it, and its content type. */
  json(body: unknown): { text: string; contentType: string };
  /** The vendor's own words out of an error answer (its error envelope), scrubbed. */
  message(body: unknown, raw: string): string;
  /** A refusal of the connector's own setup, the same for every loan (a FatalError); else null. */
  fatal(ctx: RefusalContext<C>): Error | null;
  /** Statuses meaning a request with the same Idempotency-Key is still in flight, and what to say. */
  inFlight: { statuses: readonly number[]; text: string };
  /** 4xx statuses meaning "try later" (besides every 5xx). */
  retryLater: readonly number[];
  /** True when the answer is a failure the core replays from its idempotency store (never ambiguous). */
  replayed?(answer: CoreAnswer): boolean;
}

export interface HttpCoreClientOptions {
  baseUrl: string;
  timeoutMs: number;
  insecureTls: boolean;
  /** The answer size cap; default DEFAULT_MAX_RESPONSE_BYTES. */
  maxResponseBytes?: number | undefined;
}

/**
 * A core replayed a failure it stored under this Idempotency-Key: the command behind the key did
 * not commit, so the caller may send the write again under another key. `failure` is what the
 * answer means if nobody does.
 */
export class ReplayedFailureError extends Error {
  override readonly name = 'ReplayedFailureError';
  constructor(
    readonly failure: CoreRejectedError | CoreUnavailableError,
    vendor = 'Fineract',
  ) {
    super(`${failure.message} (replayed by ${vendor} for an Idempotency-Key it already holds)`);
  }
}

export class HttpCoreClient<C extends CoreCallOptions> {
  private readonly agent: Agent;
  private readonly base: string;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly vendor: HttpVendor<C>,
    private readonly options: HttpCoreClientOptions,
  ) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.agent = new Agent({
      connect: { timeout: options.timeoutMs, rejectUnauthorized: !options.insecureTls },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  }

  /** GET that answers null on 404 (look-ups by id or external id). */
  async find<T>(path: string, signal?: AbortSignal): Promise<T | null> {
    return (await this.call('GET', path, (signal ? { signal } : {}) as C, { nullOn404: true }))
      .body as T | null;
  }

  async get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return (await this.call('GET', path, (signal ? { signal } : {}) as C)).body as T;
  }

  async post<T>(path: string, opts: C): Promise<T> {
    return (await this.call('POST', path, opts)).body as T;
  }

  /**
   * One call, classified: the answer of a 2xx (a 404's with `nullOn404`, its body then null), or
   * the error it means. `read` marks a POST that only reads (a search): never ambiguous.
   */
  async call(
    method: 'GET' | 'POST',
    path: string,
    opts: C,
    how: { nullOn404?: boolean; read?: boolean } = {},
  ): Promise<CoreAnswer> {
    // Every call to the core in a span of its own (the W3C traceparent is added in send()).
    return inCoreCallSpan(this.vendor.name.toLowerCase(), method, path, () =>
      this.exchange(method, path, opts, how),
    );
  }

  private async exchange(
    method: 'GET' | 'POST',
    path: string,
    opts: C,
    how: { nullOn404?: boolean; read?: boolean },
  ): Promise<CoreAnswer> {
    const write = !(how.read ?? method === 'GET');
    const where = `${method} ${path.replace(/\?.*$/, '')}`;
    const headers: Record<string, string> = { ...this.vendor.headers(opts) };
    if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
    let body: string | FormData | undefined;
    if (opts.form !== undefined) {
      body = opts.form;
    } else if (opts.body !== undefined) {
      const json = this.vendor.json(opts.body);
      body = json.text;
      headers['content-type'] = json.contentType;
    }
    let answer: CoreAnswer;
    try {
      answer = await this.send({ method, path, headers, body, signal: opts.signal });
    } catch (err) {
      const code = networkErrorCode(err);
      const ambiguous = write && !neverSent(code);
      throw new CoreUnavailableError(
        `${this.vendor.name} ${where}: ${code ?? 'error'}: ` +
          `${scrubText(errorMessage(err))}${ambiguous ? this.vendor.mayHaveCommitted : ''}`,
        ambiguous,
        { cause: err },
      );
    }
    if (answer.status >= 200 && answer.status < 300) return answer;
    if (answer.status === 404 && how.nullOn404 === true) return { ...answer, body: null };
    throw this.failure({
      where,
      answer,
      message: this.vendor.message(answer.body, answer.text),
      write,
      call: opts,
    });
  }

  /**
   * The one place a request leaves for the core (a tracing hook or header goes here): sends it
   * through the agent and reads the answer up to the size cap. Throws only network errors and
   * AnswerTooLargeError; the status is the caller's to judge.
   */
  async send(req: CoreRequest): Promise<CoreAnswer> {
    injectTraceHeaders(req.headers);
    const res = await request(`${this.base}${req.path}`, {
      method: req.method,
      headers: req.headers,
      dispatcher: this.agent,
      ...(req.body !== undefined ? { body: req.body } : {}),
      ...(req.signal ? { signal: req.signal } : {}),
    });
    const text = await readAnswerText(
      res.body,
      this.options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      this.vendor.maxResponseBytesKey,
    );
    noteHttpStatus(res.statusCode);
    return { status: res.statusCode, headers: res.headers, text, body: parseAnswerBody(text) };
  }

  /** The error a non-2xx answer means ("might have committed" decided here, once). */
  private failure(ctx: RefusalContext<C>): Error {
    const v = this.vendor;
    const { where, answer, message, write } = ctx;
    const status = answer.status;
    const fatal = v.fatal(ctx);
    if (fatal !== null) return fatal;
    if (v.inFlight.statuses.includes(status))
      return new CoreUnavailableError(`${v.name} ${where} → ${status}: ${v.inFlight.text}`, write);
    const replayed = v.replayed?.(answer) === true;
    const failure =
      status >= 500 || v.retryLater.includes(status)
        ? new CoreUnavailableError(
            `${v.name} ${where} → ${status}: ${message}`,
            write && status !== 429 && !replayed,
          )
        : new CoreRejectedError(`${v.name} ${where} → ${status}: ${message}`, status, answer.body);
    if (replayed && write && ctx.call.idempotencyKey !== undefined)
      return new ReplayedFailureError(failure, v.name);
    return failure;
  }

  /** Idempotent: the composition root and a test may both close the adapter. */
  close(): Promise<void> {
    this.closing ??= this.agent.close();
    return this.closing;
  }
}

/** Basic credentials as an Authorization header value. */
export function basicAuth(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

/** A URL for an operator's eyes: no user info, no query string. */
export function withoutSecrets(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    u.search = '';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
