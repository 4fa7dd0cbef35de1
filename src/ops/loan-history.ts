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
import { isoWithOffset, localDateTime, parseInstant } from '../lib/calendar.js';

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

/**
 * `loans show ID` as text: the row, identity, review items, idempotency keys and the history, one
 * fact a line; times in `timeZone` (bank.timeZone) with its abbreviation, as the console and the
 * report show them.
 */
export function loanHistoryText(h: LoanHistoryParts, timeZone: string): string {
  const { row, events, keys, daemon, customers, accountNumber } = h;
  const isoText = (ms: number | null): string => (ms === null ? '' : localDateTime(ms, timeZone));
  // The platform's own text, shown in the bank's zone when it parses (as it came when it does not).
  const platformTime = (text: string): string => {
    const ms = parseInstant(text);
    return ms === null ? text : localDateTime(ms, timeZone);
  };
  const differs = row.mappingVersion && daemon && row.mappingVersion !== daemon.mappingVersion;
  const daemonText = daemon
    ? `${daemon.mappingVersion} (pid ${daemon.pid} on ${daemon.host})` +
      (daemon.reloadError ? ' · last reload refused' : '') +
      (differs ? ' · differs from this loan' : '')
    : '(no daemon running)';
  const source =
    h.accountNumberSource === 'pool' ? 'from the pool, identity.accountNumbers' : "the core's own";
  const lines = [
    `loan ${row.id}${row.loanNumber ? ` (${row.loanNumber})` : ''}`,
    `  state:           ${row.state}${row.quarantineReason ? ` (${row.quarantineReason})` : ''}`,
    `  attempts:        ${row.attempts}` +
      (row.nextAttemptAt !== null ? ` · next attempt ${isoText(row.nextAttemptAt)}` : ''),
    `  release marker:  ${row.releaseMarker ?? ''}` +
      (row.releasedAtIso ? ` · released ${platformTime(row.releasedAtIso)}` : ''),
    `  core reference:  ${row.coreReference ?? '(not written)'}` +
      (row.writtenAt !== null ? ` · written ${isoText(row.writtenAt)}` : ''),
    `  acknowledged:    ${row.acknowledgedAt !== null ? isoText(row.acknowledgedAt) : 'no'}`,
    `  mapping version: ${row.mappingVersion ?? ''}`,
    `  daemon mapping:  ${daemonText}`,
    `  payload hash:    ${row.payloadHash ?? ''}`,
    '',
    'identity:',
    '  account number:  ' +
      (accountNumber === null
        ? '(none yet: allocated when the loan is fetched, or read back from the core after the write)'
        : `${accountNumber} (${source})`),
  ];
  if (row.lastErrorCode)
    lines.push(`  last error:      [${row.lastErrorCode}] ${row.lastErrorMessage ?? ''}`);
  // Customer match: each business and person → the bank's CIF, and how it was found.
  if (customers.length > 0) lines.push('', 'identity (customers):');
  for (const c of customers) {
    const cif = c.cif ?? '(assigned by the core at create)';
    const seen = c.existing ? ' · existing customer' : ' · new customer (this loan creates it)';
    const name = c.nameAgrees === false ? ' · name differs from the core (review item)' : '';
    lines.push(`  ${c.entityId}  CIF ${cif}  ${c.matchedBy}${seen}${name}`);
  }
  const review = lastReviewItems(h);
  if (review) lines.push('', `review items (boarded with warnings, ${isoText(review.at)}):`);
  for (const w of review?.items ?? []) lines.push(`  [${w.code}] ${w.field}: ${w.message}  (${w.at})`);
  lines.push('', 'idempotency keys:');
  if (keys.length === 0) lines.push('  (none)');
  for (const k of keys) {
    const done =
      k.completedAt !== null ? `completed ${isoText(k.completedAt)} (${k.status ?? ''})` : 'not completed';
    lines.push(`  ${k.key}  ${k.operation}  created ${isoText(k.createdAt)}  ${done}`);
  }
  lines.push('', 'history:');
  for (const e of events) {
    const move = e.toState
      ? `${e.fromState ?? '(new)'} → ${e.toState}`
      : e.fromState
        ? `(${e.fromState})`
        : '';
    const detail = e.detail === null ? '' : ` ${JSON.stringify(e.detail)}`;
    const by = e.actor !== 'connector' ? `  by ${e.actor}` : '';
    const shown = detail.length > 300 ? `${detail.slice(0, 300)}…` : detail;
    lines.push(
      `  ${isoText(e.at)}  ${e.kind.padEnd(10)} ${move}${e.reason ? `  ${e.reason}` : ''}${by}${shown}`,
    );
  }
  return lines.join('\n');
}
