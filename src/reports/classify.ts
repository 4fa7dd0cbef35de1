import { shellQuote } from '../lib/shell.js';
import { formatCents } from './money.js';
import type { Merged } from './merged.js';
import { PENDING, type ReconcileTally } from './tally.js';
import { COMPARED_FIELDS, type ComparedField, type ReportReviewItem } from './types.js';

/**
 * Per-loan classification: which exceptions one loan raises, from what the connector, the platform
 * and the core say about it. Pure but for the tally it reports to (in the order the report lists
 * a loan's exceptions).
 */

/** Review items printed per loan in the report; the rest are counted ("+N more"). */
/** The console page of a loan (the action is there first; the CLI command second). */
const consoleLoanPath = (id: string): string => `/console/loans/${encodeURIComponent(id)}`;

export const REVIEW_ITEMS_PER_LOAN = 10;

/** How a compared value is shown to people (amounts in currency units, rates in bps). */
function display(field: ComparedField, value: string | number | null): string | null {
  if (value === null) return null;
  if (field === 'centsAmount' && typeof value === 'number') return formatCents(value);
  if (field === 'bpsRate') return `${value} bps`;
  return String(value);
}

export async function classifyLoan(
  id: string,
  m: Merged,
  tally: ReconcileTally,
  reviewItems: ((id: string, limit: number) => ReportReviewItem[] | Promise<ReportReviewItem[]>) | undefined,
): Promise<void> {
  const { s, p, c } = m;
  const emit = tally.exception.bind(tally);
  const boardedMs = p?.boardedAt ?? s?.acknowledgedAt ?? s?.boardedAt ?? null;
  if (p && !c) {
    await emit(
      'acknowledged_missing_in_core',
      id,
      m,
      boardedMs,
      'The platform lists the loan as boarded but the core has no record with this external id.',
    );
  }
  if (c && !p) {
    if (!s) {
      await emit(
        'in_core_unknown_to_connector',
        id,
        m,
        null,
        `The core holds ${c.coreReference} for this external id but ` +
          `neither the connector nor the platform (boarded) knows the loan.`,
      );
    } else if (s.state === 'acknowledged') {
      await emit(
        'in_core_not_acknowledged',
        id,
        m,
        s.acknowledgedAt ?? s.writtenAt,
        `In the core as ${c.coreReference}; the connector recorded an ` +
          `acknowledgement but the platform does not list the loan as boarded.`,
      );
    } else {
      await emit(
        'in_core_not_acknowledged',
        id,
        m,
        s.writtenAt ?? s.updatedAt,
        `In the core as ${c.coreReference}; the acknowledgement to ` +
          `the platform is outstanding (connector state ${s.state}).`,
      );
    }
  }
  if (s?.wrote === true && !c && !p) {
    await emit(
      'written_missing_in_core',
      id,
      m,
      s.writtenAt ?? s.updatedAt,
      `The connector recorded a core write (state ${s.state}) but the core has no record with this external id.`,
    );
  }
  if (p && !s) {
    await emit(
      'acknowledged_unknown_to_connector',
      id,
      m,
      boardedMs,
      'The platform lists the loan as boarded but the connector has ' +
        'no record of it (boarded by someone else, or state lost).',
    );
  }
  if (p && s && s.state !== 'acknowledged') {
    await emit(
      'state_mismatch',
      id,
      m,
      boardedMs,
      `The platform lists the loan as boarded; the connector's state is ${s.state}.`,
    );
  }
  if (s?.state === 'acknowledged' && s.reviewItems > 0) {
    const items = await reviewItems?.(id, REVIEW_ITEMS_PER_LOAN);
    const listed =
      items === undefined
        ? `the loan's console page lists them (${consoleLoanPath(id)}; \`loans show ${shellQuote(id)}\` on the host)`
        : items.length > 0
          ? 'listed with this exception'
          : 'their details are no longer in the loan history';
    await emit(
      'boarded_with_review_items',
      id,
      m,
      s.acknowledgedAt ?? s.writtenAt ?? s.updatedAt,
      `Boarded with ${s.reviewItems} review item(s) from the mapping conventions: ${listed}.`,
      {
        ...(items !== undefined
          ? { reviewItems: items, reviewItemsMore: Math.max(0, s.reviewItems - items.length) }
          : {}),
      },
    );
  }
  if (s?.state === 'quarantined') {
    const why = [s.quarantineReason ?? 'unknown reason', s.lastErrorMessage].filter(Boolean).join(': ');
    await emit(
      'quarantined',
      id,
      m,
      s.updatedAt,
      `Quarantined (${why}). Fix the cause, then request a retry (or a skip) on the loan's console ` +
        `page ${consoleLoanPath(id)}; on the host: \`loans retry ` +
        `${shellQuote(id)}\` or \`loans skip ${shellQuote(id)} --reason …\`.`,
    );
  }
  if (s && PENDING.has(s.state)) {
    const startMs = s.releasedAt ?? s.createdAt;
    if (tally.ageOf(startMs).days > 1) {
      const err = s.lastErrorMessage ? ` Last error: ${s.lastErrorMessage}` : '';
      await emit(
        'stuck_pending',
        id,
        m,
        startMs,
        `Released but still ${s.state} after more than one business day.${err}`,
      );
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
        await emit(
          'field_mismatch',
          id,
          m,
          boardedMs,
          `${field}: platform ${pv ?? '(none)'}, core ${cv ?? '(none)'}.`,
          {
            field,
            platformValue: pv,
            coreValue: cv,
          },
        );
      }
    }
  }
}

/**
 * A loan only a loan.funded event knows (no connector row, not boarded on the platform): an
 * exception once it has waited longer than `fundedNotReleasedDays` business days.
 */
export async function classifyFunded(
  loanId: string,
  fundedAt: number,
  m: Merged,
  fundedNotReleasedDays: number,
  tally: ReconcileTally,
): Promise<void> {
  if (tally.ageOf(fundedAt).days <= fundedNotReleasedDays) return;
  await tally.exception(
    'funded_not_released',
    loanId,
    m,
    fundedAt,
    `Funded ${new Date(fundedAt).toISOString()} but not released ` +
      `to the core after ${fundedNotReleasedDays} business days.`,
  );
}
