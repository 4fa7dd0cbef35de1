/**
 * The webhook receiver with its inbox in PostgreSQL (issue 26 point 4): every replica receives
 * webhooks. Two receivers (two apps, two pools: two replicas) on one database take concurrent
 * duplicates of one delivery, split between them: every one is acknowledged, the delivery is
 * stored once and processed once. A failed inbox write is a 503 (the platform redelivers); the
 * unknown-loan bounds prune on PostgreSQL as on SQLite.
 */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { createApp, WEBHOOK_PATH } from '../../../src/http/app.js';
import { startHttpServer } from '../../../src/http/server.js';
import { createConnectorMetrics } from '../../../src/observability/metrics.js';
import { dbWritableCheck } from '../../../src/observability/readiness.js';
import { createWebhookInbox, type WebhookInbox } from '../../../src/store/inbox.js';
import { openStore } from '../../../src/store/open.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { createWebhookProcessor, type WebhookProcessor } from '../../../src/webhooks/processor.js';
import { createTestDatabase, pgSkipReason, type TestDatabase, pgTarget } from '../../support/pg.js';

const secret = `whsec_${randomBytes(24).toString('base64')}`;

interface Replica {
  url: string;
  db: StoreDb;
  inbox: WebhookInbox;
  processor: WebhookProcessor;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function database(): Promise<TestDatabase> {
  const pg = await createTestDatabase({ migrate: false });
  cleanups.push(() => pg.drop());
  return pg;
}

/** One replica's receiver: its own pool on the shared database, its own app and processor. */
async function replica(pg: TestDatabase): Promise<Replica> {
  const db = await openStore(pgTarget(pg.url, { poolSize: 3, connectTimeoutMs: 5000 }));
  const inbox = createWebhookInbox(db);
  const processor = createWebhookProcessor({
    clock: systemClock,
    db,
    inbox,
    logger: silentLogger(),
    debounceMs: 0,
  });
  await processor.start();
  const metrics = createConnectorMetrics({ clock: systemClock, db, inbox, processMetrics: false });
  const app = createApp({
    clock: systemClock,
    config: { scheme: 'standard', secrets: [secret], toleranceSeconds: 300, maxBodyBytes: 262_144 },
    inbox,
    logger: silentLogger(),
    metrics,
    processor,
    readiness: { database: dbWritableCheck(db) },
    reportsDir: '/nonexistent',
  });
  const server = await startHttpServer(app, '127.0.0.1', 0);
  cleanups.push(async () => {
    await server.close(100);
    await processor.stop();
    await db.close();
  });
  return { url: server.url, db, inbox, processor };
}

function signed(payload: unknown, id: string): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify(payload);
  const at = new Date();
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, at, body),
    },
  };
}

async function post(url: string, d: { headers: Record<string, string>; body: string }): Promise<number> {
  const res = await fetch(`${url}${WEBHOOK_PATH}`, { method: 'POST', headers: d.headers, body: d.body });
  await res.text();
  return res.status;
}

const funded = (loanId: string) => ({
  id: `evt_${loanId}`,
  type: 'loan.funded',
  createdAt: new Date().toISOString(),
  data: { loanId },
});

