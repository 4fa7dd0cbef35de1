import type { Logger } from '../lib/logger.js';
import type { InvalidItem, QueueItem } from '../contract/schemas.js';
import type { LoanStore, LoanRow, LoanPatch } from '../store/loans.js';
import { canonicalJson, releaseMarker, storableQueueItem } from './release.js';

/**
 * Told about an acknowledged loan the default queue still lists. Either the platform lags behind
 * our acknowledgement, or it released the loan again in a way the release marker cannot tell
 * (no boarding id or release time: the fixed fallback marker). `changed`: the loan's fields
 * (updatedAt included) differ from the item we boarded, which hints at the latter; `invalid`: the
 * listed item fails validation.
 */
export type StillListedKind = 'same' | 'changed' | 'invalid';

export interface IntakeObserver {
  stillListedAfterAck(loanId: string, kind: StillListedKind): void;
}

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
export async function recordQueueItem(
  loans: LoanStore,
  item: QueueItem,
  now: number,
  logger: Logger,
  inFlight: ReadonlySet<string>,
  observer?: IntakeObserver,
): Promise<IntakeResult> {
  const marker = releaseMarker(item);
  const existing = await loans.get(item.id);
  if (!existing) {
    await loans.insert(
      {
        id: item.id,
        state: 'queued',
        patch: { ...itemColumns(item, now), releaseMarker: marker },
        reason: 'released to the core',
        detail: { releaseMarker: marker },
      },
      now,
    );
    return 'new';
  }
  if (existing.releaseMarker === marker || inFlight.has(item.id)) {
    if (existing.state !== 'acknowledged') await loans.update(item.id, itemColumns(item, now), now);
    if (existing.state === 'acknowledged') {
      // Still listed after our acknowledgement: never boarded a second time on a guess (the same
      // marker means the same acknowledgement key, and a platform lagging behind looks exactly
      // like this). Surfaced instead (cycle summary + rate-limited warning) for ops to judge.
      const changed = existing.queueItem !== null && loanFieldsDiffer(existing.queueItem, item);
      logger.debug(
        { loanId: item.id, changed },
        'acknowledged loan still listed in the boarding queue; not boarded again',
      );
      observer?.stillListedAfterAck(item.id, changed ? 'changed' : 'same');
      return 'ignored';
    }
    return 'seen';
  }
  return reRelease(loans, existing, item, marker, now, logger);
}

/** The loan's fields (the boarding object aside: its marker was compared already) differ from the stored item's. */
function loanFieldsDiffer(stored: string, item: QueueItem): boolean {
  const strip = (json: string): string => {
    try {
      const { boarding: _boarding, ...loan } = JSON.parse(json) as Record<string, unknown>;
      return canonicalJson(loan);
    } catch {
      return json;
    }
  };
  return strip(stored) !== strip(storableQueueItem(item));
}

async function reRelease(
  loans: LoanStore,
  existing: LoanRow,
  item: QueueItem,
  marker: string,
  now: number,
  logger: Logger,
): Promise<IntakeResult> {
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
    // The same reset as below, state aside: the old release's write must not make a later
    // `loans retry` merely acknowledge the new release (which the core never received).
    await loans.update(item.id, reset, now);
    await loans.recordEvent(
      item.id,
      { kind: 'release', reason: 'released again while skipped; stays skipped', detail },
      now,
    );
    return 'seen';
  }
  logger.info(
    { loanId: item.id, ...detail, state: existing.state },
    'loan released again: boarding it again',
  );
  await loans.transition(
    item.id,
    { to: 'queued', kind: 'release', reason: 'released again (new release marker)', detail, patch: reset },
    now,
  );
  return 're-released';
}

/**
 * A malformed queue item with an id: quarantined (validation) so ops see it, if the loan is new or
 * waiting to be boarded; without an id: logged only. A loan past that point (being written,
 * acknowledged, skipped, quarantined already) keeps its state: what was done stands, and the
 * warning says so (the platform client announces every invalid item as reported for quarantine).
 */
export async function recordInvalidItem(
  loans: LoanStore,
  bad: InvalidItem,
  now: number,
  logger: Logger,
  observer?: IntakeObserver,
): Promise<IntakeResult> {
  if (bad.id === null) {
    logger.error(
      { index: bad.index, problems: bad.problems },
      'boarding queue item without an id failed validation; cannot quarantine it',
    );
    return 'ignored';
  }
  const message = `queue item failed validation: ${bad.problems.join('; ')}`.slice(0, 2000);
  const patch: LoanPatch = {
    quarantineReason: 'validation',
    lastErrorCode: 'queue_item.invalid',
    lastErrorMessage: message,
    lastSeenAt: now,
  };
  const existing = await loans.get(bad.id);
  if (!existing) {
    await loans.insert(
      { id: bad.id, state: 'quarantined', patch, reason: 'validation', detail: { problems: bad.problems } },
      now,
    );
    return 'quarantined-invalid';
  }
  if (existing.state === 'queued' || existing.state === 'retry_wait') {
    await loans.transition(
      bad.id,
      { to: 'quarantined', reason: 'validation', detail: { problems: bad.problems }, patch },
      now,
    );
    return 'quarantined-invalid';
  }
  if (existing.state === 'acknowledged') {
    // Listed every cycle while it lasts: the observer warns (rate-limited), with the cycle's count.
    logger.debug(
      { loanId: bad.id, problems: bad.problems },
      'acknowledged loan still listed with an item that fails validation: not quarantined, stays acknowledged',
    );
    if (observer) observer.stillListedAfterAck(bad.id, 'invalid');
    else
      logger.warn(
        { loanId: bad.id, problems: bad.problems },
        'acknowledged loan still listed with an item that fails validation: NOT quarantined; it stays acknowledged',
      );
    return 'ignored';
  }
  if (existing.state === 'quarantined' || existing.state === 'skipped') {
    // Already out of the pipeline (and listed again every cycle): nothing new to say.
    logger.debug(
      { loanId: bad.id, state: existing.state },
      `queue item still fails validation; loan stays ${existing.state}`,
    );
    return 'ignored';
  }
  logger.warn(
    { loanId: bad.id, state: existing.state, problems: bad.problems },
    `queue item failed validation for a loan already ${existing.state}: ` +
      `NOT quarantined; the loan carries on from its stored item`,
  );
  return 'ignored';
}
