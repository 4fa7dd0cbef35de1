/**
 * Keyset paging of the console's lists (opaque cursors, checked by type before they reach SQL) and
 * the small conversions its views share.
 */
import { ConsoleError } from './contract.js';

export function encodeCursor(c: object): string {
  return Buffer.from(JSON.stringify(c), 'utf8').toString('base64url');
}

export function decodeCursor<T>(raw: string, check: (v: unknown) => v is T): T {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw new ConsoleError(
      400,
      'cursor: not a cursor this API returned (pass `next` of the previous page)',
      'cursor',
    );
  }
  if (!check(v))
    throw new ConsoleError(
      400,
      'cursor: not a cursor this API returned (pass `next` of the previous page)',
      'cursor',
    );
  return v;
}

// What reaches SQL from a cursor is checked here, by type: a hand-made cursor with a string where a
// number column is compared was a 500 on PostgreSQL (22P02) and a 200 on SQLite (issue 33); a NUL
// in a text value is refused by PostgreSQL too.
export const isText = (v: unknown): v is string => typeof v === 'string' && !v.includes('\u0000');
/**
 * A whole number a BIGINT column holds exactly (2^53 in magnitude: the amount sort's "no amount" sentinel is
 * -2^53).
 */
export const isWhole = (v: unknown): v is number =>
  typeof v === 'number' && Number.isInteger(v) && Math.abs(v) <= 2 ** 53;
export const isRequestCursor = (v: unknown): v is { at: number; id: string } =>
  typeof v === 'object' &&
  v !== null &&
  isWhole((v as { at: unknown }).at) &&
  isText((v as { id: unknown }).id);
export const isSeqCursor = (v: unknown): v is { seq: number } =>
  typeof v === 'object' && v !== null && Number.isSafeInteger((v as { seq: unknown }).seq);

export const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export function parseJson(text: string | null): unknown {
  if (text === null) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
