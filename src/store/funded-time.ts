import type { StoreDb } from './sql.js';
import type { WebhookInbox } from './inbox.js';

/**
 * Copies funded times from the inbox onto loans rows created after their loan.funded event.
 *
 * A loan is usually funded before a banker releases it, and the pipeline creates its `loans` row
 * only when it shows up in the queue. So the processor can record the funded time on the row
 * only when the row already exists. For the other loans the time stays in the inbox, and this pass
 * copies it onto rows created since the last pass. The run plugin calls it after every cycle; it
 * only reads rows it has not seen yet.
 */
export interface FundedTimeBackfill {
  /** Returns how many loans got their funded time. */
  run(now: number): Promise<number>;
}

export function createFundedTimeBackfill(
  db: StoreDb,
  inbox: Pick<WebhookInbox, 'fundedAt'>,
): FundedTimeBackfill {
  let since = 0;
  return {
    async run(now) {
      let updated = 0;
      let newest = since;
      const rows = await db.all<{ id: string; created_at: number }>(
        'SELECT id, created_at FROM loans WHERE created_at >= ? AND funded_at_iso IS NULL ORDER BY created_at ASC',
        [since],
      );
      for (const row of rows) {
        newest = Math.max(newest, row.created_at);
        const fundedAt = await inbox.fundedAt(row.id);
        if (fundedAt !== null) {
          updated += (
            await db.run(
              'UPDATE loans SET funded_at_iso = ?, updated_at = ? WHERE id = ? AND funded_at_iso IS NULL',
              [new Date(fundedAt).toISOString(), now, row.id],
            )
          ).changes;
        }
      }
      since = newest;
      return updated;
    },
  };
}
