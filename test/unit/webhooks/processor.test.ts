import { mkdtempSync, rmSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/lib/logger.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { createLoanStore } from '../../../src/store/loans.js';
import { openStore } from '../../../src/store/open.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { STORE_ENGINES, engineSkipped, testStores, type TestEngine } from '../../support/store-engines.js';
import { toWebhookEvent } from '../../../src/webhooks/event.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { createWebhookProcessor } from '../../../src/webhooks/processor.js';
import { pgTarget } from '../../support/pg.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const opened: Db[] = [];
const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
  for (const db of opened.splice(0)) if (db.open) db.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function memDb(): Db {
  const db = openDatabase(':memory:');
  opened.push(db);
  return db;
}

function event(
  id: string,
  type: string,
  loanId: string | null,
  at: string,
  extra: Record<string, unknown> = {},
) {
  const payload = { id, type, createdAt: at, data: { ...(loanId ? { loanId } : {}), ...extra } };
  return toWebhookEvent(payload, {
    webhookIdHeader: id,
    signedTimestampMs: null,
    receivedAt: Date.now(),
    rawBody: Buffer.from(JSON.stringify(payload)),
  });
}

async function insertLoan(db: StoreDb, id: string): Promise<void> {
  await db.run("INSERT INTO loans (id, state, created_at, updated_at) VALUES (?, 'queued', 1, 1)", [id]);
}

/** A trigger that refuses loan_events rows of loan BAD, in the engine's dialect. */
async function refuseBadLoanEvents(db: StoreDb, engine: TestEngine): Promise<void> {
  if (engine === 'sqlite') {
    await db.exec(
      "CREATE TRIGGER no_bad BEFORE INSERT ON loan_events WHEN NEW.loan_id = 'BAD' BEGIN SELECT RAISE(ABORT, 'constraint: bad loan'); END",
    );
    return;
  }
  await db.exec(`CREATE FUNCTION no_bad() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'constraint: bad loan'; END $$;
    CREATE TRIGGER no_bad BEFORE INSERT ON loan_events FOR EACH ROW WHEN (NEW.loan_id = 'BAD') EXECUTE FUNCTION no_bad();`);
}

describe('webhook inbox indexes (migration 5)', () => {
  it('pending rows are read from the pending-only index in processing order (no sort), funded rows by loan', async () => {
    const db = memDb();
    const plan = (sql: string): string =>
      db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all()
        .map((r) => (r as { detail: string }).detail)
        .join(' | ');
    const pending = plan(
      "SELECT * FROM webhook_inbox WHERE status = 'pending' ORDER BY COALESCE(occurred_at, received_at) ASC, received_at ASC, webhook_id ASC LIMIT 5",
    );
    expect(pending).toContain('USING INDEX webhook_inbox_pending');
    expect(pending).not.toContain('TEMP B-TREE');
    expect(
      plan(
        "SELECT * FROM webhook_inbox WHERE status IN ('pending', 'processed') AND loan_id = 'L1' AND event_type = 'loan.funded'",
      ),
    ).toContain('USING INDEX webhook_inbox_funded');
    // Processed rows leave the pending index.
    const inbox = createWebhookInbox(sqliteStore(db));
    await inbox.insert(event('p1', 'loan.funded', 'L1', '2026-11-01T00:00:00Z'), 1);
    await inbox.insert(event('p2', 'loan.funded', 'L2', '2026-11-01T00:00:01Z'), 1);
    await inbox.markProcessed('p1', 2);
    expect(
      db
        .prepare(
          "SELECT COUNT(*) AS n FROM webhook_inbox INDEXED BY webhook_inbox_pending WHERE status = 'pending'",
        )
        .get(),
    ).toEqual({ n: 1 });
    expect(await inbox.fundedAt('L1')).toBe(Date.parse('2026-11-01T00:00:00Z'));
  });

  it('counts rows by status from the indexes, without a table scan', async () => {
    const db = memDb();
    const plan = (sql: string): string =>
      db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all()
        .map((r) => (r as { detail: string }).detail)
        .join(' | ');
    expect(plan("SELECT COUNT(*) AS n FROM webhook_inbox WHERE status = 'failed'")).toContain(
      'COVERING INDEX webhook_inbox_failed',
    );
    const inbox = createWebhookInbox(sqliteStore(db));
    for (const [id, at] of [
      ['s1', 5],
      ['s2', 3],
      ['s3', 9],
      ['s4', 7],
    ] as const)
      await inbox.insert(event(id, 'loan.funded', 'L1', '2026-11-01T00:00:00Z'), at);
    await inbox.markProcessed('s1', 10);
    await inbox.markFailed('s2', 10, 'boom');
    expect(await inbox.stats()).toEqual({ pending: 2, failed: 1, processed: 1, oldestPendingAt: 7 });
  });
});

describe.each(STORE_ENGINES)('on %s', (engine) => {
  const open = testStores(engine);
  const fresh = async (): Promise<StoreDb> => (await open()).db;
  /** Two handles on one new state, one after the other (a process, then the next one). */
  const twoProcesses = async (): Promise<[StoreDb, StoreDb]> => {
    if (engine === 'sqlite') {
      const dir = mkdtempSync(join(tmpdir(), 'inbox-'));
      dirs.push(dir);
      const path = join(dir, 'state.sqlite');
      const first = openDatabase(path);
      opened.push(first);
      const second = openDatabase(path);
      opened.push(second);
      return [sqliteStore(first), sqliteStore(second)];
    }
    const url = (await open()).url as string;
    const again = await openStore(pgTarget(url, { poolSize: 2, connectTimeoutMs: 5000 }));
    closers.push(() => again.close());
    const first = await openStore(pgTarget(url, { poolSize: 2, connectTimeoutMs: 5000 }));
    closers.push(() => first.close());
    return [first, again];
  };

  describe.skipIf(engineSkipped(engine))('webhook inbox', () => {
    it('INSERT OR IGNORE: the same webhook id is stored once', async () => {
      const inbox = createWebhookInbox(await fresh());
      const e = event('w1', 'loan.funded', 'L1', '2026-11-01T00:00:00Z');
      expect(await inbox.insert(e, 1)).toBe(true);
      expect(await inbox.insert(e, 2)).toBe(false);
      expect(await inbox.stats()).toMatchObject({ pending: 1, processed: 0, failed: 0, oldestPendingAt: 1 });
    });

    it('returns pending rows in event-time order, whatever the arrival order', async () => {
      const inbox = createWebhookInbox(await fresh());
      await inbox.insert(event('late', 'loan.status_changed', 'L1', '2026-11-01T00:00:03Z'), 1);
      await inbox.insert(event('early', 'loan.created', 'L1', '2026-11-01T00:00:01Z'), 2);
      await inbox.insert(event('mid', 'loan.funded', 'L1', '2026-11-01T00:00:02Z'), 3);
      expect((await inbox.pending(10)).map((r) => r.webhookId)).toEqual(['early', 'mid', 'late']);
    });
  });

  describe.skipIf(engineSkipped(engine))('webhook processor', () => {
    it('processes one loan’s events in timestamp order and records the funded time', async () => {
      const db = await fresh();
      await insertLoan(db, 'L1');
      const inbox = createWebhookInbox(db);
      await inbox.insert(
        event('b', 'loan.funded', 'L1', '2026-11-01T10:00:00Z', { fundedAt: '2026-11-01T09:59:00Z' }),
        1,
      );
      await inbox.insert(
        event('a', 'loan.status_changed', 'L1', '2026-11-01T09:00:00Z', { status: 'funded' }),
        2,
      );
      await inbox.insert(event('c', 'loan.funded', 'L2', '2026-11-02T00:00:00Z'), 3);
      const cycles: string[] = [];
      const funded: string[] = [];
      let cycleRequested!: () => void;
      const cycled = new Promise<void>((resolve) => (cycleRequested = resolve));
      const requestCycle = (r: string): void => {
        cycles.push(r);
        cycleRequested();
      };
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
        requestCycle,
        onFunded: (id) => funded.push(id),
      });
      const order: string[] = [];
      p.events.on('processed', (e: { webhookId: string }) => order.push(e.webhookId));
      await p.start();
      await cycled;
      expect(order).toEqual(['a', 'b', 'c']);
      expect(funded).toEqual(['L1', 'L2']);
      expect(cycles).toEqual(['webhook:loan.funded']);
      expect(await db.get("SELECT funded_at_iso AS f FROM loans WHERE id = 'L1'")).toEqual({
        f: '2026-11-01T09:59:00.000Z',
      });
      // L2 has no loans row (not released yet): its funded time lives in the inbox.
      expect(await db.get("SELECT COUNT(*) AS n FROM loans WHERE id = 'L2'")).toEqual({ n: 0 });
      expect(await inbox.fundedAt('L2')).toBe(Date.parse('2026-11-02T00:00:00Z'));
      expect((await inbox.fundedLoans()).map((f) => f.loanId)).toEqual(['L1', 'L2']);
      // Every delivery is history when processed, L2's too (its loans row comes later).
      const events = await db.all(
        "SELECT loan_id, reason FROM loan_events WHERE kind = 'webhook' ORDER BY seq",
      );
      expect(events).toEqual([
        { loan_id: 'L1', reason: 'loan.status_changed' },
        { loan_id: 'L1', reason: 'loan.funded' },
        { loan_id: 'L2', reason: 'loan.funded' },
      ]);
      expect(await inbox.stats()).toMatchObject({ pending: 0, processed: 3 });
      await p.stop();
    });

    it('keeps the earliest funded time when a later funding event arrives', async () => {
      const db = await fresh();
      await insertLoan(db, 'L1');
      const inbox = createWebhookInbox(db);
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
      });
      await inbox.insert(event('x', 'loan.funded', 'L1', '2026-11-01T10:00:00Z'), 1);
      await p.drain();
      await inbox.insert(event('y', 'loan.funded', 'L1', '2026-11-03T10:00:00Z'), 2);
      await p.drain();
      expect(await db.get("SELECT funded_at_iso AS f FROM loans WHERE id = 'L1'")).toEqual({
        f: '2026-11-01T10:00:00.000Z',
      });
    });

    it('records unknown events and events without a loan id as processed, without effects', async () => {
      const db = await fresh();
      const inbox = createWebhookInbox(db);
      await inbox.insert(event('u', 'loan.teleported', 'L1', '2026-11-01T10:00:00Z'), 1);
      await inbox.insert(event('n', 'loan.funded', null, '2026-11-01T10:00:00Z'), 1);
      const cycles: string[] = [];
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
        requestCycle: (r) => cycles.push(r),
      });
      expect(await p.drain()).toBe(2);
      expect(await inbox.stats()).toMatchObject({ processed: 2, pending: 0 });
      expect(await db.get('SELECT COUNT(*) AS n FROM loan_events')).toEqual({ n: 0 });
      expect(cycles).toEqual([]);
    });

    it('a row whose effects fail is marked failed without holding back the other rows of its batch', async () => {
      const db = await fresh();
      const inbox = createWebhookInbox(db);
      await refuseBadLoanEvents(db, engine);
      await inbox.insert(event('ok1', 'loan.created', 'L1', '2026-11-01T10:00:00Z'), 1);
      await inbox.insert(event('bad', 'loan.created', 'BAD', '2026-11-01T10:00:01Z'), 1);
      await inbox.insert(event('ok2', 'loan.created', 'L2', '2026-11-01T10:00:02Z'), 1);
      const outcomes: Array<[string, string]> = [];
      for (const id of ['L1', 'BAD', 'L2']) await insertLoan(db, id);
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
      });
      p.events.on('processed', (e: { webhookId: string; outcome: string }) =>
        outcomes.push([e.webhookId, e.outcome]),
      );
      await p.drain();
      expect(outcomes).toEqual([
        ['ok1', 'processed'],
        ['bad', 'failed'],
        ['ok2', 'processed'],
      ]);
      expect(await inbox.get('bad')).toMatchObject({
        status: 'failed',
        error: expect.stringContaining('bad loan'),
      });
      expect(await db.all('SELECT loan_id FROM loan_events ORDER BY seq')).toEqual([
        { loan_id: 'L1' },
        { loan_id: 'L2' },
      ]);
      // SQLite: the connection's durability setting is restored after the processing transaction.
      if (db.sqlite) expect(db.sqlite.pragma('synchronous', { simple: true })).toBe(2);
    });

    it('rows pending when the process stopped are processed on the next start', async () => {
      const [first, db] = await twoProcesses();
      await createWebhookInbox(first).insert(event('w', 'loan.funded', 'L9', '2026-11-01T10:00:00Z'), 1);
      await first.close();

      const inbox = createWebhookInbox(db);
      expect((await inbox.stats()).pending).toBe(1);
      const funded: string[] = [];
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
        onFunded: (id) => funded.push(id),
      });
      await p.start();
      expect(funded).toEqual(['L9']);
      expect((await inbox.get('w'))?.status).toBe('processed');
      await p.stop();
    });
  });

  describe.skipIf(engineSkipped(engine))('inbox prune', () => {
    it('drops old processed rows but keeps funded times that are not yet on a loans row', async () => {
      const db = await fresh();
      const inbox = createWebhookInbox(db);
      await inbox.insert(event('old-created', 'loan.created', 'L1', '2026-01-01T00:00:00Z'), 100);
      await inbox.insert(event('old-funded-known', 'loan.funded', 'L1', '2026-01-01T00:00:00Z'), 100);
      await inbox.insert(event('old-funded-unknown', 'loan.funded', 'L2', '2026-01-01T00:00:00Z'), 100);
      await inbox.insert(event('old-pending', 'loan.created', 'L3', '2026-01-01T00:00:00Z'), 100);
      await inbox.insert(event('new', 'loan.created', 'L1', '2026-01-01T00:00:00Z'), 900);
      await insertLoan(db, 'L1');
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
      });
      await p.drain();
      await db.run("UPDATE webhook_inbox SET status = 'pending' WHERE webhook_id = 'old-pending'");
      expect(await inbox.prune(500)).toBe(2);
      const left = await db.all('SELECT webhook_id FROM webhook_inbox ORDER BY webhook_id');
      expect(left).toEqual([
        { webhook_id: 'new' },
        { webhook_id: 'old-funded-unknown' },
        { webhook_id: 'old-pending' },
      ]);
      expect(await inbox.fundedAt('L2')).not.toBeNull();
    });

    it('with a limit, deletes at most that many prunable rows, oldest first, and the same ones in the end', async () => {
      const db = await fresh();
      const inbox = createWebhookInbox(db);
      // Kept whatever the limit: a funded time not yet on a loans row, a pending row, a recent row.
      await inbox.insert(event('keep-funded', 'loan.funded', 'L-unknown', '2026-01-01T00:00:00Z'), 1);
      await inbox.insert(event('keep-pending', 'loan.created', 'L1', '2026-01-01T00:00:00Z'), 1);
      for (let i = 0; i < 1200; i++)
        await inbox.insert(event(`old-${i}`, 'loan.created', 'L1', '2026-01-01T00:00:00Z'), 10 + i);
      await inbox.insert(event('keep-recent', 'loan.created', 'L1', '2026-01-01T00:00:00Z'), 5000);
      await db.run("UPDATE webhook_inbox SET status = 'processed' WHERE webhook_id != 'keep-pending'");
      expect(await inbox.prune(2000, 500)).toBe(500);
      // Oldest first: what is left of the old rows starts at old-500.
      expect(
        await db.get("SELECT MIN(received_at) AS m FROM webhook_inbox WHERE webhook_id LIKE 'old-%'"),
      ).toEqual({ m: 510 });
      expect([
        await inbox.prune(2000, 500),
        await inbox.prune(2000, 500),
        await inbox.prune(2000, 500),
      ]).toEqual([500, 200, 0]);
      const left = await db.all('SELECT webhook_id FROM webhook_inbox ORDER BY webhook_id');
      expect(left).toEqual([
        { webhook_id: 'keep-funded' },
        { webhook_id: 'keep-pending' },
        { webhook_id: 'keep-recent' },
      ]);
    });
  });

  describe.skipIf(engineSkipped(engine))('loan webhook history', () => {
    it('deliveries for a loan not known yet are in its history before its first transition, once', async () => {
      const db = await fresh();
      const inbox = createWebhookInbox(db);
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
      });
      await inbox.insert(
        event('s', 'loan.status_changed', 'L7', '2026-11-01T09:00:00Z', {
          status: 'funded',
          previousStatus: 'active',
        }),
        1,
      );
      await inbox.insert(
        event('f', 'loan.funded', 'L7', '2026-11-01T10:00:00Z', { fundedAt: '2026-11-01T09:30:00Z' }),
        2,
      );
      await inbox.insert(event('f2', 'loan.funded', 'L7', '2026-11-01T10:05:00Z'), 3);
      await inbox.insert(event('u', 'loan.teleported', 'L7', '2026-11-01T09:10:00Z'), 4);
      await inbox.insert(event('o', 'loan.funded', 'L8', '2026-11-01T08:00:00Z'), 5);
      expect(await p.drain()).toBe(5);
      // Documented events are history when processed (event-time order); the unknown type is not.
      const webhookRows = () =>
        db.all("SELECT loan_id, reason FROM loan_events WHERE kind = 'webhook' ORDER BY seq");
      expect(await webhookRows()).toEqual([
        { loan_id: 'L8', reason: 'loan.funded' },
        { loan_id: 'L7', reason: 'loan.status_changed' },
        { loan_id: 'L7', reason: 'loan.funded' },
        { loan_id: 'L7', reason: 'loan.funded' },
      ]);
      // A delivery still pending when the row is created is written by the pass that applies it.
      await inbox.insert(event('late', 'loan.funded', 'L7', '2026-11-01T11:00:00Z'), 6);
      const loans = createLoanStore(db);
      await loans.insert({ id: 'L7', state: 'queued', reason: 'seen in the boarding queue' }, 100);
      expect((await loans.events('L7')).map((e) => [e.kind, e.reason])).toEqual([
        ['webhook', 'loan.status_changed'],
        ['webhook', 'loan.funded'],
        ['webhook', 'loan.funded'],
        ['transition', 'seen in the boarding queue'],
      ]);
      const funded = (await loans.events('L7'))[1];
      expect(funded).toMatchObject({ actor: 'platform', at: Date.parse('2026-11-01T10:00:00Z') });
      expect(funded?.detail).toEqual({
        webhookId: 'f',
        occurredAt: Date.parse('2026-11-01T10:00:00Z'),
        fundedAt: '2026-11-01T09:30:00.000Z',
      });
      await p.drain();
      expect(
        (await loans.events('L7')).map((e) => (e.detail as { webhookId?: string } | null)?.webhookId).at(-1),
      ).toBe('late');
      expect((await loans.events('L7')).filter((e) => e.kind === 'webhook')).toHaveLength(4);
      // Only the loan's own deliveries.
      expect(
        (await loans.events('L7')).map((e) => (e.detail as { webhookId?: string } | null)?.webhookId),
      ).not.toContain('o');
      expect(await db.get("SELECT COUNT(*) AS n FROM loan_events WHERE loan_id = 'L8'")).toEqual({ n: 1 });
    });

    it('a loan.funded whose time is not a real date does not stop the loan from being created later (regression)', async () => {
      const db = await fresh();
      const inbox = createWebhookInbox(db);
      const p = createWebhookProcessor({
        clock: systemClock,
        db,
        inbox,
        logger: silentLogger(),
        debounceMs: 0,
      });
      // Epoch nanoseconds: read as milliseconds it is beyond what a Date can hold.
      await inbox.insert(
        event('ns', 'loan.funded', 'L6', '2026-11-01T10:00:00Z', { fundedAt: 1_762_000_000_000_000_000 }),
        1,
      );
      await p.drain();
      expect(await inbox.get('ns')).toMatchObject({ status: 'processed' });
      const loans = createLoanStore(db);
      await loans.insert({ id: 'L6', state: 'queued' }, 100);
      // The event time stands in for the unusable funded time.
      expect((await loans.events('L6'))[0]?.detail).toMatchObject({
        webhookId: 'ns',
        fundedAt: '2026-11-01T10:00:00.000Z',
      });
      expect(await inbox.fundedAt('L6')).toBe(Date.parse('2026-11-01T10:00:00Z'));
    });
  });
});
