import { createHash } from 'node:crypto';

/**
 * Mambu ids the connector supplies (clients, groups, loan accounts). Mambu lets the caller set `id`
 * and refuses a second create with the same one (DUPLICATE_ID): with an id that never changes for
 * a platform record, that refusal is the lasting duplicate guard, where the Idempotency-Key lives
 * six hours and is not kept for failures.
 *
 * Mambu's ids are short codes (its own generators make digits or an input-mask pattern), so a
 * supplied id is kept to letters and digits, at most MAMBU_ID_MAX characters.
 */
export const MAMBU_ID_MAX = 32;
const ID_RULE = /^[A-Za-z0-9]+$/;

/** Whether Mambu takes `id` as a supplied id (letters and digits, 1–32 characters). */
export function isMambuId(id: string): boolean {
  return id.length >= 1 && id.length <= MAMBU_ID_MAX && ID_RULE.test(id);
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function base32(bytes: Buffer, chars: number): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5 && out.length < chars) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
    if (out.length >= chars) break;
  }
  return out;
}

export type MambuKind = 'client' | 'group' | 'loan';
const PREFIX: Record<MambuKind, string> = { client: 'C', group: 'G', loan: 'L' };

/**
 * The id of a record whose number the bank does not assign (identity.*Numbers.source: core): the
 * kind's letter and 19 base32 characters (95 bits) of the SHA-256 of the kind and the platform id.
 * Deterministic (a retry, a restart, another replica computes the same id), within Mambu's rule for
 * any platform id (opaque strings of any length and character), and the kinds never share an id.
 */
export function derivedMambuId(kind: MambuKind, platformId: string): string {
  const digest = createHash('sha256').update(`${kind}\u0000${platformId}`, 'utf8').digest();
  return `${PREFIX[kind]}${base32(digest, 19)}`;
}

/** A custom field value holds 255 characters: a longer platform id is stored as a digest (and remembered). */
export const MAMBU_REF_MAX = 255;
export const REF_DIGEST_PREFIX = 'sha256:';

/** The platform loan id as stored in the loan's reference custom field (docs/core.md "Mambu"). */
export function mambuRef(platformId: string): string {
  if (platformId.length <= MAMBU_REF_MAX && !platformId.startsWith(REF_DIGEST_PREFIX)) return platformId;
  return `${REF_DIGEST_PREFIX}${createHash('sha256').update(platformId, 'utf8').digest('base64url')}`;
}

/**
 * An Idempotency-Key for one write: Mambu wants a v4 UUID. The key is derived from what the write
 * does (action, the record's ids, the mapping version, the body's hash) rather than drawn at random,
 * so the same write carries the same key on every retry and after a restart, with no key to store;
 * the version and variant bits make it a well-formed v4 UUID.
 */
export function mambuIdempotencyKey(action: string, parts: readonly string[]): string {
  const h = createHash('sha256').update(action).update('\u0000');
  for (const p of parts) h.update(p).update('\u0000');
  const b = h.digest().subarray(0, 16);
  b[6] = ((b[6] as number) & 0x0f) | 0x40;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const hex = b.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** Characters Mambu refuses in a document name, and its length limit. */
export const DOCUMENT_NAME_FORBIDDEN = /[/<>|:&?*[\]#\\"']/g;
export const DOCUMENT_NAME_MAX = 256;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is replaced
const CONTROL = /[\u0000-\u001f\u007f]/g;

/** A document name Mambu takes: forbidden characters become `_`, cut to 256, never empty. */
export function mambuDocumentName(name: string, fallback: string): string {
  const cleaned = name.replace(DOCUMENT_NAME_FORBIDDEN, '_').replace(CONTROL, ' ').trim();
  const out = (cleaned === '' ? fallback.replace(DOCUMENT_NAME_FORBIDDEN, '_') : cleaned).slice(
    0,
    DOCUMENT_NAME_MAX,
  );
  return out === '' ? 'document' : out;
}
