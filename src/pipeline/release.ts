import { createHash } from 'node:crypto';
import type { QueueItem } from '../contract/schemas.js';
import { isUsableIdempotencyKey } from '../contract/idempotency-key.js';
import type { LoanRow } from '../store/loans.js';

/**
 * Identifies one release of a loan to the core. The platform gives a re-released loan a new
 * boarding object; its id is the best marker, then the release time. A loan without either (the
 * spec does not promise the boarding object's fields) falls back to a fixed marker, so its
 * acknowledgement key is still stable across retries and restarts.
 */
export function releaseMarker(item: Pick<QueueItem, 'boarding'>): string {
  const b = item.boarding;
  if (typeof b?.id === 'string' && b.id !== '') return b.id;
  if (typeof b?.releasedAt === 'string' && b.releasedAt !== '') return b.releasedAt;
  return 'release';
}

/**
 * The core holds a write of this loan's current release: its next attempt only acknowledges. A
 * write made for an earlier release (re-released since) does not count: the new release is written.
 */
export function writtenForCurrentRelease(
  row: Pick<LoanRow, 'writtenAt' | 'coreReference' | 'writtenReleaseMarker' | 'releaseMarker'>,
): boolean {
  return (
    row.writtenAt !== null &&
    row.coreReference !== null &&
    row.writtenReleaseMarker !== null &&
    row.writtenReleaseMarker === row.releaseMarker
  );
}

/**
 * The acknowledgement's Idempotency-Key: derived from what it does, so every retry reuses it.
 * Readable (`ack:<loan id>:<release>`) when that fits the platform's 255 characters and is a legal
 * header value; otherwise (a long id, or one with non-ASCII or control characters, which no HTTP
 * header may carry) a stable digest of both.
 */
export function ackKey(loanId: string, marker: string): string {
  const key = `ack:${loanId}:${marker}`;
  if (isUsableIdempotencyKey(key)) return key;
  return `ack:${createHash('sha256').update(`${loanId}\u0000${marker}`).digest('hex')}`;
}

/**
 * The key of an acknowledgement sent again after its own key was refused with another body (see
 * acknowledge in board-loan.ts): the key plus a digest of the body, so the same body always gets
 * the same key (a retry or a restart replays it) and another body another key.
 */
export function ackKeyForBody(key: string, body: Record<string, unknown>): string {
  const digest = createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 16);
  const derived = `${key}~${digest}`;
  if (isUsableIdempotencyKey(derived)) return derived;
  return `ack:${createHash('sha256').update(`${key}\u0000${digest}`).digest('hex')}`;
}

// Keys that could carry a full tax id if the platform ever added one to the loan object.
const TIN_KEY = /^(ein|ssn|tin|taxid|taxidentifier|fulltin)$/i;

/**
 * The queue item as stored in SQLite (so a resumed walk can board loans seen before a crash).
 * A loan carries no tax ids per the spec; anything that looks like one is dropped anyway.
 */
export function storableQueueItem(item: QueueItem): string {
  return JSON.stringify(item, (k, v: unknown) => (TIN_KEY.test(k) ? undefined : v));
}

/** Stable JSON (sorted keys) so the same input always hashes the same. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      return Object.fromEntries(
        Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      );
    }
    return v;
  });
}

/** Hash of what the mapping saw: kept instead of the payload (which may carry full tax ids). */
export function payloadHash(value: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(value)).digest('hex')}`;
}
