/** The platform's limit on an Idempotency-Key (platform-api.md): 255 characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** A legal HTTP header value that no hop trims: printable ASCII, inner spaces only. */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * A key the platform takes and every hop carries as it is: 1 to 255 characters, a legal header
 * value. What the acknowledgement's key is built to be (ackKey) and what the client insists on
 * before a write leaves (transport.ts), in one place.
 */
export function isUsableIdempotencyKey(key: string): boolean {
  return key.length > 0 && key.length <= MAX_IDEMPOTENCY_KEY_LENGTH && HEADER_VALUE.test(key);
}
