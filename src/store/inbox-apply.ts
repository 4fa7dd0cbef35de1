import { errorMessage } from '../lib/errors.js';
import type { StoreDb } from './sql.js';
import { extractFundedAt } from '../contract/webhook-payload.js';
import { INSERT_WEBHOOK_HISTORY_SQL, isHistoryEvent, webhookHistoryEntry } from './webhook-history.js';
import type { InboxRow, WebhookInbox } from './inbox.js';

/** What a pass did with one inbox row . */
export interface RowOutcome {
  webhookId: string;
  eventType: string;
  loanId: string | null;
  outcome: 'processed' | 'failed';
  /** Epoch ms, for a processed loan.funded row. */
  fundedAt: number | null;
  /** Why the row was marked failed. */
  error: string | null;
  /** Recorded only: the type is not documented, or no loan id was found in the payload. */
  note: { kind: 'unknown_type' | 'no_loan_id'; keys: string[] } | null;
}

export interface InboxPass {
  /** Rows read (a full `limit` means more may be pending). */
  rows: number;
  outcomes: RowOutcome[];
}

/**
 * The database side of webhook processing: one pass reads up to `limit` pending rows in event-time
 * order and applies them in one transaction. Each row's effects and its "processed" mark commit
 * together, so a crash leaves the row pending and it is redone; the effects are idempotent (the
 * funded time keeps the earliest value). No logging and no callbacks: the caller (the processor)
 * reports the outcomes.
 */
export function createInboxApplier(
  db: StoreDb,
  inbox: WebhookInbox,
): { pass(limit: number, now: number): Promise<InboxPass> } {
  // Only an existing loans row is filled in here, keeping the earliest time; a loan that has no row
  // yet gets it from the inbox when the row is created (funded-time.ts).
  const SET_FUNDED_AT = `UPDATE loans SET funded_at_iso = ?, updated_at = ?
     WHERE id = ? AND (funded_at_iso IS NULL OR funded_at_iso > ?)`;

  const applyRowEffects = async (row: InboxRow, now: number): Promise<number | null> => {
    let fundedAt: number | null = null;
    if (row.eventType === 'loan.funded' && row.loanId !== null) {
      fundedAt = extractFundedAt({ payload: row.payload, occurredAt: row.occurredAt ?? row.receivedAt });
      const iso = new Date(fundedAt).toISOString();
      await db.run(SET_FUNDED_AT, [iso, now, row.loanId, iso]);
    }
    if (row.loanId !== null && isHistoryEvent(row.eventType)) {
      const entry = webhookHistoryEntry(row, fundedAt);
      await db.run(INSERT_WEBHOOK_HISTORY_SQL, [row.loanId, entry.at, row.eventType, entry.detail]);
    }
    await inbox.markProcessedSeq(row.seq, now);
    return fundedAt;
  };

  const outcome = (row: InboxRow, fundedAt: number | null, error: string | null): RowOutcome => ({
    webhookId: row.webhookId,
    eventType: row.eventType,
    loanId: row.loanId,
    outcome: error === null ? 'processed' : 'failed',
    fundedAt,
    error,
    note: noteFor(row),
  });

  // One transaction per pass, which reads its rows (so they cannot change before they are
  // applied, and `seq` stays valid). First without savepoints (the common case: every row
  // applies); if a row fails for a reason other than contention the whole attempt rolls back and
  // the pass is redone with each row in its own savepoint, so one bad row cannot sink the rest.
  const applyAll = (limit: number, now: number): Promise<RowOutcome[]> =>
    db.write(async () => {
      const out: RowOutcome[] = [];
      for (const row of await inbox.pending(limit))
        out.push(outcome(row, await applyRowEffects(row, now), null));
      return out;
    });
  const applyEach = (limit: number, now: number): Promise<RowOutcome[]> =>
    db.write(async () => {
      const out: RowOutcome[] = [];
      for (const row of await inbox.pending(limit)) {
        try {
          // A savepoint (asked for: a nested write joins its transaction otherwise), which rolls back alone.
          out.push(outcome(row, await db.write(() => applyRowEffects(row, now), { savepoint: true }), null));
        } catch (err) {
          const message = errorMessage(err);
          // Transient: roll the whole pass back; its rows stay pending for the next one.
          if (isTransientDbError(err)) throw err;
          await inbox.markFailed(row.webhookId, now, message);
          out.push(outcome(row, null, message));
        }
      }
      return out;
    });

  return {
    async pass(limit, now) {
      // Nothing pending (most kicks after a quiet spell find their rows taken by an earlier pass):
      // no write transaction, no commit.
      if ((await db.get("SELECT 1 AS one FROM webhook_inbox WHERE status = 'pending' LIMIT 1")) === undefined)
        return { rows: 0, outcomes: [] };
      let outcomes: RowOutcome[];
      // IMMEDIATE (see store/sqlite/db.ts): the write lock is taken before the rows are read.
      try {
        outcomes = await applyAll(limit, now);
      } catch (err) {
        if (isTransientDbError(err)) throw err;
        outcomes = await applyEach(limit, now);
      }
      return { rows: outcomes.length, outcomes };
    },
  };
}

/** Lock contention (SQLITE_BUSY, _SNAPSHOT, SQLITE_LOCKED…): the work is redone later, nothing is marked failed. */
export function isTransientDbError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')))
    return true;
  // PostgreSQL: serialization failure, deadlock, lock timeout, connection lost.
  if (
    typeof code === 'string' &&
    ['40001', '40P01', '55P03', '57P01', '08006', '08003', 'ECONNRESET', 'ECONNREFUSED'].includes(code)
  )
    return true;
  return /SQLITE_BUSY|SQLITE_LOCKED|database is locked/i.test(errorMessage(err));
}

/** What the payload lacks, for the log (the real platform's payload is not documented). */
function noteFor(row: InboxRow): RowOutcome['note'] {
  if (!isHistoryEvent(row.eventType))
    return { kind: 'unknown_type', keys: Object.keys(row.payload).slice(0, 20) };
  if (row.loanId === null) {
    const data = row.payload['data'];
    return {
      kind: 'no_loan_id',
      keys: data && typeof data === 'object' ? Object.keys(data).slice(0, 20) : [typeof data],
    };
  }
  return null;
}
