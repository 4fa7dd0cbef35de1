/**
 * The exception queue page group: its URL and body filters parsed (400 naming the parameter), a
 * page of the queue by keyset, and its counts by reason and age. What a filter means is the ops
 * filter's (ops/exception-filter.ts), which the bulk requests select by too.
 */
import { z } from 'zod';
import { businessDaysBetween, localDate } from '../lib/calendar.js';
import {
  ageStart,
  exceptionFilterSchema,
  sqlFilter,
  stripUndefined,
  zodRefusal,
} from '../ops/exception-filter.js';
import { ageBucket } from '../reports/compute.js';
import type { ConsoleStore } from '../store/console.js';
import {
  AGE_BUCKETS,
  ConsoleError,
  EXCEPTION_SORTS,
  type ConsoleService,
  type ExceptionItem,
  type ExceptionQuery,
} from './contract.js';
import { decodeCursor, encodeCursor, isText, isWhole, iso } from './paging.js';
import { DEFAULT_LIMIT, MAX_LIMIT, consoleRefusal, type ServiceContext } from './service-context.js';

const exceptionQuerySchema = exceptionFilterSchema.extend({
  sort: z.enum(EXCEPTION_SORTS, { error: `expected one of ${EXCEPTION_SORTS.join(', ')}` }).optional(),
  dir: z.enum(['asc', 'desc'], { error: 'expected asc or desc' }).optional(),
  limit: z.coerce
    .number({ error: `expected a whole number 1–${MAX_LIMIT}` })
    .int({ error: `expected a whole number 1–${MAX_LIMIT}` })
    .min(1, { error: `expected a whole number 1–${MAX_LIMIT}` })
    .max(MAX_LIMIT, { error: `expected a whole number 1–${MAX_LIMIT}` })
    .optional(),
  cursor: z.string().max(2000).optional(),
});

function zodToConsole(err: z.ZodError): ConsoleError {
  return consoleRefusal(zodRefusal(err));
}

/** An exception query from URL parameters (empty values are absent). 400 naming the parameter. */
export function parseExceptionQuery(raw: Record<string, unknown>): ExceptionQuery {
  const cleaned = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== ''));
  for (const [k, v] of Object.entries(cleaned))
    if (typeof v !== 'string') throw new ConsoleError(400, `${k}: expected one value`, k);
  const r = exceptionQuerySchema.safeParse(cleaned);
  if (!r.success) throw zodToConsole(r.error);
  return stripUndefined(r.data) as ExceptionQuery;
}

interface ExceptionCursor {
  s: string;
  d: string;
  v: number | string;
  id: string;
}
const isExceptionCursor = (v: unknown): v is ExceptionCursor =>
  typeof v === 'object' &&
  v !== null &&
  isText((v as ExceptionCursor).s) &&
  isText((v as ExceptionCursor).d) &&
  isText((v as ExceptionCursor).id) &&
  (isWhole((v as ExceptionCursor).v) || isText((v as ExceptionCursor).v));

/** The exception queue: a page of it, and its counts by reason and age. */
export function exceptionMethods(c: ServiceContext): Pick<ConsoleService, 'exceptions' | 'exceptionCounts'> {
  const { cs, clock, tz } = c;

  function exceptionItem(
    r: Awaited<ReturnType<ConsoleStore['exceptionPage']>>['rows'][number],
    now: number,
  ): ExceptionItem {
    const ageDays = businessDaysBetween(localDate(r.enteredAt, tz), localDate(now, tz));
    return {
      id: r.id,
      loanNumber: r.loanNumber,
      state: r.state,
      reason: r.reason as ExceptionItem['reason'],
      reviewItems: r.reviewItems,
      borrowerName: r.borrowerName,
      productId: r.productId,
      amountCents: r.amountCents,
      mappingVersion: r.mappingVersion,
      releasedAt: r.releasedAt,
      since: iso(r.enteredAt) as string,
      ageBusinessDays: ageDays,
      ageBucket: ageBucket(ageDays),
      lastErrorCode: r.lastErrorCode,
      lastErrorMessage: r.lastErrorMessage,
      attempts: r.attempts,
    };
  }

  return {
    async exceptions(query) {
      const now = clock.now();
      const sort = query.sort ?? 'age';
      const dir = query.dir ?? 'asc';
      const limit = query.limit ?? DEFAULT_LIMIT;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
        throw new ConsoleError(400, `limit: expected a whole number 1–${MAX_LIMIT}`, 'limit');
      let after = null;
      if (query.cursor !== undefined) {
        const c = decodeCursor(query.cursor, isExceptionCursor);
        if (c.s !== sort || c.d !== dir)
          throw new ConsoleError(
            400,
            'cursor: it belongs to another sort order (start again without a cursor)',
            'cursor',
          );
        // age and amount compare integer columns, released and id text: the value must be of that kind.
        if ((sort === 'age' || sort === 'amount') !== (typeof c.v === 'number'))
          throw new ConsoleError(
            400,
            'cursor: not a cursor this API returned (pass `next` of the previous page)',
            'cursor',
          );
        after = { v: c.v, id: c.id };
      }
      const { rows } = await cs.exceptionPage(sqlFilter(query, now, tz), sort, dir, after, limit + 1);
      const more = rows.length > limit;
      const page = more ? rows.slice(0, limit) : rows;
      const tail = page[page.length - 1];
      let next: string | null = null;
      if (more && tail) {
        const v =
          sort === 'age'
            ? tail.enteredAt
            : sort === 'amount'
              ? (tail.amountCents ?? -9007199254740992)
              : sort === 'released'
                ? (tail.releasedAt ?? '')
                : tail.id;
        next = encodeCursor({ s: sort, d: dir, v, id: tail.id });
      }
      return { items: page.map((r) => exceptionItem(r, now)), next };
    },

    async exceptionCounts(filter = {}) {
      const now = clock.now();
      const rows = await cs.exceptionCounts(
        sqlFilter(filter, now, tz),
        ageStart(1, now, tz),
        ageStart(5, now, tz),
      );
      return rows.map((r) => {
        const byAge = Object.fromEntries(AGE_BUCKETS.map((b) => [b, 0])) as Record<
          (typeof AGE_BUCKETS)[number],
          number
        >;
        byAge['0-1'] = r.a;
        byAge['2-5'] = r.b;
        byAge['>5'] = r.c;
        return { reason: r.reason as ExceptionItem['reason'], total: r.a + r.b + r.c, byAge };
      });
    },
  };
}
