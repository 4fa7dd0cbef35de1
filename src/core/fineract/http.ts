import { FatalError } from '../../lib/errors.js';
import { scrubText } from '../../lib/redact.js';
import * as httpCore from '../http-core/index.js';

export { ReplayedFailureError } from '../http-core/client.js';

export interface FineractHttpOptions extends httpCore.HttpCoreClientOptions {
  /** e.g. https://core.bank.local/fineract-provider/api/v1 (the answer size cap: core.http.maxResponseBytes) */
  baseUrl: string;
  username: string;
  password: string;
  tenantId: string;
}

/** Idempotency-Key: sent on every write; Fineract replays the first result for a key it has seen. */
export type CallOptions = httpCore.CoreCallOptions;

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
 * The HTTP boundary to Fineract (the shared HttpCoreClient, http-core/client.ts) with what is
 * Fineract's: basic auth and the tenant header, and its error reader — errors of the operator's
 * configuration → FatalError, because every loan would fail the same way: 401 (credentials), 400
 * without a JSON body (an unknown tenant: Fineract's tenant filter answers in plain text), 403
 * `error.msg.not.authorized` (a missing permission); 425 (the same Idempotency-Key still in flight),
 * 408, 409, 429 and 5xx → CoreUnavailableError; other 4xx → CoreRejectedError with Fineract's own
 * message. A failure Fineract replays from its idempotency store (`x-served-from-cache: true`) is
 * wrapped in ReplayedFailureError.
 */
export class FineractHttp extends httpCore.HttpCoreClient<CallOptions> {
  constructor(opts: FineractHttpOptions) {
    super(fineractVendor(opts), opts);
  }
}

function fineractVendor(opts: FineractHttpOptions): httpCore.HttpVendor<CallOptions> {
  const auth = httpCore.basicAuth(opts.username, opts.password);
  return {
    name: 'Fineract',
    maxResponseBytesKey: 'core.http.maxResponseBytes',
    mayHaveCommitted: ' (the write may have committed)',
    headers: () => ({
      authorization: auth,
      'fineract-platform-tenantid': opts.tenantId,
      accept: 'application/json',
    }),
    json: (body) => ({ text: JSON.stringify(body), contentType: 'application/json; charset=utf-8' }),
    message: (body, raw) => fineractMessage(body, raw),
    fatal: ({ where, answer, message }) => {
      const { status, body } = answer;
      if (status === 401)
        return new FatalError(
          `Fineract ${where} → 401: credentials refused (core.http.username/password/tenantId): ${message}`,
        );
      if (status === 400 && (body === null || typeof body !== 'object'))
        return new FatalError(
          `Fineract ${where} → 400 without a JSON body (${message}): Fineract answers an unknown ` +
            `tenant this way; check core.http.tenantId, and that core.http.baseUrl is the Fineract API`,
        );
      if (status === 403 && fineractCodes(body).includes('error.msg.not.authorized'))
        return new FatalError(
          `Fineract ${where} → 403: the user core.http.username lacks a ` +
            `permission (${message}); grant it to the user's role in Fineract`,
        );
      return null;
    },
    inFlight: {
      statuses: [425],
      text: 'a request with the same Idempotency-Key is still being processed; will retry later',
    },
    retryLater: [408, 409, 429],
    replayed: (answer) => answer.headers['x-served-from-cache'] === 'true',
  };
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
