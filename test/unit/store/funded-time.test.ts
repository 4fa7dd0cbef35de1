import { describe, expect, it } from 'vitest';
import { toWebhookEvent } from '../../../src/webhooks/event.js';
import { createFundedTimeBackfill } from '../../../src/store/funded-time.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';

function funded(id: string, loanId: string, fundedAt: string) {
  const payload = { id, type: 'loan.funded', createdAt: fundedAt, data: { loanId, fundedAt } };
  return toWebhookEvent(payload, {
    webhookIdHeader: id,
    signedTimestampMs: null,
    receivedAt: 1,
    rawBody: Buffer.from('{}'),
  });
}

describe.each(STORE_ENGINES)('funded-time backfill on %s', (engine) => {
  const open = testStores(engine);

  it.skipIf(engineSkipped(engine))(
    'copies the earliest funded time onto loans rows created after the event, once',
    async () => {
      const { db } = await open();
      const inbox = createWebhookInbox(db);
      await inbox.insert(funded('a', 'L1', '2026-11-02T00:00:00Z'), 1);
      await inbox.insert(funded('b', 'L1', '2026-11-01T00:00:00Z'), 2);
      const backfill = createFundedTimeBackfill(db, inbox);
      expect(await backfill.run(10)).toBe(0);
      await db.run(
        "INSERT INTO loans (id, state, created_at, updated_at) VALUES ('L1', 'queued', 100, 100), ('L2', 'queued', 100, 100)",
      );
      expect(await backfill.run(200)).toBe(1);
      expect(await db.all('SELECT id, funded_at_iso AS f FROM loans ORDER BY id')).toEqual([
        { id: 'L1', f: '2026-11-01T00:00:00.000Z' },
        { id: 'L2', f: null },
      ]);
      expect(await backfill.run(300)).toBe(0);
    },
  );
});
