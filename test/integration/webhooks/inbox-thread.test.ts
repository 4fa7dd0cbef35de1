import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/lib/logger.js';
import { openDatabase, type Db } from '../../../src/store/db.js';
import { createLoanStore } from '../../../src/store/loans.js';
import { toWebhookEvent } from '../../../src/webhooks/event.js';
import { createInboxApplier } from '../../../src/webhooks/inbox-apply.js';
import { createThreadedInbox, type ThreadedInbox } from '../../../src/webhooks/inbox-thread.js';
import { createInboxWriter } from '../../../src/webhooks/inbox-writer.js';
import { createWebhookInbox } from '../../../src/webhooks/inbox.js';
import { startWebhookService } from '../../support/webhook-service.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function fileDb(): { db: Db; path: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'inbox-thread-'));
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
  const text = JSON.stringify(payload);
  return { ...toWebhookEvent(payload, { webhookIdHeader: id, signedTimestampMs: null, receivedAt: 1, rawBody: Buffer.from(text) }), payloadJson: text };
}

function capture(): { logger: ReturnType<typeof createLogger>; logs: string[] } {
  const logs: string[] = [];
  return { logger: createLogger({ level: 'debug', destination: { write: (s: string) => void logs.push(s) } }), logs };
}

function threaded(db: Db, path: string, extra: Partial<Parameters<typeof createThreadedInbox>[0]> = {}): ThreadedInbox & { logs: string[] } {
  const inbox = createWebhookInbox(db);
  const applier = createInboxApplier(db, inbox);
  const { logger, logs } = capture();
  const t = createThreadedInbox({
    dbPath: path,
    fallback: createInboxWriter(inbox),
    fallbackPass: (limit, now) => applier.pass(limit, now),
    mainDb: db,
    logger,
    ...extra,
  });
  cleanups.push(() => t.close());
  return Object.assign(t, { logs });
}

const count = (db: Db, where = '1=1'): number => (db.prepare(`SELECT COUNT(*) AS n FROM webhook_inbox WHERE ${where}`).get() as { n: number }).n;

