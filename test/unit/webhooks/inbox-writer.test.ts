import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../../src/store/db.js';
import { toWebhookEvent } from '../../../src/webhooks/event.js';
import { createWebhookInbox } from '../../../src/webhooks/inbox.js';
import { createInboxWriter } from '../../../src/webhooks/inbox-writer.js';

const opened: Db[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const db of opened.splice(0)) if (db.open) db.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function fileDb(): { db: Db; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'inbox-writer-'));
  dirs.push(dir);
  const path = join(dir, 'state.sqlite');
  const db = openDatabase(path);
  opened.push(db);
  return { db, path };
}

function event(id: string, loanId: string) {
  const payload = { id, type: 'loan.funded', createdAt: '2026-11-01T00:00:00Z', data: { loanId } };
  const text = JSON.stringify(payload);
  return { ...toWebhookEvent(payload, { webhookIdHeader: id, signedTimestampMs: null, receivedAt: 1, rawBody: Buffer.from(text) }), payloadJson: text };
}

describe('inbox group commit', () => {
  it('concurrent writes and duplicates resolve once committed, each id stored once, payload text as received', async () => {
    const { db, path } = fileDb();
    const writer = createInboxWriter(createWebhookInbox(db));
    const ids = Array.from({ length: 60 }, (_, i) => `w${i % 40}`);
    const results = await Promise.all(ids.map((id) => writer.write(event(id, `L${id}`), 1)));
    expect(results.slice(0, 40).every(Boolean)).toBe(true);
    expect(results.slice(40).some(Boolean)).toBe(false);
    // The commit keeps the connection's durability setting (FULL).
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    // Another connection sees every answered row (committed, not just buffered in ours).
    const other = openDatabase(path);
    opened.push(other);
    expect(other.prepare('SELECT COUNT(*) AS n FROM webhook_inbox').get()).toEqual({ n: 40 });
    expect(other.prepare("SELECT payload FROM webhook_inbox WHERE webhook_id = 'w7'").get()).toEqual({ payload: event('w7', 'Lw7').payloadJson });
  });

  it('a failed insert rejects every delivery of its batch (the receiver answers 503)', async () => {
    const writer = createInboxWriter({
      insertMany: () => {
        throw new Error('disk I/O error');
      },
    });
    const out = await Promise.allSettled([writer.write(event('f1', 'L1'), 1), writer.write(event('f2', 'L2'), 1)]);
    expect(out.map((o) => o.status)).toEqual(['rejected', 'rejected']);
  });
});
