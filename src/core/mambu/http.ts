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

export type MambuAuth = { apiKey: string } | { username: string; password: string };

export interface MambuHttpOptions {
  /** The tenant's API base, e.g. https://bank.mambu.com/api */
  baseUrl: string;
  auth: MambuAuth;
  /** Credentials of the disbursement (Mambu may forbid the approver to disburse); default: auth. */
  disburseAuth?: MambuAuth | undefined;
  timeoutMs: number;
  insecureTls: boolean;
  /** The answer size cap (core.mambu.maxResponseBytes); default DEFAULT_MAX_RESPONSE_BYTES. */
  maxResponseBytes?: number | undefined;
}

export interface MambuCallOptions {
  body?: unknown;
  form?: FormData;
  /** A v4 UUID; Mambu answers a repeat within six hours with the first (successful) answer. */
  idempotencyKey?: string;
  /** Whose credentials: `disburse` uses core.mambu.disburseAuth. */
  as?: 'main' | 'disburse';
  signal?: AbortSignal;
}

/** One entry of Mambu's error envelope `{"errors":[{errorCode, errorReason, errorSource?}]}`. */
export interface MambuError {
  errorCode?: number | string;
  errorReason?: string;
  errorSource?: string;
}

/** A money or rate value sent as a JSON number written exactly as its decimal text (never a float). */
export class MambuDecimal {
  constructor(readonly text: string) {
    if (!/^-?\d+(\.\d+)?$/.test(text)) throw new CoreRejectedError(`"${text}" is not a decimal number`);
  }
  toJSON(): string {
    return `${DECIMAL_MARK}${this.text}${DECIMAL_MARK}`;
  }
}
const DECIMAL_MARK = '\u2063mambu-decimal\u2063';
const DECIMAL_TOKEN = new RegExp(`"${DECIMAL_MARK}(-?\\d+(?:\\.\\d+)?)${DECIMAL_MARK}"`, 'g');

/** JSON with every MambuDecimal as a bare number, digit for digit. */
export function mambuJson(body: unknown): string {
  return JSON.stringify(body).replace(DECIMAL_TOKEN, '$1');
}

/** Reasons that mean the connector's own setup, not this loan: every loan would fail alike. */
const OPERATOR_REASONS = new Set([
  'INVALID_CREDENTIALS',
  'INVALID_API_KEY',
  'INVALID_USER_WHO_APPROVED_THE_LOAN_CANNOT_DISBURSE_IT',
]);

/**
 * The HTTP boundary to Mambu API v2: the v2 media type, an API key or Basic credentials (a second
 * set for disbursements), JSON with exact decimals, timeouts, and the one place failures are
 * classified:
 * - 401, 403, and the approver-may-not-disburse rule → FatalError: the operator's setup (credentials,
 *   permissions, core.mambu.disburseAuth), the same for every loan;
 * - 409 (and a 102 that ends the exchange) → the same Idempotency-Key is still in flight: retry later,
 *   checking first;
 * - 408, 429, 5xx, timeouts, resets → CoreUnavailableError, ambiguous for a write that may have committed;
 * - other 4xx → CoreRejectedError with Mambu's errorReason and errorSource. Mambu does not cache a
 *   failure under its key, so the next attempt runs the write again.
 */
export class MambuHttp {
  private readonly agent: Agent;
  private readonly base: string;
  private readonly headers: { main: Record<string, string>; disburse: Record<string, string> };

