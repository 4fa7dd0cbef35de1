import type { Logger } from '../lib/logger.js';
import type { QueuePage, QueueWalkOptions } from './api.js';
import { PlatformError } from './errors.js';
import { parsePageItems, queueItemSchema, type PaginationMeta } from '../contract/schemas.js';

/**
 * Walks GET /public/v1/loans/boarding-queue page by page. The spec puts a list in cursor mode
 * "when a cursor query parameter is supplied", so the first request sends `cursor=` (empty) too;
 * the server answers with meta.mode. A server that answers in offset mode anyway is walked by
 * offset (logged once), and its position is exposed as a `~offset:N` cursor so a checkpoint can
 * resume either way.
 */
export const OFFSET_CURSOR_PREFIX = '~offset:';

export interface RawPage {
  data: unknown[];
  meta: PaginationMeta;
}

export type FetchQueuePage = (query: Record<string, string>, signal?: AbortSignal) => Promise<RawPage>;

export interface QueueWalkDeps {
  fetchPage: FetchQueuePage;
  pageSize: number;
  logger: Logger;
}

function offsetOf(cursor: string | null | undefined): number | null {
  if (typeof cursor !== 'string' || !cursor.startsWith(OFFSET_CURSOR_PREFIX)) return null;
  const n = Number(cursor.slice(OFFSET_CURSOR_PREFIX.length));
  return Number.isInteger(n) && n >= 0 ? n : null;
}

export async function* walkBoardingQueue(
  deps: QueueWalkDeps,
  opts: QueueWalkOptions = {},
): AsyncGenerator<QueuePage, void, undefined> {
  const limit = Math.min(100, Math.max(1, opts.limit ?? deps.pageSize));
  const base: Record<string, string> = { limit: String(limit) };
  if (opts.boarded !== undefined) base['boarded'] = String(opts.boarded);
  if (opts.boardedSince !== undefined) {
    if (opts.boarded !== true) {
      throw new PlatformError({
        code: 'input.invalid',
        message: 'boardingQueue: boardedSince is only valid with boarded=true',
      });
    }
    base['boardedSince'] = opts.boardedSince;
  }
  let cursor: string | null = opts.cursor ?? null;
  let offset: number | null = offsetOf(cursor);
  let warnedOffset = offset !== null;
  const seen = new Set<string>();
  for (;;) {
    if (opts.signal?.aborted) throw new PlatformError({ code: 'aborted', message: 'boardingQueue: aborted' });
    const query: Record<string, string> = { ...base };
    if (offset !== null) query['offset'] = String(offset);
    else query['cursor'] = cursor ?? '';
    const page = await deps.fetchPage(query, opts.signal);
    const { items, invalid } = parsePageItems(queueItemSchema, page.data);
    for (const bad of invalid) {
      deps.logger.warn(
        { loanId: bad.id, index: bad.index, problems: bad.problems },
        'boarding queue item failed validation; reported for quarantine',
      );
    }
    const meta = page.meta;
    let nextCursor: string | null;
    if (meta.mode === 'cursor') {
      nextCursor = meta.hasMore ? meta.nextCursor : null;
      if (meta.hasMore && (nextCursor === null || nextCursor === '')) {
        throw new PlatformError({
          code: 'response.invalid',
          message: 'boarding-queue: meta.hasMore is true but meta.nextCursor is empty',
        });
      }
      if (nextCursor !== null) {
        // A server that hands back a cursor it already gave would make this loop forever.
        if (seen.has(nextCursor) || nextCursor === cursor) {
          throw new PlatformError({
            code: 'response.invalid',
            message: 'boarding-queue: meta.nextCursor repeats an earlier cursor',
          });
        }
        seen.add(nextCursor);
      }
      offset = null;
    } else {
      if (!warnedOffset) {
        warnedOffset = true;
        deps.logger.info(
          { limit },
          'boarding queue answered in offset mode although a cursor was sent; walking by offset (loans ' +
            'acknowledged during the walk shift later pages: the next cycle picks up any it skipped)',
        );
      }
      const next = meta.offset + page.data.length;
      nextCursor = meta.hasMore ? `${OFFSET_CURSOR_PREFIX}${next}` : null;
      if (meta.hasMore && page.data.length === 0) {
        throw new PlatformError({
          code: 'response.invalid',
          message: 'boarding-queue: meta.hasMore is true on an empty offset page',
        });
      }
      offset = next;
    }
    yield { cursor, nextCursor, hasMore: meta.hasMore && nextCursor !== null, items, invalid };
    if (nextCursor === null) return;
    cursor = nextCursor;
  }
}
