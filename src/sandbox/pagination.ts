import { invalidInput } from './api-error.js';

export type SortValue = number | string;

export interface PageRequest {
  limit: number;
  mode: 'offset' | 'cursor';
  offset: number;
  /** Decoded cursor key, or null at the start of a cursor walk. */
  after: [SortValue, string] | null;
}

export interface CursorScope {
  /** Identifies the list and its ordering; a cursor from another list is refused. */
  scope: string;
}

export function parseLimit(raw: unknown, field = 'limit'): number {
  if (raw === undefined || raw === null || raw === '') return 50;
  const n = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 100)
    throw invalidInput(`${field} must be an integer from 1 to 100`, { field });
  return n;
}

export function parseOffset(raw: unknown, field = 'offset'): number {
  if (raw === undefined || raw === null || raw === '') return 0;
  const n = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > Number.MAX_SAFE_INTEGER)
    throw invalidInput(`${field} must be an integer ≥ 0`, { field });
  return n;
}

export function encodeCursor(scope: string, key: [SortValue, string]): string {
  return Buffer.from(JSON.stringify({ v: 1, s: scope, k: key }), 'utf8').toString('base64url');
}

export function decodeCursor(raw: string, scope: string, field = 'cursor'): [SortValue, string] {
  try {
    const parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as {
      v?: unknown;
      s?: unknown;
      k?: unknown;
    };
    const k = parsed.k;
    if (
      parsed.v === 1 &&
      Array.isArray(k) &&
      k.length === 2 &&
      (typeof k[0] === 'number' || typeof k[0] === 'string') &&
      typeof k[1] === 'string'
    ) {
      if (parsed.s !== scope)
        throw invalidInput(`${field} belongs to another list or ordering; start a new walk`, { field });
      return [k[0], k[1]];
    }
  } catch (err) {
    if (err instanceof Error && err.name === 'ApiError') throw err;
  }
  throw invalidInput(`${field} is not a cursor this server issued`, { field });
}

/**
 * Reads limit/offset/cursor. Cursor mode when a cursor is given, even empty: `cursor=` starts a
 * walk (the spec does not say how a client starts one).
 */
export function pageRequest(
  input: { limit: unknown; offset: unknown; cursor: unknown },
  scope: string,
  fields = { limit: 'limit', offset: 'offset', cursor: 'cursor' },
): PageRequest {
  const limit = parseLimit(input.limit, fields.limit);
  if (input.cursor !== undefined && input.cursor !== null) {
    if (typeof input.cursor !== 'string')
      throw invalidInput(`${fields.cursor} must be a string`, { field: fields.cursor });
    if (input.offset !== undefined && input.offset !== null && input.offset !== '') {
      throw invalidInput(`${fields.cursor} and ${fields.offset} are mutually exclusive`, {
        field: fields.offset,
      });
    }
    const after = input.cursor === '' ? null : decodeCursor(input.cursor, scope, fields.cursor);
    return { limit, mode: 'cursor', offset: 0, after };
  }
  return { limit, mode: 'offset', offset: parseOffset(input.offset, fields.offset), after: null };
}

export function compareKeys(a: [SortValue, string], b: [SortValue, string]): number {
  if (a[0] !== b[0]) {
    if (typeof a[0] === 'number' && typeof b[0] === 'number') return a[0] - b[0];
    return String(a[0]) < String(b[0]) ? -1 : 1;
  }
  return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
}

export interface Page<T> {
  items: T[];
  meta: Record<string, unknown>;
}

/**
 * One page of `items`, which must already be sorted by `keyOf` in `direction`. In cursor mode
 * the next page starts strictly after the last key served, so items removed meanwhile (acked)
 * are neither skipped over nor repeated.
 */
export function paginate<T>(
  items: T[],
  req: PageRequest,
  keyOf: (t: T) => [SortValue, string],
  direction: 'asc' | 'desc',
  scope: string,
  legacy: boolean,
): Page<T> {
  if (req.mode === 'offset') {
    const slice = items.slice(req.offset, req.offset + req.limit);
    const meta: Record<string, unknown> = {
      mode: 'offset',
      limit: req.limit,
      offset: req.offset,
      hasMore: req.offset + slice.length < items.length,
    };
    if (legacy) meta['total'] = items.length;
    return { items: slice, meta };
  }
  const sign = direction === 'asc' ? 1 : -1;
  const after = req.after;
  const rest = after === null ? items : items.filter((t) => sign * compareKeys(keyOf(t), after) > 0);
  const slice = rest.slice(0, req.limit);
  const hasMore = rest.length > slice.length;
  const last = slice[slice.length - 1];
  const meta: Record<string, unknown> = {
    mode: 'cursor',
    limit: req.limit,
    hasMore,
    nextCursor: hasMore && last !== undefined ? encodeCursor(scope, keyOf(last)) : null,
  };
  if (legacy) meta['total'] = items.length;
  return { items: slice, meta };
}