describe('inbox thread (the receiver’s writer while `run` listens)', () => {
  it('commits concurrent deliveries before resolving them: each id once, visible to another connection', async () => {
    const { db, path } = fileDb();
    const t = threaded(db, path);
    // The main connection checkpoints no more while the checkpointer thread runs.
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const ids = Array.from({ length: 300 }, (_, i) => `w${i % 200}`);
    const results = await Promise.all(ids.map((id) => t.write(event(id, `L${id}`), 1)));
    expect(results.filter(Boolean)).toHaveLength(200);
    expect(results.slice(200).some(Boolean)).toBe(false);
    const other = openDatabase(path);
    cleanups.push(() => void other.close());
    expect(count(other)).toBe(200);
    expect(other.prepare("SELECT payload FROM webhook_inbox WHERE webhook_id = 'w7'").get()).toEqual({ payload: event('w7', 'Lw7').payloadJson });
    await t.close();
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });

  it('loan rows created on the main connection, before, between and during passes on the thread: every delivery is in its loan’s history exactly once', async () => {
    const { db, path } = fileDb();
    const t = threaded(db, path);
    const loans = createLoanStore(db);
    const LOANS = 120;
    const at = (round: number): string => new Date(Date.parse('2026-11-01T10:00:00Z') + round * 1000).toISOString();
    const deliver = (round: number, type: string) => Promise.all(Array.from({ length: LOANS }, (_, i) => t.write(event(`r${round}-${i}`, `L${i}`, type, at(round)), 1)));
    const drain = async (): Promise<void> => {
      while ((await t.runPass(50, 5)).rows > 0);
    };
    // Processed while no loan is known: history at once for loan.created, later for loan.funded.
    await deliver(0, 'loan.created');
    await deliver(1, 'loan.funded');
    await drain();
    // Stored, still pending when a third of the loans arrive (their pass comes after).
    await deliver(2, 'loan.status_changed');
    await deliver(3, 'loan.funded');
    for (let i = 0; i < LOANS; i += 3) loans.insert({ id: `L${i}`, state: 'queued' }, 10);
    // Another third arrives while passes run on the thread.
    const passes = drain();
    for (let i = 1; i < LOANS; i += 3) {
      loans.insert({ id: `L${i}`, state: 'queued' }, 10);
      if (i % 10 === 1) await new Promise((r) => setImmediate(r));
    }
    await passes;
    await drain();
    // The last third after everything was processed.
    for (let i = 2; i < LOANS; i += 3) loans.insert({ id: `L${i}`, state: 'queued' }, 10);
    const perDelivery = db
      .prepare("SELECT json_extract(detail, '$.webhookId') AS id, loan_id AS loanId, COUNT(*) AS n FROM loan_events WHERE kind = 'webhook' GROUP BY id")
      .all() as Array<{ id: string; loanId: string; n: number }>;
    expect(perDelivery).toHaveLength(4 * LOANS);
    expect(perDelivery.filter((r) => r.n !== 1)).toEqual([]);
    expect(perDelivery.filter((r) => r.id.split('-')[1] !== r.loanId.slice(1))).toEqual([]);
  });

  it('deliveries arriving over many event-loop turns while groups are in flight are all committed and answered, and close() waits for them', async () => {
    const { db, path } = fileDb();
    const t = threaded(db, path);
    const pending: Array<Promise<boolean>> = [];
    // 40 turns of 10: more groups than may be in flight at once, so most wait on this side.
    for (let turn = 0; turn < 40; turn++) {
      for (let i = 0; i < 10; i++) pending.push(t.write(event(`t${turn}-${i}`, `L${turn}`), 1));
      await new Promise((r) => setImmediate(r));
    }
    // The last turns are still queued here when close() is called: it sends and waits for them.
    const last = Array.from({ length: 25 }, (_, i) => t.write(event(`last${i}`, 'Llast'), 1));
    await t.close();
    expect((await Promise.all([...pending, ...last])).every(Boolean)).toBe(true);
    expect(count(db)).toBe(425);
  });

  it('runs processing passes on the thread: funded time on the loans row, rows processed, in event order', async () => {
    const { db, path } = fileDb();
    db.prepare("INSERT INTO loans (id, state, created_at, updated_at) VALUES ('L1', 'queued', 1, 1)").run();
    const t = threaded(db, path);
    await t.write(event('late', 'L1', 'loan.status_changed', '2026-11-01T11:00:00Z'), 1);
    await t.write(event('funded', 'L1', 'loan.funded', '2026-11-01T10:00:00Z'), 2);
    const pass = await t.runPass(50, 5);
    expect(pass.rows).toBe(2);
    expect(pass.outcomes.map((o) => [o.webhookId, o.outcome])).toEqual([
      ['funded', 'processed'],
      ['late', 'processed'],
    ]);
    expect(pass.outcomes[0]?.fundedAt).toBe(Date.parse('2026-11-01T10:00:00Z'));
    expect(db.prepare("SELECT funded_at_iso FROM loans WHERE id = 'L1'").get()).toEqual({ funded_at_iso: '2026-11-01T10:00:00.000Z' });
    expect(count(db, "status = 'processed'")).toBe(2);
    expect(await t.runPass(50, 6)).toEqual({ rows: 0, outcomes: [] });
  });

  it('a writer thread that dies with a committed but unanswered group: every delivery still answered, each row once', async () => {
    const { db, path } = fileDb();
    let fallbacks = 0;
    const t = threaded(db, path, { workerUrl: new URL('../../support/dying-inbox-worker.ts', import.meta.url), onFallback: () => (fallbacks += 1) });
    const ids = ['a', 'b', 'c'];
    const out = await Promise.allSettled(ids.map((id) => t.write(event(id, `L-${id}`), 1)));
    expect(out.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(count(db)).toBe(3);
    expect(t.logs.join('')).toContain('webhook inbox thread failed');
    // Those rows were answered as duplicates (the dead thread had committed them): the owner is
    // told, so it processes the inbox rather than waiting for the next delivery's kick.
    await new Promise((r) => setTimeout(r, 20));
    expect(fallbacks).toBe(1);
    // From now on, writes and passes run on the main thread.
    expect(await t.write(event('d', 'L-d'), 2)).toBe(true);
    expect(await t.write(event('a', 'L-a'), 2)).toBe(false);
    expect((await t.runPass(50, 3)).rows).toBe(4);
    expect(count(db, "status = 'processed'")).toBe(4);
    // The main connection checkpoints again on its own.
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });

  it('a writer thread that cannot open the database: deliveries are written on the main thread', async () => {
    const { db, dir } = fileDb();
    const notADir = join(dir, 'plain-file');
    writeFileSync(notADir, 'x');
    const t = threaded(db, join(notADir, 'state.sqlite'));
    expect(await t.write(event('x1', 'L1'), 1)).toBe(true);
    expect(count(db)).toBe(1);
    expect(t.logs.join('')).toContain('webhook inbox thread failed');
  });
  it('a checkpointer thread that dies: automatic checkpoints come back on', async () => {
    const { db, path } = fileDb();
    const t = threaded(db, path, { workerUrl: new URL('../../support/dying-checkpointer-worker.ts', import.meta.url) });
    for (let i = 0; i < 50 && !t.logs.join('').includes('WAL checkpoint thread failed'); i++) await new Promise((r) => setTimeout(r, 20));
    expect(t.logs.join('')).toContain('WAL checkpoint thread failed');
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    expect(await t.write(event('k1', 'L1'), 1)).toBe(true);
  });

  it('main-connection transactions that read then write are not refused while the thread commits', async () => {
    const { db, path } = fileDb();
    const t = threaded(db, path);
    const loans = createLoanStore(db);
    let stop = false;
    let written = 0;
    const stream = (async () => {
      for (let i = 0; !stop; i++) {
        await Promise.all(Array.from({ length: 8 }, (_, k) => t.write(event(`s${i}-${k}`, `L${k}`), 1)));
        written += 8;
      }
    })();
    const errors: string[] = [];
    for (let i = 0; i < 300; i++) {
      try {
        // insert reads (does the id exist?) before it writes: deferred, that upgrade is refused
        // with SQLITE_BUSY(_SNAPSHOT) whenever the thread commits in between.
        loans.insert({ id: `loan-${i}`, state: 'queued' }, i);
      } catch (err) {
        errors.push(String(err));
      }
      await new Promise((r) => setImmediate(r));
    }
    stop = true;
    await stream;
    expect(written).toBeGreaterThan(0);
    expect(errors).toEqual([]);
    expect((db.prepare('SELECT COUNT(*) AS n FROM loans').get() as { n: number }).n).toBe(300);
  });
});

describe('webhook service: daily inbox prune', () => {
  it('deletes a day of old rows in short transactions after a cycle, and logs the total', async () => {
    const { db, dir } = fileDb();
    const inbox = createWebhookInbox(db);
    for (let i = 0; i < 1300; i++) inbox.insert(event(`old-${i}`, 'L1', 'loan.created'), 1000 + i);
    inbox.insert(event('recent', 'L1', 'loan.created'), Date.now());
    db.prepare("UPDATE webhook_inbox SET status = 'processed'").run();
    const { logger, logs } = capture();
    const svc = await startWebhookService({ db, dir, secret: `whsec_${randomBytes(24).toString('base64')}`, logger });
    cleanups.push(() => svc.stop());
    svc.onCycle({ reason: 'schedule', durationMs: 5, fatal: null, interrupted: 0 });
    // Chunked: the first 100 go at once, the rest after pauses (the event loop is not held).
    expect(count(db)).toBe(1201);
    for (let i = 0; i < 100 && count(db) > 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(count(db)).toBe(1);
    await new Promise((r) => setTimeout(r, 20));
    expect(logs.join('')).toContain('"rows":1300');
  });
});

describe('webhook service stop', () => {
  it('stop() finishes in a process that has nothing else to do (the threads are waited for, not abandoned)', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', new URL('../../support/service-stop-script.ts', import.meta.url).pathname], { encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.stdout).toContain('delivery 200');
    expect(r.stdout).toContain('stopped rows=1');
    expect(r.status).toBe(0);
  });

  it('close() with a delivery still in flight waits for its commit, also in a process with nothing else to do', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', new URL('../../support/inbox-close-script.ts', import.meta.url).pathname], { encoding: 'utf8', timeout: 60_000 });
    expect(r.stdout).toContain('closed inserted=true rows=1');
    expect(r.status).toBe(0);
  });
});

