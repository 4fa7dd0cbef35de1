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