  constructor(private readonly opts: MambuHttpOptions) {
    this.base = opts.baseUrl.replace(/\/+$/, '');
    this.headers = { main: authHeaders(opts.auth), disburse: authHeaders(opts.disburseAuth ?? opts.auth) };
    this.agent = new Agent({
      connect: { timeout: opts.timeoutMs, rejectUnauthorized: !opts.insecureTls },
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
  }

  /** GET that answers null on 404 (look-ups by id). */
  async find<T>(path: string, signal?: AbortSignal): Promise<T | null> {
    return (await this.send('GET', path, signal ? { signal } : {}, true)).body as T | null;
  }

  async get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return (await this.send('GET', path, signal ? { signal } : {}, false)).body as T;
  }

  /** GET of a list page with paginationDetails=ON: the items and Mambu's total (items-total header). */
  async page<T>(
    path: string,
    offset: number,
    limit: number,
    signal?: AbortSignal,
  ): Promise<{ items: T[]; total: number | null }> {
    const sep = path.includes('?') ? '&' : '?';
    const res = await this.send(
      'GET',
      `${path}${sep}offset=${offset}&limit=${limit}&paginationDetails=ON`,
      signal ? { signal } : {},
      false,
    );
    const total = Number(res.headers['items-total']);
    return {
      items: Array.isArray(res.body) ? (res.body as T[]) : [],
      total: Number.isFinite(total) ? total : null,
    };
  }

  async post<T>(path: string, opts: MambuCallOptions): Promise<T> {
    return (await this.send('POST', path, opts, false)).body as T;
  }

  /** A search (POST …:search): a read, sent without an Idempotency-Key, one page of `limit`. */
  async search<T>(
    path: string,
    body: unknown,
    offset: number,
    limit: number,
    signal?: AbortSignal,
  ): Promise<{ items: T[]; total: number | null }> {
    const sep = path.includes('?') ? '&' : '?';
    const res = await this.send(
      'POST',
      `${path}${sep}offset=${offset}&limit=${limit}&paginationDetails=ON`,
      { body, ...(signal ? { signal } : {}) },
      false,
      true,
    );
    const total = Number(res.headers['items-total']);
    return {
      items: Array.isArray(res.body) ? (res.body as T[]) : [],
      total: Number.isFinite(total) ? total : null,
    };
  }

  /** Every call to Mambu in a span of its own, carrying the W3C traceparent. */
  private send(
    method: 'GET' | 'POST',
    path: string,
    opts: MambuCallOptions,
    nullOn404: boolean,
    read = method === 'GET',
  ): Promise<{ body: unknown; headers: Record<string, string | string[] | undefined> }> {
    return inCoreCallSpan('mambu', method, path, () => this.exchange(method, path, opts, nullOn404, read));
  }

  private async exchange(
    method: 'GET' | 'POST',
    path: string,
    opts: MambuCallOptions,
    nullOn404: boolean,
    read: boolean,
  ): Promise<{ body: unknown; headers: Record<string, string | string[] | undefined> }> {
    const write = !read;
    const where = `${method} ${path.replace(/\?.*$/, '')}`;
    const headers: Record<string, string> = {
      ...this.headers[opts.as ?? 'main'],
      accept: 'application/vnd.mambu.v2+json',
    };
    if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
    injectTraceHeaders(headers);
    let body: string | FormData | undefined;
    if (opts.form !== undefined) {
      body = opts.form;
    } else if (opts.body !== undefined) {
      body = mambuJson(opts.body);
      headers['content-type'] = 'application/json';
    }
    let status: number;
    let text: string;
    let resHeaders: Record<string, string | string[] | undefined>;
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
      resHeaders = res.headers;
      text = await readAnswerText(
        res.body,
        this.opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
        'core.mambu.maxResponseBytes',
      );
    } catch (err) {
      const code = networkErrorCode(err);
      const ambiguous = write && !neverSent(code);
      throw new CoreUnavailableError(
        `Mambu ${where}: ${code ?? 'error'}: ` +
          `${scrubText(errorMessage(err))}` +
          (ambiguous
            ? ' (the write may have committed; Mambu answers 102 and drops nothing it started)'
            : ''),
        ambiguous,
        { cause: err },
      );
    }
    const parsed = parseAnswerBody(text);
    if (status >= 200 && status < 300) return { body: parsed, headers: resHeaders };
    if (status === 404 && nullOn404) return { body: null, headers: resHeaders };
    const errors = mambuErrors(parsed);
    const message = mambuMessage(errors, text);
    const reasons = errors.map((e) => e.errorReason);
    const who =
      opts.as === 'disburse' && this.opts.disburseAuth !== undefined
        ? 'core.mambu.disburseAuth'
        : 'core.mambu.auth';
    if (status === 401)
      throw new FatalError(`Mambu ${where} → 401: credentials refused (${who}): ${message}`);
    if (status === 403)
      throw new FatalError(
        `Mambu ${where} → 403: the user or API consumer of ${who} lacks a permission (${message}); grant it in Mambu`,
      );
    if (reasons.includes('INVALID_USER_WHO_APPROVED_THE_LOAN_CANNOT_DISBURSE_IT')) {
      throw new FatalError(
        `Mambu ${where} → ${status}: ${message}: this tenant forbids the approver to ` +
          `disburse; set core.mambu.disburseAuth to other credentials (or disburse: false)`,
      );
    }
    if (reasons.some((r) => r !== undefined && OPERATOR_REASONS.has(r)))
      throw new FatalError(`Mambu ${where} → ${status}: ${message} (${who})`);
    if (status === 409 || status === 102) {
      throw new CoreUnavailableError(
        `Mambu ${where} → ${status}: a request with the same Idempotency-Key ` +
          `is still being processed; will check and retry later`,
        write,
      );
    }
    if (status >= 500 || status === 408 || status === 429)
      throw new CoreUnavailableError(`Mambu ${where} → ${status}: ${message}`, write && status !== 429);
    throw new CoreRejectedError(`Mambu ${where} → ${status}: ${message}`, status, parsed);
  }

  private closing: Promise<void> | undefined;

  /** Idempotent: the composition root and a test may both close the adapter. */
  close(): Promise<void> {
    this.closing ??= this.agent.close();
    return this.closing;
  }
}

function authHeaders(auth: MambuAuth): Record<string, string> {
  if ('apiKey' in auth) return { apikey: auth.apiKey };
  return {
    authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`, 'utf8').toString('base64')}`,
  };
}

/** The entries of Mambu's error envelope (empty when the body is not one). */
export function mambuErrors(body: unknown): MambuError[] {
  if (body === null || typeof body !== 'object') return [];
  const errors = (body as { errors?: unknown }).errors;
  return Array.isArray(errors)
    ? errors.filter((e): e is MambuError => e !== null && typeof e === 'object')
    : [];
}

/** Mambu's own words: each `errorReason` with its `errorSource`. */
export function mambuMessage(errors: readonly MambuError[], raw: string): string {
  const parts = errors.map((e) =>
    [e.errorReason ?? `error ${String(e.errorCode ?? '?')}`, e.errorSource].filter(Boolean).join(': '),
  );
  if (parts.length > 0) return scrubText(parts.join('; ').slice(0, 1000));
  return scrubText(raw.slice(0, 300) || '(empty body)');
}

/** Mambu's answers to a second create with an id already taken. */
const DUPLICATE_ID = new Set([
  'DUPLICATE_ID',
  'CLIENT_ID_ALREADY_IN_USE',
  'GROUP_ID_ALREADY_IN_USE',
  'ACCOUNT_ID_ALREADY_IN_USE',
  'ID_ALREADY_IN_USE',
]);

export function isDuplicateId(detail: unknown): boolean {
  return mambuErrors(detail).some((e) => e.errorReason !== undefined && DUPLICATE_ID.has(e.errorReason));
}
