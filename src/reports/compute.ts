import { businessDaysBetween, comparableDate, localDate, parseInstant } from '../lib/calendar.js';
import { PENDING_STATES } from '../store/loan-states.js';
import { formatCents } from './money.js';
import {
  AGE_BUCKETS,
  COMPARED_FIELDS,
  type AgeBucket,
  type AgingSummary,
  type Amount,
  type ComparedField,
  type ControlTotals,
  type CoreLoanRow,
  type ExceptionReason,
  type FundedRow,
  type PlatformLoanRow,
  type ReconcileProgress,
  type ReportException,
  type ReportReviewItem,
  type StoreLoanRow,
  type TieOutCheck,
} from './types.js';

/**
 * Reconciliation logic, free of I/O: sources come in as (async) iterables of compact rows, results
 * go out through callbacks and the returned totals. Each loan is kept as one small merged record,
 * so memory grows with the number of loans, not with payload sizes.
 */
export interface ReconcileSources {
  /** Connector rows in scope (all rows, or with --since only those open or acknowledged since). */
  storeRows(): Iterable<StoreLoanRow> | AsyncIterable<StoreLoanRow>;
  /** Count of storeRows (for progress), if cheap to know. */
  storeCount?(): number | Promise<number>;
  /** Whether the connector knows a loan at all (rows outside the --since scope included). */
  storeKnows(id: string): boolean | Promise<boolean>;
  /** Boarded loans on the platform (boarded=true, boardedSince when --since). */
  platformBoarded(): AsyncIterable<PlatformLoanRow>;
  /** Every loan in the core, when the core can list; otherwise the loans are looked up one by one. */
  coreList?(): AsyncIterable<CoreLoanRow>;
  coreFind(id: string): Promise<CoreLoanRow | null>;
  /** loan.funded events as recorded; null when the store has no record of them (check skipped). */
  funded(): Iterable<FundedRow> | null | Promise<Iterable<FundedRow> | null>;
  /** The review items of a loan boarded with review items, at most `limit` (absent: not listed). */
  reviewItems?(id: string, limit: number): ReportReviewItem[] | Promise<ReportReviewItem[]>;
}

/** Review items printed per loan in the report; the rest are counted ("+N more"). */
export const REVIEW_ITEMS_PER_LOAN = 10;

export interface ReconcileOptions {
  asOfMs: number;
  timeZone: string;
  fundedNotReleasedDays: number;
  /** ISO lower bound of a partial run (platform boardedSince), or null. */
  since: string | null;
  signal?: AbortSignal;
  onProgress?: (p: ReconcileProgress) => void;
  /** Called for each exception as it is found (stream it to the CSV). */
  onException?: (e: ReportException) => void | Promise<void>;
  /** Parallel core look-ups when the core cannot list. */
  coreLookupConcurrency?: number;
}

export interface ReconcileOutcome {
  totals: ControlTotals;
  tieOut: TieOutCheck[];
  aging: AgingSummary;
  exceptions: ReportException[];
  exceptionsByReason: Partial<Record<ExceptionReason, number>>;
  mappingVersions: Array<{ version: string; loans: number }>;
  notes: string[];
  loansSeen: number;
}

/**
 * Compact forms kept per loan. Ids live only in the map key; times are numbers; low-cardinality
 * strings (states, products, frequencies, dates, versions) are interned so 100k loans share them;
 * compared fields are normalised once, on the way in.
 */
interface StoreRec {
  loanNumber: string | null;
  state: string;
  quarantineReason: string | null;
  centsAmount: number | null;
  wrote: boolean;
  mappingVersion: string | null;
  releasedAt: number | null;
  boardedAt: number | null;
  writtenAt: number | null;
  acknowledgedAt: number | null;
  lastErrorMessage: string | null;
  reviewItems: number;
  createdAt: number;
  updatedAt: number;
}

type Compared = Record<ComparedField, string | number | null>;

interface PlatformRec {
  loanNumber: string | null;
  boardedAt: number | null;
  values: Compared;
}

interface CoreRec {
  coreReference: string;
  mappingVersion: string | null;
  values: Compared;
}

interface Merged {
  s?: StoreRec;
  p?: PlatformRec;
  c?: CoreRec;
}

class Interner {
  private readonly seen = new Map<string, string>();
  of(v: string | null): string | null {
    if (v === null) return null;
    const hit = this.seen.get(v);
    if (hit !== undefined) return hit;
    // Bounded: past this many distinct values a field is not low-cardinality; stop interning.
    if (this.seen.size < 50_000) this.seen.set(v, v);
    return v;
  }
}

