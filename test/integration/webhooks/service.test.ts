import { spawnSync } from 'node:child_process';
import { systemClock } from '../../../src/lib/clock.js';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../../src/lib/logger.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { createLoanStore } from '../../../src/store/loans.js';
import { toWebhookEvent } from '../../../src/webhooks/event.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { createWebhookProcessor } from '../../../src/webhooks/processor.js';
import { startWebhookService } from '../../support/webhook-service.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function fileDb(): { db: Db; path: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'webhook-service-'));
  const path = join(dir, 'state.sqlite');
  const db = openDatabase(path);
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  cleanups.push(() => {
    if (db.open) db.close();
  });
  return { db, path, dir };
}

function event(id: string, loanId: string, type = 'loan.funded', at = '2026-11-01T10:00:00Z') {
  const payload = { id, type, createdAt: at, data: { loanId, fundedAt: at } };
  return toWebhookEvent(payload, {
    webhookIdHeader: id,
    signedTimestampMs: null,
    receivedAt: 1,
    rawBody: Buffer.from(JSON.stringify(payload)),
  });
}

function capture(): { logger: ReturnType<typeof createLogger>; logs: string[] } {
  const logs: string[] = [];
  return {
    logger: createLogger({ level: 'debug', destination: { write: (s: string) => void logs.push(s) } }),
    logs,
  };
}

const count = (db: Db, where = '1=1'): number =>
  (db.prepare(`SELECT COUNT(*) AS n FROM webhook_inbox WHERE ${where}`).get() as { n: number }).n;

describe('webhook history', () => {
  it('loan rows created before, between and after processing passes: every delivery is in its loan’s history exactly once', async () => {
    const { db } = fileDb();
    const inbox = createWebhookInbox(sqliteStore(db));
    const processor = createWebhookProcessor({
      clock: systemClock,
      db: sqliteStore(db),
      inbox,
      logger: capture().logger,
      debounceMs: 0,
      batchSize: 50,
    });
    await processor.start();
    cleanups.push(() => processor.stop());
    const loans = createLoanStore(sqliteStore(db));
    const LOANS = 120;
    const at = (round: number): string =>
      new Date(Date.parse('2026-11-01T10:00:00Z') + round * 1000).toISOString();
    const deliver = async (round: number, type: string): Promise<void> => {
      for (let i = 0; i < LOANS; i++)
        await inbox.insert(event(`r${round}-${i}`, `L${i}`, type, at(round)), 1);
    };
    // Processed while no loan is known.
    await deliver(0, 'loan.created');
    await deliver(1, 'loan.funded');
    await processor.drain();
    // Stored, still pending when a third of the loans arrive (their pass comes after).
    await deliver(2, 'loan.status_changed');
    await deliver(3, 'loan.funded');
    for (let i = 0; i < LOANS; i += 3) await loans.insert({ id: `L${i}`, state: 'queued' }, 10);
    // Another third arrives while passes run.
    const passes = processor.drain();
    for (let i = 1; i < LOANS; i += 3) {
      await loans.insert({ id: `L${i}`, state: 'queued' }, 10);
      if (i % 10 === 1) await new Promise((r) => setImmediate(r));
    }
    await passes;
    await processor.drain();
    // The last third after everything was processed.
    for (let i = 2; i < LOANS; i += 3) await loans.insert({ id: `L${i}`, state: 'queued' }, 10);
    const perDelivery = db
      .prepare(
        "SELECT json_extract(detail, '$.webhookId') AS id, loan_id AS loanId, COUNT(*) AS n FROM loan_events WHERE kind = 'webhook' GROUP BY id",
      )
      .all() as Array<{ id: string; loanId: string; n: number }>;
    expect(perDelivery).toHaveLength(4 * LOANS);
    expect(perDelivery.filter((r) => r.n !== 1)).toEqual([]);
    expect(perDelivery.filter((r) => r.id.split('-')[1] !== r.loanId.slice(1))).toEqual([]);
  });
});

describe('webhook service: daily inbox prune', () => {
  it('deletes a day of old rows in short transactions after a cycle, and logs the total', async () => {
    const { db, dir } = fileDb();
    const inbox = createWebhookInbox(sqliteStore(db));
    for (let i = 0; i < 1300; i++) await inbox.insert(event(`old-${i}`, 'L1', 'loan.created'), 1000 + i);
    await inbox.insert(event('recent', 'L1', 'loan.created'), Date.now());
    db.prepare("UPDATE webhook_inbox SET status = 'processed'").run();
    const { logger, logs } = capture();
    const svc = await startWebhookService({
      db,
      dir,
      secret: `whsec_${randomBytes(24).toString('base64')}`,
      logger,
    });
    cleanups.push(() => svc.stop());
    await svc.onCycle({ reason: 'schedule', durationMs: 5, fatal: null, interrupted: 0 });
    // Chunked: 100 at a time, with pauses between (the event loop is not held).
    await vi.waitFor(() => expect(count(db)).toBeLessThan(1301), { timeout: 5000, interval: 1 });
    await vi.waitFor(() => expect(count(db)).toBe(1), { timeout: 5000, interval: 10 });
    await vi.waitFor(() => expect(logs.join('')).toContain('"rows":1300'));
  });
});

describe('webhook service stop', () => {
  it('stop() finishes in a process that has nothing else to do', () => {
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', new URL('../../support/service-stop-script.ts', import.meta.url).pathname],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.stdout).toContain('delivery 200');
    expect(r.stdout).toContain('stopped rows=1');
    expect(r.status).toBe(0);
  });
});

describe('webhook service with a file database', () => {
  it('20 concurrent copies of one delivery and 40 distinct ones: all 200, each stored and processed once', async () => {
    const { db, dir } = fileDb();
    db.prepare(
      "INSERT INTO loans (id, state, created_at, updated_at) VALUES ('L-dup', 'queued', 1, 1)",
    ).run();
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const cycles: string[] = [];
    const svc = await startWebhookService({
      db,
      dir,
      secret,
      logger: capture().logger,
      requestCycle: (r) => cycles.push(r),
    });
    cleanups.push(() => svc.stop());
    const wh = new Webhook(secret);
    const send = async (id: string, loanId: string): Promise<number> => {
      const body = JSON.stringify({
        id: `evt_${id}`,
        type: 'loan.funded',
        createdAt: '2026-11-01T10:00:00Z',
        data: { loanId, fundedAt: '2026-11-01T10:00:00Z' },
      });
      const at = new Date();
      const res = await fetch(`${svc.url()}/webhooks/platform`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': id,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': wh.sign(id, at, body),
        },
        body,
      });
      await res.arrayBuffer();
      return res.status;
    };
    const statuses = await Promise.all([
      ...Array.from({ length: 20 }, () => send('msg_dup', 'L-dup')),
      ...Array.from({ length: 40 }, (_, i) => send(`msg_${i}`, `L${i}`)),
    ]);
    expect(statuses.every((s) => s === 200)).toBe(true);
    // Every 200 was sent after its row was committed: all 41 are there the moment the answers are.
    expect(count(db)).toBe(41);
    await vi.waitFor(() => expect(count(db, "status = 'processed'")).toBe(41));
    expect(db.prepare("SELECT COUNT(*) AS n FROM loan_events WHERE loan_id = 'L-dup'").get()).toEqual({
      n: 1,
    });
    expect(db.prepare("SELECT funded_at_iso FROM loans WHERE id = 'L-dup'").get()).toEqual({
      funded_at_iso: '2026-11-01T10:00:00.000Z',
    });
    await vi.waitFor(() => expect(cycles.length).toBeGreaterThan(0));
  });
});
