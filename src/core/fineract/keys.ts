import { createHash } from 'node:crypto';

/** Fineract stores Idempotency-Key in CommandSource.idempotency_key, a VARCHAR(50). */
export const MAX_KEY_LENGTH = 50;

/**
 * An Idempotency-Key of at most 50 characters: a readable action prefix and a hash of what the
 * write does (the record's external ids and the mapping version), so the key is stable across
 * retries and restarts, unique per write, and changes when a mapping fix changes the write.
 *
 * `generation` walks a chain of keys for one write. Fineract stores a failed command under its key
 * and replays the failure for ever (`x-served-from-cache`); a replayed failure proves that command
 * did not commit, so the next generation's key is safe to send. Walking the chain from 0 after a
 * restart only meets replays and, at most, one key in flight (425), never two commits.
 */
export function fineractKey(action: string, parts: readonly string[], generation = 0): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\u0000');
  if (generation > 0) h.update(`#${generation}`);
  const digest = h.digest('base64url');
  const prefix = action.slice(0, 16);
  return `${prefix}:${digest.slice(0, MAX_KEY_LENGTH - prefix.length - 1)}`;
}