const PENDING = new Set<string>(PENDING_STATES);

const emptyAmount = (): Amount => ({ count: 0, cents: 0, unknownAmount: 0 });

function add(a: Amount, cents: number | null): void {
  a.count += 1;
  if (cents === null) a.unknownAmount += 1;
  else a.cents += cents;
}

/** Whether the connector has written the loan to the core (at some point in its life). */
export function connectorWrote(s: StoreLoanRow): boolean {
  return s.state === 'written' || s.state === 'acknowledged' || s.writtenAt !== null || s.coreReference !== null;
}

/** The value a field is compared by (dates in the bank zone, codes trimmed, frequency lower-case). */
function normalize(field: ComparedField, value: string | number | null, timeZone: string, intern: Interner, dates: Map<string, string>): string | number | null {
  if (value === null) return null;
  switch (field) {
    case 'centsAmount':
    case 'bpsRate':
      return value;
    case 'maturityDate':
    case 'firstPaymentDate': {
      const raw = String(value);
      let d = dates.get(raw);
      if (d === undefined) {
        d = intern.of(comparableDate(raw, timeZone)) as string;
        if (dates.size < 50_000) dates.set(raw, d);
      }
      return d;
    }
    case 'paymentFrequency':
      return intern.of(String(value).trim().toLowerCase());
    case 'productId':
      return intern.of(String(value).trim());
  }
}

/** How a compared value is shown to people (amounts in currency units, rates in bps). */
function display(field: ComparedField, value: string | number | null): string | null {
  if (value === null) return null;
  if (field === 'centsAmount' && typeof value === 'number') return formatCents(value);
  if (field === 'bpsRate') return `${value} bps`;
  return String(value);
}

function cents(r: PlatformRec | CoreRec | undefined): number | null {
  const v = r?.values.centsAmount;
  return typeof v === 'number' ? v : null;
}

function checkAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('reconciliation aborted');
}

