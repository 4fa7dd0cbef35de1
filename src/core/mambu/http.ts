import { FatalError } from '../../lib/errors.js';
import { scrubText } from '../../lib/redact.js';
import { CoreRejectedError } from '../port.js';
import * as httpCore from '../http-core/index.js';

export type MambuAuth = { apiKey: string } | { username: string; password: string };

export interface MambuHttpOptions extends httpCore.HttpCoreClientOptions {
  /** The tenant's API base, e.g. https://bank.mambu.com/api (the answer size cap: core.mambu.maxResponseBytes) */
  baseUrl: string;
  auth: MambuAuth;
  /** Credentials of the disbursement (Mambu may forbid the approver to disburse); default: auth. */
  disburseAuth?: MambuAuth | undefined;
}

/** idempotencyKey: a v4 UUID; Mambu answers a repeat within six hours with the first (successful) answer. */
export interface MambuCallOptions extends httpCore.CoreCallOptions {
  /** Whose credentials: `disburse` uses core.mambu.disburseAuth. */
  as?: 'main' | 'disburse';
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
 * The HTTP boundary to Mambu API v2 (the shared HttpCoreClient, http-core/client.ts) with what is
 * Mambu's: the v2 media type, an API key or Basic credentials (a second set for disbursements),
 * JSON with exact decimals, list pages, and its error reader:
 * - 401, 403, and the approver-may-not-disburse rule → FatalError: the operator's setup (credentials,
 *   permissions, core.mambu.disburseAuth), the same for every loan;
 * - 409 (and a 102 that ends the exchange) → the same Idempotency-Key is still in flight: retry later,
 *   checking first;
 * - 408, 429, 5xx, timeouts, resets → CoreUnavailableError, ambiguous for a write that may have committed;
 * - other 4xx → CoreRejectedError with Mambu's errorReason and errorSource. Mambu does not cache a
 *   failure under its key, so the next attempt runs the write again.
 */
export class MambuHttp extends httpCore.HttpCoreClient<MambuCallOptions> {
  constructor(opts: MambuHttpOptions) {
    super(mambuVendor(opts), opts);
  }

  /** GET of a list page with paginationDetails=ON: the items and Mambu's total (items-total header). */
  page<T>(path: string, offset: number, limit: number, signal?: AbortSignal): Promise<Page<T>> {
    return this.paged<T>('GET', path, offset, limit, signal ? { signal } : {});
  }

  /** A search (POST …:search): a read, sent without an Idempotency-Key, one page of `limit`. */
  search<T>(
    path: string,
    body: unknown,
    offset: number,
    limit: number,
    signal?: AbortSignal,
  ): Promise<Page<T>> {
    return this.paged<T>('POST', path, offset, limit, { body, ...(signal ? { signal } : {}) });
  }

  private async paged<T>(
    method: 'GET' | 'POST',
    path: string,
    offset: number,
    limit: number,
    opts: MambuCallOptions,
  ): Promise<Page<T>> {
    const sep = path.includes('?') ? '&' : '?';
    const res = await this.call(
      method,
      `${path}${sep}offset=${offset}&limit=${limit}&paginationDetails=ON`,
      opts,
      {
        read: true,
      },
    );
    const total = Number(res.headers['items-total']);
    return {
      items: Array.isArray(res.body) ? (res.body as T[]) : [],
      total: Number.isFinite(total) ? total : null,
    };
  }
}

export interface Page<T> {
  items: T[];
  total: number | null;
}

function mambuVendor(opts: MambuHttpOptions): httpCore.HttpVendor<MambuCallOptions> {
  const headers = { main: authHeaders(opts.auth), disburse: authHeaders(opts.disburseAuth ?? opts.auth) };
  return {
    name: 'Mambu',
    maxResponseBytesKey: 'core.mambu.maxResponseBytes',
    mayHaveCommitted: ' (the write may have committed; Mambu answers 102 and drops nothing it started)',
    headers: (call) => ({ ...headers[call.as ?? 'main'], accept: 'application/vnd.mambu.v2+json' }),
    json: (body) => ({ text: mambuJson(body), contentType: 'application/json' }),
    message: (body, raw) => mambuMessage(mambuErrors(body), raw),
    fatal: ({ where, answer, message, call }) => {
      const status = answer.status;
      const reasons = mambuErrors(answer.body).map((e) => e.errorReason);
      const who =
        call.as === 'disburse' && opts.disburseAuth !== undefined
          ? 'core.mambu.disburseAuth'
          : 'core.mambu.auth';
      if (status === 401)
        return new FatalError(`Mambu ${where} → 401: credentials refused (${who}): ${message}`);
      if (status === 403)
        return new FatalError(
          `Mambu ${where} → 403: the user or API consumer of ${who} lacks a permission (${message}); grant it in Mambu`,
        );
      if (reasons.includes('INVALID_USER_WHO_APPROVED_THE_LOAN_CANNOT_DISBURSE_IT'))
        return new FatalError(
          `Mambu ${where} → ${status}: ${message}: this tenant forbids the approver to ` +
            `disburse; set core.mambu.disburseAuth to other credentials (or disburse: false)`,
        );
      if (reasons.some((r) => r !== undefined && OPERATOR_REASONS.has(r)))
        return new FatalError(`Mambu ${where} → ${status}: ${message} (${who})`);
      return null;
    },
    inFlight: {
      statuses: [409, 102],
      text: 'a request with the same Idempotency-Key is still being processed; will check and retry later',
    },
    retryLater: [408, 429],
  };
}

function authHeaders(auth: MambuAuth): Record<string, string> {
  if ('apiKey' in auth) return { apikey: auth.apiKey };
  return { authorization: httpCore.basicAuth(auth.username, auth.password) };
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