describe.skipIf(pgSkipReason !== null)('webhook receiver on PostgreSQL', () => {
  it('two replicas: 20 concurrent duplicates split between them are all acknowledged, stored once and processed once', async () => {
    const pg = await database();
    const [a, b] = [await replica(pg), await replica(pg)];
    await a.db.run("INSERT INTO loans (id, state, created_at, updated_at) VALUES ('L2', 'queued', 1, 1)");
    const processed: string[] = [];
    for (const r of [a, b])
      r.processor.events.on('processed', (e: { webhookId: string }) => processed.push(e.webhookId));
    const d = signed(funded('L2'), 'msg_dup');
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => post((i % 2 === 0 ? a : b).url, d)),
    );
    expect(statuses).toEqual(Array(20).fill(200));
    await Promise.all([a.processor.drain(), b.processor.drain()]);
    // A late redelivery to either replica after processing changes nothing.
    expect(await post(b.url, d)).toBe(200);
    await Promise.all([a.processor.drain(), b.processor.drain()]);
    expect(processed).toEqual(['msg_dup']);
    expect(await a.db.get("SELECT COUNT(*) AS n FROM webhook_inbox WHERE webhook_id = 'msg_dup'")).toEqual({
      n: 1,
    });
    expect(await a.db.get("SELECT COUNT(*) AS n FROM loan_events WHERE loan_id = 'L2'")).toEqual({ n: 1 });
    expect(await b.inbox.get('msg_dup')).toMatchObject({ status: 'processed', loanId: 'L2' });
  });

  it('many deliveries to two replicas at once: each stored once, each processed once, in one history', async () => {
    const pg = await database();
    const [a, b] = [await replica(pg), await replica(pg)];
    const ids = Array.from({ length: 30 }, (_, i) => `msg_${i}`);
    for (let i = 0; i < 30; i++)
      await a.db.run("INSERT INTO loans (id, state, created_at, updated_at) VALUES (?, 'queued', 1, 1)", [
        `M${i}`,
      ]);
    // Every delivery to both replicas, interleaved.
    const statuses = await Promise.all(
      ids.flatMap((id, i) => [
        post(a.url, signed(funded(`M${i}`), id)),
        post(b.url, signed(funded(`M${i}`), id)),
      ]),
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
    await Promise.all([a.processor.drain(), b.processor.drain()]);
    expect(await a.inbox.stats()).toMatchObject({ pending: 0, failed: 0, processed: 30 });
    expect(await a.db.get("SELECT COUNT(*) AS n FROM loan_events WHERE kind = 'webhook'")).toEqual({ n: 30 });
    expect(await a.db.get('SELECT COUNT(*) AS n FROM loans WHERE funded_at_iso IS NOT NULL')).toEqual({
      n: 30,
    });
  });

  it('answers 503 when the inbox write fails, and the redelivery is stored', async () => {
    const pg = await database();
    const r = await replica(pg);
    await r.db
      .exec(`CREATE FUNCTION inbox_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'; END $$;
      CREATE TRIGGER inbox_full BEFORE INSERT ON webhook_inbox FOR EACH ROW EXECUTE FUNCTION inbox_full();`);
    const d = signed(funded('F1'), 'msg_503');
    expect(await post(r.url, d)).toBe(503);
    expect(await r.inbox.get('msg_503')).toBeNull();
    await r.db.exec('DROP TRIGGER inbox_full ON webhook_inbox');
    expect(await post(r.url, d)).toBe(200);
    expect(await r.inbox.get('msg_503')).not.toBeNull();
  });

  it('loan.funded rows of loans never released are bounded by age and by count', async () => {
    const pg = await database();
    const r = await replica(pg);
    await r.processor.stop();
    const day = 24 * 60 * 60 * 1000;
    const now = Date.now();
    const ins = (id: string, loanId: string, at: number, received: number) =>
      r.db.run(
        "INSERT INTO webhook_inbox (webhook_id, event_type, loan_id, occurred_at, received_at, payload, status) VALUES (?, 'loan.funded', ?, ?, ?, '{}', 'processed')",
        [id, loanId, at, received],
      );
    await ins('old-unknown', 'UNKNOWN_1', now - 200 * day, now - 200 * day);
    await ins('recent-unknown', 'UNKNOWN_2', now - 40 * day, now - 40 * day);
    for (let i = 0; i < 5; i++) await ins(`flood-${i}`, `FLOOD_${i}`, now - i, now - 1000 + i);
    expect(await r.inbox.prune(now - 30 * day)).toBe(1);
    expect(await r.inbox.capUnknownFunded(3)).toBe(3);
    expect(
      (await r.db.all<{ id: string }>('SELECT webhook_id AS id FROM webhook_inbox ORDER BY received_at')).map(
        (x) => x.id,
      ),
    ).toEqual(['flood-2', 'flood-3', 'flood-4']);
  });
});
