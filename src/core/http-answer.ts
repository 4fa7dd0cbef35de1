/**
 * What the HTTP cores (Fineract, Mambu) share about an answer: its body as JSON when it is JSON
 * (else the text, for the error message), and the network error code under undici's wrapping.
 */

/** The body as JSON; `null` when empty; the raw text when it is not JSON. */
export function parseAnswerBody(text: string): unknown {
  if (text === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** A network error's code (`ECONNRESET`, `UND_ERR_CONNECT_TIMEOUT`, …), on the error or its cause. */
export function networkErrorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.cause?.code === 'string') return e.cause.code;
  return undefined;
}

/** Errors that happen before a request can reach the server: a write cannot have committed. */
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
]);

/** True when a failed request never reached the core (its network error code says so): a write is not ambiguous. */
export function neverSent(code: string | undefined): boolean {
  return code !== undefined && NOT_SENT.has(code);
}

/** A core answer's default size cap: far above any loan or client document, far below memory. */
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/** An answer longer than its cap: reading stopped there (issue 43 F6), the key to raise named. */
export class AnswerTooLargeError extends Error {
  override readonly name = 'AnswerTooLargeError';
  readonly code = 'ANSWER_TOO_LARGE';
}

/**
 * An answer's body as text, read chunk by chunk and abandoned (the connection destroyed) as soon
 * as it passes `maxBytes`: a core, or a proxy's error page, streaming hundreds of MiB keeps the
 * connector's memory flat. `key` is the config key that sets the cap, named in the error.
 */
export async function readAnswerText(
  body: AsyncIterable<Buffer> & { destroy(err?: Error): unknown },
  maxBytes: number,
  key: string,
): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw new AnswerTooLargeError(
        `the answer is larger than ${maxBytes} bytes (${key}); reading stopped there. Raise ${key} if the ` +
          'core really answers this much, else look for a proxy or error page in front of it',
      );
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