export async function computeReconciliation(sources: ReconcileSources, opts: ReconcileOptions): Promise<ReconcileOutcome> {
  const { timeZone, signal } = opts;
  const progress = opts.onProgress ?? (() => undefined);
  const asOfDate = localDate(opts.asOfMs, timeZone);
  const loans = new Map<string, Merged>();
  const notes: string[] = [];
  const intern = new Interner();
  const dates = new Map<string, string>();
  const values = (r: PlatformLoanRow | CoreLoanRow): Compared => ({
    centsAmount: r.centsAmount,
    bpsRate: r.bpsRate,
    maturityDate: normalize('maturityDate', r.maturityDate, timeZone, intern, dates),
    firstPaymentDate: normalize('firstPaymentDate', r.firstPaymentDate, timeZone, intern, dates),
    paymentFrequency: normalize('paymentFrequency', r.paymentFrequency, timeZone, intern, dates),
    productId: normalize('productId', r.productId, timeZone, intern, dates),
  });
  const storeRec = (s: StoreLoanRow): StoreRec => ({
    loanNumber: s.loanNumber,
    state: intern.of(s.state) as string,
    quarantineReason: intern.of(s.quarantineReason),
    centsAmount: s.centsAmount,
    wrote: connectorWrote(s),
    mappingVersion: intern.of(s.mappingVersion),
    releasedAt: parseInstant(s.releasedAtIso),
    boardedAt: parseInstant(s.boardedAtIso),
    writtenAt: s.writtenAt,
    acknowledgedAt: s.acknowledgedAt,
    // Only open items need their error text.
    lastErrorMessage: s.state === 'acknowledged' ? null : s.lastErrorMessage,
    reviewItems: s.reviewItems ?? 0,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  });
  const platformRec = (p: PlatformLoanRow, known: boolean): PlatformRec => ({
    loanNumber: known ? null : p.loanNumber,
    boardedAt: parseInstant(p.boardedAt),
    values: values(p),
  });
  const coreRec = (c: CoreLoanRow): CoreRec => ({ coreReference: c.coreReference, mappingVersion: intern.of(c.mappingVersion), values: values(c) });

  // 1. The connector's ledger.
  const storeTotal = (await sources.storeCount?.()) ?? null;
  let n = 0;
  for await (const s of sources.storeRows()) {
    loans.set(s.id, { s: storeRec(s) });
    if (++n % 1000 === 0) {
      checkAborted(signal);
      progress({ phase: 'store', done: n, total: storeTotal });
    }
  }
  progress({ phase: 'store', done: n, total: storeTotal ?? n });

  // 2. The platform's boarded loans.
  n = 0;
  for await (const p of sources.platformBoarded()) {
    const m = loans.get(p.id);
    if (m) m.p = platformRec(p, m.s?.loanNumber !== undefined && m.s.loanNumber !== null);
    else loans.set(p.id, { p: platformRec(p, false) });
    if (++n % 100 === 0) {
      checkAborted(signal);
      progress({ phase: 'platform', done: n, total: null });
    }
  }
  progress({ phase: 'platform', done: n, total: n });

  // 3. The core.
  n = 0;
  if (sources.coreList) {
    for await (const c of sources.coreList()) {
      const m = loans.get(c.id);
      if (m) m.c = coreRec(c);
      // With --since, a core loan outside the scope is not an exception: the connector knows it.
      else if (opts.since === null || !(await sources.storeKnows(c.id))) loans.set(c.id, { c: coreRec(c) });
      if (++n % 1000 === 0) {
        checkAborted(signal);
        progress({ phase: 'core', done: n, total: null });
      }
    }
    progress({ phase: 'core', done: n, total: n });
  } else {
    const ids = [...loans].filter(([, m]) => m.p !== undefined || m.s?.wrote === true).map(([id]) => id);
    const total = ids.length;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < ids.length) {
        checkAborted(signal);
        const id = ids[next++] as string;
        const c = await sources.coreFind(id);
        if (c) (loans.get(id) as Merged).c = coreRec(c);
        if (++n % 100 === 0) progress({ phase: 'core', done: n, total });
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, opts.coreLookupConcurrency ?? 8) }, worker));
    progress({ phase: 'core', done: n, total });
    notes.push('The core cannot list its loans: loans in the core that the connector and the platform do not know were not searched for.');
  }

  // 4. Compare.
  const totals: ControlTotals = {
    released: emptyAmount(),
    pending: emptyAmount(),
    writtenAwaitingAck: emptyAmount(),
    acknowledged: emptyAmount(),
    quarantined: emptyAmount(),
    skipped: emptyAmount(),
    otherState: emptyAmount(),
    connectorWritten: emptyAmount(),
    writtenToCore: emptyAmount(),
    acknowledgedOnPlatform: emptyAmount(),
  };
  const exceptions: ReportException[] = [];
  const byReason: Partial<Record<ExceptionReason, number>> = {};
  const aging: AgingSummary = { byReason: {}, totals: { '0-1': 0, '2-5': 0, '>5': 0 } };
  const versions = new Map<string, number>();

  const ageOf = (sinceMs: number | null): { days: number; bucket: AgeBucket } => {
    if (sinceMs === null) return { days: 0, bucket: '0-1' };
    const days = businessDaysBetween(localDate(sinceMs, timeZone), asOfDate);
    return { days, bucket: ageBucket(days) };
  };

  const emit = async (
    reason: ExceptionReason,
    loanId: string,
    m: Merged,
    sinceMs: number | null,
    detail: string,
    extra: Partial<Pick<ReportException, 'field' | 'platformValue' | 'coreValue' | 'reviewItems' | 'reviewItemsMore'>> = {},
  ): Promise<void> => {
    const age = ageOf(sinceMs);
    const e: ReportException = {
      reason,
      loanId,
      loanNumber: m.s?.loanNumber ?? m.p?.loanNumber ?? null,
      field: extra.field ?? null,
      platformValue: extra.platformValue ?? null,
      coreValue: extra.coreValue ?? null,
      connectorState: m.s?.state ?? null,
      centsAmount: cents(m.p) ?? m.s?.centsAmount ?? cents(m.c) ?? null,
      since: sinceMs === null ? null : new Date(sinceMs).toISOString(),
      ageBusinessDays: age.days,
      ageBucket: age.bucket,
      detail,
      ...(extra.reviewItems !== undefined ? { reviewItems: extra.reviewItems, reviewItemsMore: extra.reviewItemsMore ?? 0 } : {}),
    };
    // Kept without its review items (up to REVIEW_ITEMS_PER_LOAN each): the renderers look them
    // up again; the CSV gets them now, through onException.
    if (e.reviewItems === undefined) exceptions.push(e);
    else {
      const kept: ReportException = { ...e };
      delete kept.reviewItems;
      exceptions.push(kept);
    }
    byReason[reason] = (byReason[reason] ?? 0) + 1;
    const row = (aging.byReason[reason] ??= { '0-1': 0, '2-5': 0, '>5': 0 });
    row[age.bucket] += 1;
    aging.totals[age.bucket] += 1;
    await opts.onException?.(e);
  };

  const compareTotal = loans.size;
  n = 0;
  for (const [id, m] of loans) {
    const { s, p, c } = m;
    const amount = s?.centsAmount ?? cents(p) ?? cents(c);
    const version = c?.mappingVersion ?? s?.mappingVersion ?? null;
    if (version !== null) versions.set(version, (versions.get(version) ?? 0) + 1);

    if (s) {
      add(totals.released, amount);
      if (PENDING.has(s.state)) add(totals.pending, amount);
      else if (s.state === 'written') add(totals.writtenAwaitingAck, amount);
      else if (s.state === 'acknowledged') add(totals.acknowledged, amount);
      else if (s.state === 'quarantined') add(totals.quarantined, amount);
      else if (s.state === 'skipped') add(totals.skipped, amount);
      else add(totals.otherState, amount);
      if (s.wrote) add(totals.connectorWritten, s.centsAmount ?? cents(c) ?? cents(p));
    }
    if (c) add(totals.writtenToCore, cents(c));
    if (p) add(totals.acknowledgedOnPlatform, cents(p));

    const boardedMs = p?.boardedAt ?? s?.acknowledgedAt ?? s?.boardedAt ?? null;
    if (p && !c) {
      await emit('acknowledged_missing_in_core', id, m, boardedMs, 'The platform lists the loan as boarded but the core has no record with this external id.');
    }
    if (c && !p) {
      if (!s) {
        await emit('in_core_unknown_to_connector', id, m, null, `The core holds ${c.coreReference} for this external id but neither the connector nor the platform (boarded) knows the loan.`);
      } else if (s.state === 'acknowledged') {
        await emit('in_core_not_acknowledged', id, m, s.acknowledgedAt ?? s.writtenAt, `In the core as ${c.coreReference}; the connector recorded an acknowledgement but the platform does not list the loan as boarded.`);
      } else {
        await emit('in_core_not_acknowledged', id, m, s.writtenAt ?? s.updatedAt, `In the core as ${c.coreReference}; the acknowledgement to the platform is outstanding (connector state ${s.state}).`);
      }
    }
    if (s?.wrote === true && !c && !p) {
      await emit('written_missing_in_core', id, m, s.writtenAt ?? s.updatedAt, `The connector recorded a core write (state ${s.state}) but the core has no record with this external id.`);
    }
    if (p && !s) {
      await emit('acknowledged_unknown_to_connector', id, m, boardedMs, 'The platform lists the loan as boarded but the connector has no record of it (boarded by someone else, or state lost).');
    }
    if (p && s && s.state !== 'acknowledged') {
      await emit('state_mismatch', id, m, boardedMs, `The platform lists the loan as boarded; the connector's state is ${s.state}.`);
    }
    if (s?.state === 'acknowledged' && s.reviewItems > 0) {
      const items = await sources.reviewItems?.(id, REVIEW_ITEMS_PER_LOAN);
      const listed = items === undefined ? `\`loans show ${id}\` lists them` : items.length > 0 ? 'listed with this exception' : 'their details are no longer in the loan history';
      await emit('boarded_with_review_items', id, m, s.acknowledgedAt ?? s.writtenAt ?? s.updatedAt, `Boarded with ${s.reviewItems} review item(s) from the mapping conventions: ${listed}.`, {
        ...(items !== undefined ? { reviewItems: items, reviewItemsMore: Math.max(0, s.reviewItems - items.length) } : {}),
      });
    }
    if (s?.state === 'quarantined') {
      const why = [s.quarantineReason ?? 'unknown reason', s.lastErrorMessage].filter(Boolean).join(': ');
      await emit('quarantined', id, m, s.updatedAt, `Quarantined (${why}). Fix the cause, then \`loans retry ${id}\` or \`loans skip ${id} --reason …\`.`);
    }
    if (s && PENDING.has(s.state)) {
      const startMs = s.releasedAt ?? s.createdAt;
      if (ageOf(startMs).days > 1) {
        const err = s.lastErrorMessage ? ` Last error: ${s.lastErrorMessage}` : '';
        await emit('stuck_pending', id, m, startMs, `Released but still ${s.state} after more than one business day.${err}`);
      }
    }
    if (p && c) {
      for (const field of COMPARED_FIELDS) {
        const coreValue = c.values[field];
        // The core adapter could not read this field back: nothing to compare, not a difference.
        if (coreValue === null) continue;
        const platformValue = p.values[field];
        if (platformValue !== coreValue) {
          const pv = display(field, platformValue);
          const cv = display(field, coreValue);
          await emit('field_mismatch', id, m, boardedMs, `${field}: platform ${pv ?? '(none)'}, core ${cv ?? '(none)'}.`, {
            field,
            platformValue: pv,
            coreValue: cv,
          });
        }
      }
    }
    if (++n % 5000 === 0) {
      checkAborted(signal);
      progress({ phase: 'compare', done: n, total: compareTotal });
    }
  }

  // Funded but never released: only loan.funded webhooks know about these loans.
  const funded = await sources.funded();
  if (funded === null) {
    notes.push('No loan.funded events are recorded in the store: the "funded but not released" check did not run.');
  } else {
    for (const f of funded) {
      const m = loans.get(f.loanId);
      // Any connector row means the loan came through the boarding queue, i.e. it was released.
      if (m?.s !== undefined || m?.p !== undefined || (await sources.storeKnows(f.loanId))) continue;
      const age = ageOf(f.fundedAt);
      if (age.days > opts.fundedNotReleasedDays) {
        await emit('funded_not_released', f.loanId, m ?? {}, f.fundedAt, `Funded ${new Date(f.fundedAt).toISOString()} but not released to the core after ${opts.fundedNotReleasedDays} business days.`);
      }
    }
  }
  progress({ phase: 'compare', done: compareTotal, total: compareTotal });

  const tieOut = buildTieOut(totals);
  const ordered: AgingSummary['byReason'] = {};
  for (const [reason, buckets] of Object.entries(aging.byReason) as Array<[ExceptionReason, Record<AgeBucket, number>]>) {
    ordered[reason] = Object.fromEntries(AGE_BUCKETS.map((b) => [b, buckets[b]])) as Record<AgeBucket, number>;
  }
  return {
    totals,
    tieOut,
    aging: { byReason: ordered, totals: aging.totals },
    exceptions,
    exceptionsByReason: byReason,
    mappingVersions: [...versions].map(([version, loansCount]) => ({ version, loans: loansCount })).sort((a, b) => b.loans - a.loans),
    notes,
    loansSeen: loans.size,
  };
}

