import { businessDaysBetween, localDate } from '../lib/calendar.js';
import { PENDING_STATES } from '../store/loan-states.js';
import { centsOf, type Merged } from './merged.js';
import {
  AGE_BUCKETS,
  type AgeBucket,
  type AgingSummary,
  type Amount,
  type ControlTotals,
  type ExceptionReason,
  type ReportException,
  type TieOutCheck,
} from './types.js';

/**
 * What a reconciliation adds up as it walks the loans: control totals, mapping versions, and the
 * exceptions (counted by reason and age, streamed to a listener, the first `keep` kept). Only
 * counters and a bounded list live here: memory does not grow with the number of loans.
 */

export const PENDING = new Set<string>(PENDING_STATES);

const emptyAmount = (): Amount => ({ count: 0, cents: 0, unknownAmount: 0 });

function add(a: Amount, cents: number | null): void {
  a.count += 1;
  if (cents === null) a.unknownAmount += 1;
  else a.cents += cents;
}

/** Ages in business days, bucketed as the report shows them. */
export function ageBucket(businessDays: number): AgeBucket {
  if (businessDays <= 1) return '0-1';
  if (businessDays <= 5) return '2-5';
  return '>5';
}

export type ExceptionExtra = Partial<
  Pick<ReportException, 'field' | 'platformValue' | 'coreValue' | 'reviewItems' | 'reviewItemsMore'>
>;

export interface TallyOptions {
  asOfMs: number;
  timeZone: string;
  onException?: (e: ReportException) => void | Promise<void>;
  /** Exceptions kept in the outcome (the rest are counted and streamed only). Default: all. */
  keepExceptions?: number;
}

export class ReconcileTally {
  readonly totals: ControlTotals = {
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
  readonly exceptions: ReportException[] = [];
  exceptionCount = 0;
  readonly byReason: Partial<Record<ExceptionReason, number>> = {};
  private readonly aging: AgingSummary = { byReason: {}, totals: { '0-1': 0, '2-5': 0, '>5': 0 } };
  private readonly versions = new Map<string, number>();
  private readonly asOfDate: string;
  private readonly keep: number;

  constructor(private readonly opts: TallyOptions) {
    this.asOfDate = localDate(opts.asOfMs, opts.timeZone);
    this.keep = opts.keepExceptions ?? Number.POSITIVE_INFINITY;
  }

  ageOf(sinceMs: number | null): { days: number; bucket: AgeBucket } {
    if (sinceMs === null) return { days: 0, bucket: '0-1' };
    const days = businessDaysBetween(localDate(sinceMs, this.opts.timeZone), this.asOfDate);
    return { days, bucket: ageBucket(days) };
  }

  /** The loan's lines in the control totals, and its mapping version. */
  count(m: Merged): void {
    const { s, p, c } = m;
    const t = this.totals;
    const amount = s?.centsAmount ?? centsOf(p) ?? centsOf(c);
    const version = c?.mappingVersion ?? s?.mappingVersion ?? null;
    if (version !== null) this.versions.set(version, (this.versions.get(version) ?? 0) + 1);
    if (s) {
      add(t.released, amount);
      if (PENDING.has(s.state)) add(t.pending, amount);
      else if (s.state === 'written') add(t.writtenAwaitingAck, amount);
      else if (s.state === 'acknowledged') add(t.acknowledged, amount);
      else if (s.state === 'quarantined') add(t.quarantined, amount);
      else if (s.state === 'skipped') add(t.skipped, amount);
      else add(t.otherState, amount);
      if (s.wrote) add(t.connectorWritten, s.centsAmount ?? centsOf(c) ?? centsOf(p));
    }
    if (c) add(t.writtenToCore, centsOf(c));
    if (p) add(t.acknowledgedOnPlatform, centsOf(p));
  }

  /** One exception: counted, aged, streamed; kept (without its review items) while under `keep`. */
  async exception(
    reason: ExceptionReason,
    loanId: string,
    m: Merged,
    sinceMs: number | null,
    detail: string,
    extra: ExceptionExtra = {},
  ): Promise<void> {
    const age = this.ageOf(sinceMs);
    const e: ReportException = {
      reason,
      loanId,
      loanNumber: m.s?.loanNumber ?? m.p?.loanNumber ?? null,
      field: extra.field ?? null,
      platformValue: extra.platformValue ?? null,
      coreValue: extra.coreValue ?? null,
      connectorState: m.s?.state ?? null,
      centsAmount: centsOf(m.p) ?? m.s?.centsAmount ?? centsOf(m.c) ?? null,
      since: sinceMs === null ? null : new Date(sinceMs).toISOString(),
      ageBusinessDays: age.days,
      ageBucket: age.bucket,
      detail,
      ...(extra.reviewItems !== undefined
        ? { reviewItems: extra.reviewItems, reviewItemsMore: extra.reviewItemsMore ?? 0 }
        : {}),
    };
    // Kept without its review items (up to REVIEW_ITEMS_PER_LOAN each): the renderers look them
    // up again; the listener (the CSV and JSON writers) gets them now.
    if (this.exceptions.length < this.keep) {
      if (e.reviewItems === undefined) this.exceptions.push(e);
      else {
        const kept: ReportException = { ...e };
        delete kept.reviewItems;
        this.exceptions.push(kept);
      }
    }
    this.exceptionCount += 1;
    this.byReason[reason] = (this.byReason[reason] ?? 0) + 1;
    const row = (this.aging.byReason[reason] ??= { '0-1': 0, '2-5': 0, '>5': 0 });
    row[age.bucket] += 1;
    this.aging.totals[age.bucket] += 1;
    await this.opts.onException?.(e);
  }

  /** Aging with each reason's buckets in report order. */
  agingSummary(): AgingSummary {
    const ordered: AgingSummary['byReason'] = {};
    for (const [reason, buckets] of Object.entries(this.aging.byReason) as Array<
      [ExceptionReason, Record<AgeBucket, number>]
    >) {
      ordered[reason] = Object.fromEntries(AGE_BUCKETS.map((b) => [b, buckets[b]])) as Record<
        AgeBucket,
        number
      >;
    }
    return { byReason: ordered, totals: this.aging.totals };
  }

  /** Mapping versions seen, most loans first. */
  mappingVersions(): Array<{ version: string; loans: number }> {
    return [...this.versions]
      .map(([version, loans]) => ({ version, loans }))
      .sort((a, b) => b.loans - a.loans);
  }
}

function sum(...amounts: Amount[]): { count: number; cents: number } {
  return amounts.reduce((acc, a) => ({ count: acc.count + a.count, cents: acc.cents + a.cents }), {
    count: 0,
    cents: 0,
  });
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
  return {
    id,
    title,
    equation,
    left,
    right,
    differenceCount,
    differenceCents,
    ties: differenceCount === 0 && differenceCents === 0,
    explainedBy,
  };
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
      [
        'acknowledged_missing_in_core',
        'written_missing_in_core',
        'in_core_unknown_to_connector',
        'field_mismatch',
      ],
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
