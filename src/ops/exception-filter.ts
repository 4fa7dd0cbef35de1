/**
 * The exception queue's filter (quarantined loans and loans boarded with review items), as the
 * console's queue and its bulk requests select by it: what each field means in the state database,
 * with ages in business days as the reconciliation report counts them (bank.timeZone).
 */
import { z } from 'zod';
import { businessDaysBetween, localDate, zonedToUtc } from '../lib/calendar.js';
import { searchKey } from '../lib/search-key.js';
import type { ExceptionSqlFilter } from '../store/console.js';
import { QUARANTINE_REASONS, type QuarantineReason } from '../store/loan-states.js';
import { refusal, type Refusal } from './refusal.js';

/**
 * What the exception queue holds: quarantined loans (reason = the quarantine reason) and loans
 * boarded with review items (reason = `review`).
 */
export type ExceptionReason = QuarantineReason | 'review';
/** `quarantined` or `review` (acknowledged/written with review items); absent: both. */
export type ExceptionState = 'quarantined' | 'review';

/**
 * Filters of the exception queue; every one optional, combined with AND. Also the `filter` of a
 * bulk request (frozen in the request: its preview count is taken when the request is made).
 */
export interface ExceptionFilter {
  state?: ExceptionState;
  reason?: ExceptionReason;
  /** Search: an exact loan id, a loan number, or part of the borrower's name (case-insensitive). */
  q?: string;
  /** Platform product id. */
  product?: string;
  /** Principal in cents, inclusive. */
  minAmountCents?: number;
  maxAmountCents?: number;
  mappingVersion?: string;
  /** Release date (the platform's releasedAt, YYYY-MM-DD, inclusive). */
  releasedFrom?: string;
  releasedTo?: string;
  /** Only loans in their state at least / at most this many business days (the report's age, bank.timeZone). */
  minAgeDays?: number;
  maxAgeDays?: number;
}

const EXCEPTION_REASON_VALUES = [...QUARANTINE_REASONS, 'review'] as const;
const day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, { error: 'expected a date YYYY-MM-DD' });
const cents = z.coerce
  .number({ error: 'expected a whole number of cents' })
  .int({ error: 'expected a whole number of cents' })
  .refine(Number.isSafeInteger, { error: 'expected a whole number of cents' });
const days = z.coerce
  .number({ error: 'expected a whole number of business days ≥ 0' })
  .int({ error: 'expected a whole number of business days ≥ 0' })
  .min(0, { error: 'expected a whole number of business days ≥ 0' })
  .max(3650, { error: 'expected at most 3650 business days' });
const text = (max: number) =>
  z
    .string({ error: 'expected text' })
    .trim()
    .min(1, { error: 'expected text' })
    .max(max, { error: `expected at most ${max} characters` });

/** What a filter may hold (also the URL parameters of the queue, which add paging). */
export const exceptionFilterSchema = z.strictObject({
  state: z.enum(['quarantined', 'review'], { error: 'expected quarantined or review' }).optional(),
  reason: z
    .enum(EXCEPTION_REASON_VALUES, { error: `expected one of ${EXCEPTION_REASON_VALUES.join(', ')}` })
    .optional(),
  q: text(200).optional(),
  product: text(200).optional(),
  minAmountCents: cents.optional(),
  maxAmountCents: cents.optional(),
  mappingVersion: text(200).optional(),
  releasedFrom: day.optional(),
  releasedTo: day.optional(),
  minAgeDays: days.optional(),
  maxAgeDays: days.optional(),
});

/** A zod failure as a refusal naming the field (`filter.` before it for a request body's filter). */
export function zodRefusal(err: z.ZodError, prefix = ''): Refusal {
  const issue = err.issues[0];
  const path = issue ? issue.path.map(String).join('.') : '';
  const field = `${prefix}${path}`;
  const message =
    issue?.code === 'unrecognized_keys'
      ? `unknown field(s) ${issue.keys.join(', ')}`
      : (issue?.message ?? 'invalid');
  return refusal('invalid', `${field || 'body'}: ${message}`, field || undefined);
}

export function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** A filter as given (a request body's `filter`), or a refusal naming `filter.<field>`. */
export function checkExceptionFilter(raw: unknown): ExceptionFilter | Refusal {
  const r = exceptionFilterSchema.safeParse(raw);
  if (!r.success) return zodRefusal(r.error, 'filter.');
  return stripUndefined(r.data) as ExceptionFilter;
}

function previousDay(d: string): string {
  const t = Date.UTC(Number(d.slice(0, 4)), Number(d.slice(5, 7)) - 1, Number(d.slice(8, 10))) - 86_400_000;
  return new Date(t).toISOString().slice(0, 10);
}

/** The first instant whose age (business days to today, bank zone) is at most `maxDays`. */
export function ageStart(maxDays: number, now: number, timeZone: string): number {
  const today = localDate(now, timeZone);
  let d = today;
  for (let i = 0; i < maxDays * 2 + 14; i++) {
    const prev = previousDay(d);
    if (businessDaysBetween(prev, today) > maxDays) break;
    d = prev;
  }
  return zonedToUtc(
    { year: Number(d.slice(0, 4)), month: Number(d.slice(5, 7)), day: Number(d.slice(8, 10)) },
    timeZone,
  );
}

function nextDayString(d: string): string {
  const t = Date.UTC(Number(d.slice(0, 4)), Number(d.slice(5, 7)) - 1, Number(d.slice(8, 10))) + 86_400_000;
  return new Date(t).toISOString().slice(0, 10);
}

/** The filter as the store's exception queries take it (search key, inclusive end day, age bounds as times). */
export function sqlFilter(f: ExceptionFilter, now: number, timeZone: string): ExceptionSqlFilter {
  const out: ExceptionSqlFilter = {};
  if (f.state !== undefined) out.state = f.state;
  if (f.reason !== undefined) out.reason = f.reason;
  if (f.q !== undefined) {
    out.q = f.q;
    const key = searchKey(f.q);
    if (key !== '') out.qKey = key;
  }
  if (f.product !== undefined) out.product = f.product;
  if (f.minAmountCents !== undefined) out.minAmountCents = f.minAmountCents;
  if (f.maxAmountCents !== undefined) out.maxAmountCents = f.maxAmountCents;
  if (f.mappingVersion !== undefined) out.mappingVersion = f.mappingVersion;
  if (f.releasedFrom !== undefined) out.releasedFrom = f.releasedFrom;
  if (f.releasedTo !== undefined) out.releasedTo = nextDayString(f.releasedTo);
  if (f.maxAgeDays !== undefined) out.enteredSince = ageStart(f.maxAgeDays, now, timeZone);
  if (f.minAgeDays !== undefined && f.minAgeDays > 0)
    out.enteredBefore = ageStart(f.minAgeDays - 1, now, timeZone);
  return out;
}
