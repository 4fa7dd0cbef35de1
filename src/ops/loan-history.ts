/**
 * One loan's history as `loans show` and the ops console show it, gathered in one place: the row,
 * its events (transitions, attempts with mapping file:line, warnings, ops, webhooks), idempotency
 * keys, identity (account number, customers) and the running daemon's mapping.
 */
import type { BoardingStore } from '../store/index.js';
import type { DaemonStatus } from '../store/daemon-status.js';
import type { IdempotencyKeyRow } from '../store/idempotency.js';
import type { LoanCustomerRow } from '../store/identity/customers.js';
import type { LoanEvent, LoanRow } from '../store/loans.js';
import { runningDaemons } from './daemon-guard.js';
import { UsageError } from '../lib/errors.js';
import { isoWithOffset } from '../lib/calendar.js';

export interface LoanHistoryParts {
  row: LoanRow;
  events: LoanEvent[];
  keys: IdempotencyKeyRow[];
  customers: LoanCustomerRow[];
  daemon: DaemonStatus | null;
  accountNumber: string | null;
  accountNumberSource: 'pool' | 'core' | null;
}

/**
 * The loan a person means by `ref`: a platform loan id, else a loan number (the platform's) or the
 * bank's account number (the core's, or the one the pool issued). `ambiguous` lists every loan a
 * number names when it names more than one.
 */
export async function resolveLoanRef(
  store: BoardingStore,
  ref: string,
): Promise<
  { kind: 'found'; id: string; by: 'id' | 'number' } | { kind: 'ambiguous'; ids: string[] } | { kind: 'none' }
> {
  if ((await store.loans.get(ref)) !== null) return { kind: 'found', id: ref, by: 'id' };
  const ids = new Set(await store.loans.idsByNumber(ref));
  const pooled = await store.numbers.keyOf('account', ref);
  if (pooled !== null && (await store.loans.get(pooled)) !== null) ids.add(pooled);
  const [first, ...rest] = [...ids].sort();
  if (first === undefined) return { kind: 'none' };
  return rest.length === 0
    ? { kind: 'found', id: first, by: 'number' }
    : { kind: 'ambiguous', ids: [first, ...rest] };
}

/** Everything known of one loan; null when the store does not know it. */
export async function gatherLoanHistory(
  store: BoardingStore,
  id: string,
  now: number,
): Promise<LoanHistoryParts | null> {
  const row = await store.loans.get(id);
  if (!row) return null;
  const daemon = (await runningDaemons(store.daemon, now))[0] ?? null;
  // The bank's account number: allocated from the pool (kept in bank_numbers), or the core's own (read back
  // after the write).
  const pooled = await store.numbers.get('account', id);
  const accountNumber = row.accountNumber ?? pooled;
  return {
    row,
    events: await store.loans.events(id),
    keys: await store.keys.forLoan(id),
    customers: await store.customers.forLoan(id),
    daemon,
    accountNumber,
    accountNumberSource:
      accountNumber === null ? null : pooled !== null && pooled === accountNumber ? 'pool' : 'core',
  };
}

/** An instant for JSON: ISO 8601 with the bank zone's offset when the zone is given, else UTC. */
function isoIn(timeZone: string | undefined) {
  return (ms: number | null): string | null =>
    ms === null ? null : timeZone === undefined ? new Date(ms).toISOString() : isoWithOffset(ms, timeZone);
}

/**
 * The public view of a row (no stored queue item; times as ISO strings, with the offset of
 * `timeZone`, bank.timeZone, when given).
 */
export function loanView(r: LoanRow, timeZone?: string): Record<string, unknown> {
  const { queueItem: _item, ...rest } = r;
  const iso = isoIn(timeZone);
  return {
    ...rest,
    nextAttemptAt: iso(r.nextAttemptAt),
    writtenAt: iso(r.writtenAt),
    acknowledgedAt: iso(r.acknowledgedAt),
    coreWriteStartedAt: iso(r.coreWriteStartedAt),
    lastSeenAt: iso(r.lastSeenAt),
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
  };
}

/** The JSON of `loans show --json` (the console's loan page carries the same, and more). */
export function loanHistoryJson(h: LoanHistoryParts, timeZone?: string) {
  const iso = isoIn(timeZone);
  return {
    loan: loanView(h.row, timeZone),
    identity: {
      accountNumber: h.accountNumber,
      accountNumberSource: h.accountNumberSource,
      customers: h.customers.map((c) => ({
        entityId: c.entityId,
        cif: c.cif,
        matchedBy: c.matchedBy,
        existing: c.existing,
        nameAgrees: c.nameAgrees,
      })),
    },
    daemon: h.daemon
      ? {
          pid: h.daemon.pid,
          host: h.daemon.host,
          mappingVersion: h.daemon.mappingVersion,
          reloadError: h.daemon.reloadError,
        }
      : null,
    events: h.events.map((e) => ({ ...e, at: iso(e.at) as string })),
    idempotencyKeys: h.keys.map((k) => ({
      ...k,
      createdAt: iso(k.createdAt) as string,
      completedAt: iso(k.completedAt),
    })),
  };
}

/** The review items of the loan's last mapping (board with warnings): code, field, message, mapping file:line. */
export function lastReviewItems(
  h: LoanHistoryParts,
): { at: number; items: Array<{ code: string; field: string; message: string; at: string }> } | null {
  const lastReview = [...h.events].reverse().find((e) => e.kind === 'warning');
  if (h.row.reviewItems <= 0 || !lastReview) return null;
  return {
    at: lastReview.at,
    items:
      (
        lastReview.detail as {
          warnings?: Array<{ code: string; field: string; message: string; at: string }>;
        } | null
      )?.warnings ?? [],
  };
}

/**
 * `loans show REF`: the loan a person means (id, loan number or account number) and its history; a UsageError
 * when none or several.
 */
export async function showLoan(store: BoardingStore, ref: string, now: number): Promise<LoanHistoryParts> {
  const found = await resolveLoanRef(store, ref);
  if (found.kind === 'ambiguous')
    throw new UsageError(
      `${ref} is the loan or account number of ${found.ids.length} ` +
        `loans: ${found.ids.join(', ')}; give the platform loan id`,
    );
  if (found.kind === 'none')
    throw new UsageError(
      `no loan ${ref} in the state database, by platform id, loan number or account number (see \`loans list\`)`,
    );
  const h = await gatherLoanHistory(store, found.id, now);
  if (!h) throw new UsageError(`no loan ${ref} in the state database (see \`loans list\`)`);
  return h;
}
