import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../../src/store/db.js';
import { toWebhookEvent } from '../../../src/webhooks/event.js';
import { createFundedTimeBackfill } from '../../../src/store/funded-time.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';

let db: Db | undefined;
afterEach(() => db?.close());

function funded(id: string, loanId: string, fundedAt: string) {
  const payload = { id, type: 'loan.funded', createdAt: fundedAt, data: { loanId, fundedAt } };
  return toWebhookEvent(payload, { webhookIdHeader: id, signedTimestampMs: null, receivedAt: 1, rawBody: Buffer.from('{}') });
}

describe('funded-time backfill', () => {
  it('copies the earliest funded time onto loans rows created after the event, once', async () => {
    db = openDatabase(':memory:');
    const inbox = createWebhookInbox(db);
    await inbox.insert(funded('a', 'L1', '2026-11-02T00:00:00Z'), 1);
    await inbox.insert(funded('b', 'L1', '2026-11-01T00:00:00Z'), 2);
    const backfill = createFundedTimeBackfill(db, inbox);
    expect(await backfill.run(10)).toBe(0);
    db.prepare("INSERT INTO loans (id, state, created_at, updated_at) VALUES ('L1', 'queued', 100, 100), ('L2', 'queued', 100, 100)").run();
    expect(await backfill.run(200)).toBe(1);
    expect(db.prepare("SELECT id, funded_at_iso AS f FROM loans ORDER BY id").all()).toEqual([
      { id: 'L1', f: '2026-11-01T00:00:00.000Z' },
      { id: 'L2', f: null },
    ]);
    expect(await backfill.run(300)).toBe(0);
  });
});
