import type { Logger } from '../lib/logger.js';
import type { InvalidItem, QueueItem } from '../platform/schemas.js';
import type { LoanStore, LoanRow, LoanPatch } from '../store/loans.js';
import { releaseMarker, storableQueueItem } from './release.js';

export type IntakeResult = 'new' | 'seen' | 're-released' | 'quarantined-invalid' | 'ignored';

function itemColumns(item: QueueItem, now: number): LoanPatch {
  return {
    loanNumber: item.loanNumber ?? null,
    centsAmount: typeof item.centsAmount === 'number' ? item.centsAmount : null,
    productId: item.product?.id ?? null,
    releasedAtIso: item.boarding?.releasedAt ?? null,
    queueItem: storableQueueItem(item),
    lastSeenAt: now,
  };
}

/**
 * Records one queue item: a new loan is queued; a known one gets its stored item refreshed; a
 * loan released again (new release marker) goes back to queued and boards again (the core write
 * is idempotent by external id, the new acknowledgement gets a new key). Loans an operator skipped
 * stay skipped: that decision is theirs to undo (`loans retry`).
 */
export function recordQueueItem(
  loans: LoanStore,
  item: QueueItem,
  now: number,
  logger: Logger,
  inFlight: ReadonlySet<string>,
): IntakeResult {
  const marker = releaseMarker(item);
  const existing = loans.get(item.id);
  if (!existing) {
    loans.insert(
      { id: item.id, state: 'queued', patch: { ...itemColumns(item, now), releaseMarker: marker }, reason: 'released to the core', detail: { releaseMarker: marker } },
      now,
    );
    return 'new';
  }
  if (existing.releaseMarker === marker || inFlight.has(item.id)) {
    if (existing.state !== 'acknowledged') loans.update(item.id, itemColumns(item, now), now);
    if (existing.state === 'acknowledged') {
      // Still listed after our acknowledgement (a platform lagging behind): nothing to do, never a second board.
      logger.debug({ loanId: item.id }, 'acknowledged loan still listed in the boarding queue; ignored');
      return 'ignored';
    }
    return 'seen';
  }
  return reRelease(loans, existing, item, marker, now, logger);
}

function reRelease(loans: LoanStore, existing: LoanRow, item: QueueItem, marker: string, now: number, logger: Logger): IntakeResult {
  const detail = { previousMarker: existing.releaseMarker, releaseMarker: marker };
  const reset: LoanPatch = {
    ...itemColumns(item, now),
    releaseMarker: marker,
    attempts: 0,
    nextAttemptAt: null,
    quarantineReason: null,
    lastErrorCode: null,
    lastErrorMessage: null,
    writtenAt: null,
    acknowledgedAt: null,
    coreWriteStartedAt: null,
  };
  if (existing.state === 'skipped') {
    loans.update(item.id, { ...itemColumns(item, now), releaseMarker: marker }, now);
    loans.recordEvent(item.id, { kind: 'release', reason: 'released again while skipped; stays skipped', detail }, now);
    return 'seen';
  }
  logger.info({ loanId: item.id, ...detail, state: existing.state }, 'loan released again: boarding it again');
  loans.transition(item.id, { to: 'queued', kind: 'release', reason: 'released again (new release marker)', detail, patch: reset }, now);
  return 're-released';
}

/** A malformed queue item with an id: quarantined (validation) so ops see it; without an id: logged only. */
export function recordInvalidItem(loans: LoanStore, bad: InvalidItem, now: number, logger: Logger): IntakeResult {
  if (bad.id === null) {
    logger.error({ index: bad.index, problems: bad.problems }, 'boarding queue item without an id failed validation; cannot quarantine it');
    return 'ignored';
  }
  const message = `queue item failed validation: ${bad.problems.join('; ')}`.slice(0, 2000);
  const patch: LoanPatch = { quarantineReason: 'validation', lastErrorCode: 'queue_item.invalid', lastErrorMessage: message, lastSeenAt: now };
  const existing = loans.get(bad.id);
  if (!existing) {
    loans.insert({ id: bad.id, state: 'quarantined', patch, reason: 'validation', detail: { problems: bad.problems } }, now);
    return 'quarantined-invalid';
  }
  if (existing.state === 'queued' || existing.state === 'retry_wait') {
    loans.transition(bad.id, { to: 'quarantined', reason: 'validation', detail: { problems: bad.problems }, patch }, now);
    return 'quarantined-invalid';
  }
  return 'ignored';
}