describe('webhook service with a file database (the inbox thread in place)', () => {
  it('20 concurrent copies of one delivery and 40 distinct ones: all 200, each stored and processed once', async () => {
    const { db, dir } = fileDb();
    db.prepare("INSERT INTO loans (id, state, created_at, updated_at) VALUES ('L-dup', 'queued', 1, 1)").run();
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const cycles: string[] = [];
    const svc = await startWebhookService({ db, dir, secret, logger: capture().logger, requestCycle: (r) => cycles.push(r) });
    cleanups.push(() => svc.stop());
    const wh = new Webhook(secret);
    const send = async (id: string, loanId: string): Promise<number> => {
      const body = JSON.stringify({ id: `evt_${id}`, type: 'loan.funded', createdAt: '2026-11-01T10:00:00Z', data: { loanId, fundedAt: '2026-11-01T10:00:00Z' } });
      const at = new Date();
      const res = await fetch(`${svc.url()}/webhooks/platform`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': wh.sign(id, at, body) },
        body,
      });
      await res.arrayBuffer();
      return res.status;
    };
    const idle = new Promise<void>((r) => svc.processor.events.on('idle', () => r()));
    const statuses = await Promise.all([
      ...Array.from({ length: 20 }, () => send('msg_dup', 'L-dup')),
      ...Array.from({ length: 40 }, (_, i) => send(`msg_${i}`, `L${i}`)),
    ]);
    expect(statuses.every((s) => s === 200)).toBe(true);
    await idle;
    await svc.processor.drain();
    expect(count(db)).toBe(41);
    expect(count(db, "status = 'processed'")).toBe(41);
    expect(db.prepare("SELECT COUNT(*) AS n FROM loan_events WHERE loan_id = 'L-dup'").get()).toEqual({ n: 1 });
    expect(db.prepare("SELECT funded_at_iso FROM loans WHERE id = 'L-dup'").get()).toEqual({ funded_at_iso: '2026-11-01T10:00:00.000Z' });
    expect(cycles.length).toBeGreaterThan(0);
  });
});