function sum(...amounts: Amount[]): { count: number; cents: number } {
  return amounts.reduce((acc, a) => ({ count: acc.count + a.count, cents: acc.cents + a.cents }), { count: 0, cents: 0 });
}

function check(
  id: TieOutCheck['id'],
  title: string,
  equation: string,
  left: TieOutCheck['left'],
  right: TieOutCheck['right'],
  explainedBy: ExceptionReason[],
): TieOutCheck {
  const differenceCount = left.count - right.count;
  const differenceCents = left.cents - right.cents;
  return { id, title, equation, left, right, differenceCount, differenceCents, ties: differenceCount === 0 && differenceCents === 0, explainedBy };
}

/** The three control-total equations ops sign off on. */
export function buildTieOut(t: ControlTotals): TieOutCheck[] {
  const parts = sum(t.pending, t.writtenAwaitingAck, t.acknowledged, t.quarantined, t.skipped);
  const wrote = sum(t.connectorWritten);
  return [
    check(
      'ledger',
      'Connector ledger',
      'released = pending + written (awaiting ack) + acknowledged + quarantined + skipped',
      { label: 'released', ...sum(t.released) },
      { label: 'sum of states', ...parts },
      [],
    ),
    check(
      'core',
      'Connector vs core',
      'written to core (core) = written by the connector (connector)',
      { label: 'written to core', ...sum(t.writtenToCore) },
      { label: 'written by connector', ...wrote },
      ['acknowledged_missing_in_core', 'written_missing_in_core', 'in_core_unknown_to_connector', 'field_mismatch'],
    ),
    check(
      'platform',
      'Platform vs connector',
      'acknowledged on the platform = acknowledged by the connector',
      { label: 'acknowledged on platform', ...sum(t.acknowledgedOnPlatform) },
      { label: 'acknowledged by connector', ...sum(t.acknowledged) },
      ['acknowledged_unknown_to_connector', 'state_mismatch', 'in_core_not_acknowledged'],
    ),
  ];
}

/** Ages in business days, bucketed as the report shows them. */
export function ageBucket(businessDays: number): AgeBucket {
  if (businessDays <= 1) return '0-1';
  if (businessDays <= 5) return '2-5';
  return '>5';
}
