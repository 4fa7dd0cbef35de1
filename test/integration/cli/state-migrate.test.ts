/**
 * `state migrate --to postgres://…` (issue 26 point 6): an SQLite state with loans in several
 * states, events, idempotency keys, webhook inbox rows, console requests and audit, customers,
 * file batches and a rate-limit strike is copied into a fresh PostgreSQL database (a real server,
 * test/support/pg.ts); the CLI on store.engine postgres then reads the same; a second run into the
 * now non-empty database is refused; a tampered row fails verification naming its table; writes
 * that land after the snapshot are detected.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { createConsoleStore } from '../../../src/store/console.js';
import { FileBatchStore } from '../../../src/store/file-batches.js';
import { createSqliteRateState } from '../../../src/store/rate-budget/sqlite.js';
import { openStore } from '../../../src/store/open.js';
import { redactUrl } from '../../../src/lib/redact.js';
import { runCli } from '../pipeline/harness.js';
import {
  createTestDatabase,
  pgCa,
  pgEnv,
  pgPassword,
  pgSkipReason,
  pgStoreConfig,
  type TestDatabase,
  pgTarget,
} from '../../support/pg.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const T0 = 1_700_000_000_000;
const TIN_KEY = 'state-migrate-test-tin-key-0001';
const PLATFORM = { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' };

function configs(dir: string, dbPath: string, pgUrl: string): { sqlite: string; postgres: string } {
  const sqlite = join(dir, 'sqlite.yaml');
  const postgres = join(dir, 'postgres.yaml');
  // The SQLite config carries the target's TLS settings (state migrate --to uses them).
  writeFileSync(
    sqlite,
    stringify({
      platform: PLATFORM,
      store: { path: dbPath, postgres: { ssl: 'verify-full', sslRootCert: pgCa } },
      customers: { tinHashKey: TIN_KEY },
      log: { level: 'silent' },
    }),
  );
  writeFileSync(
    postgres,
    stringify({
      platform: PLATFORM,
      store: { engine: 'postgres', path: dbPath, postgres: pgStoreConfig(pgUrl, { poolSize: 2 }) },
      customers: { tinHashKey: TIN_KEY },
      log: { level: 'silent' },
    }),
  );
  return { sqlite, postgres };
}

/** A state touching every kind of row the connector keeps. */
async function seed(db: Db): Promise<void> {
  const s = createBoardingStore(sqliteStore(db));
  const ids = ['L-001', 'L-002', 'l-003', 'Ünïcode ✓ "quoted" id', 'L-005', 'L-006'];
  for (const [i, id] of ids.entries()) {
    await s.loans.insert(
      {
        id,
        state: 'queued',
        patch: {
          loanNumber: `N${i}`,
          releaseMarker: `b${i}`,
          centsAmount: i === 3 ? 9_007_199_254_740_991 : 100_000 + i,
          borrowerName: `Bórrower ${i}`,
          borrowerKey: `borrower ${i}`,
        },
      },
      T0 + i,
    );
    await s.keys.ensure(`ack:${id}:b${i}`, 'ack', id, T0 + i);
  }
  await s.loans.transition('L-001', { to: 'fetched' }, T0 + 10);
  await s.loans.transition('L-001', { to: 'mapped' }, T0 + 11);
  await s.loans.transition(
    'L-001',
    { to: 'written', patch: { writtenAt: T0 + 11, coreReference: 'C-1' } },
    T0 + 11,
  );
  await s.loans.transition('L-001', { to: 'acknowledged', patch: { acknowledgedAt: T0 + 12 } }, T0 + 12);
  await s.loans.transition(
    'L-002',
    { to: 'quarantined', patch: { quarantineReason: 'mapping', lastErrorMessage: "field 'x' missing" } },
    T0 + 13,
  );
  await s.loans.transition(
    'l-003',
    { to: 'retry_wait', patch: { nextAttemptAt: T0 + 60_000, attempts: 2 } },
    T0 + 14,
  );
  await s.loans.transition(
    'Ünïcode ✓ "quoted" id',
    { to: 'acknowledged', patch: { reviewItems: 2 } },
    T0 + 15,
  );
  await s.loans.recordEvent(
    'L-005',
    { kind: 'warning', reason: '1 review item(s)', detail: { warnings: [{ code: 'c' }] } },
    T0 + 16,
  );
  const inbox = createWebhookInbox(sqliteStore(db));
  await inbox.insert(
    {
      webhookId: 'w2',
      type: 'loan.funded',
      loanId: 'L-001',
      occurredAt: T0 + 20,
      payload: { type: 'loan.funded', data: { loanId: 'L-001' } },
    },
    T0 + 30,
  );
  await inbox.insert(
    {
      webhookId: 'w1',
      type: 'loan.created',
      loanId: 'L-002',
      occurredAt: T0 + 10,
      payload: { type: 'loan.created' },
    },
    T0 + 31,
  );
  const c = createConsoleStore(sqliteStore(db));
  await c.insertRequest(
    {
      id: 'R1',
      action: 'retry',
      filter: null,
      batch: null,
      previewCount: 1,
      reason: 'core back',
      maker: 'alice',
      createdAt: T0 + 40,
      status: 'pending',
    },
    [{ id: 'L-002', state: 'quarantined' }],
    { at: T0 + 40, actor: 'alice', kind: 'request', action: 'retry', requestId: 'R1', reason: 'core back' },
  );
  await c.appendAudit({ at: T0 + 41, actor: 'bob', kind: 'login_failed' });
  await s.customers.checkKey('fingerprint-of-the-sqlite-key', T0);
  await s.customers.claim('h1', '900', 'L-001', T0);
  await s.customers.resolved(
    {
      loanId: 'L-001',
      entityId: 'E1',
      cif: '900',
      tinHash: 'h1',
      matchedBy: 'created',
      existing: false,
      nameAgrees: null,
    },
    T0 + 1,
  );
  await s.customers.resolved(
    {
      loanId: 'L-001',
      entityId: 'E2',
      cif: null,
      tinHash: 'h2',
      matchedBy: 'tin',
      existing: true,
      nameAgrees: false,
    },
    T0 + 2,
  );
  const batches = new FileBatchStore(sqliteStore(db));
  for (const loanId of ['L-001', 'Ünïcode ✓ "quoted" id']) {
    await batches.append({
      loanId,
      principalCents: '123456789012345678901',
      now: T0 + 50,
      layout: 'layout: 1',
      openBatch: () => ({ cutoffAt: T0 + 1000, day: '2026-11-25' }),
      render: () => ({
        digest: 'd1',
        rowsJson: JSON.stringify({ loans: { lines: [`line ${loanId}`], amounts: {} } }),
        recordCount: 1,
      }),
    });
  }
  // A strike within the last 24 h (platform status reads it against the real clock).
  createSqliteRateState(db).recordStrike({
    at: Date.now() - 60_000,
    bucket: 'write',
    path: '/boardings/x/ack',
    retryAfterMs: 30_000,
  });
}

describe.skipIf(pgSkipReason !== null)('state migrate --to postgres://…', () => {
  const dbs: TestDatabase[] = [];
  const fresh = async (): Promise<TestDatabase> => {
    const d = await createTestDatabase({ migrate: false });
    dbs.push(d);
    return d;
  };
  let dir: string;
  let dbPath: string;
  let sqlite: Db;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'state-migrate-'));
    dbPath = join(dir, 'state.sqlite');
    sqlite = openDatabase(dbPath);
    await seed(sqlite);
  });
  afterAll(async () => {
    sqlite.close();
    for (const d of dbs) await d.drop();
  });

  it('copies every table, verifies it, and the CLI on store.engine postgres reads the same loans and strikes; the URL password is never printed', async () => {
    const pg = await fresh();
    const cfg = configs(dir, dbPath, pg.url);
    // The password from BOARDING_STORE_PASSWORD: one in the URL is refused (issue 43 F5,
    // test/integration/cli/command-line-urls.test.ts).
    const withPassword = new URL(pg.url);
    withPassword.password = pgPassword;
    const refused = await runCli([
      '--config',
      cfg.sqlite,
      'state',
      'migrate',
      '--to',
      withPassword.toString(),
    ]);
    expect(refused.code).toBe(2);
    expect(`${refused.error ?? ''}${refused.stdout}`).not.toContain(pgPassword);
    const r = await runCli(['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url], pgEnv());
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain(pgPassword);
    expect(r.stdout).toMatch(/identical: \d+ tables, \d+ rows copied and verified/);
    expect(r.stdout).toContain('next: stop the daemon');
    // One tax-id hash key for every replica: the fingerprint came along, the key's value is never printed.
    expect(r.stdout).toContain(
      "customers.tinHashKey: the customers' tax-id hashes were carried over with the fingerprint of their key (fingerprint-of-the-sqlite-key); set customers.tinHashKey (or BOARDING_TIN_HASH_KEY) on every replica to the value of customers.tinHashKey (or BOARDING_TIN_HASH_KEY) this SQLite connector uses now",
    );
    expect(r.stdout).not.toContain(TIN_KEY);
    // The URL to put in store.postgres.url comes without any password (that goes in BOARDING_STORE_PASSWORD).
    const bare = new URL(withPassword.toString());
    bare.password = '';
    expect(r.stdout).toContain(
      `store.postgres.url: ${bare.toString()} (the password in BOARDING_STORE_PASSWORD`,
    );
    for (const table of [
      'loans',
      'loan_events',
      'idempotency_keys',
      'webhook_inbox',
      'console_requests',
      'console_request_loans',
      'console_audit',
      'customers',
      'customer_xref',
      'loan_customers',
      'file_batches',
      'file_batch_loans',
      'rate_strikes',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`^${table} +[1-9]\\d* +[1-9]\\d* +[0-9a-f]{12} +same$`, 'm'));
    }

    for (const args of [
      ['loans', 'list', '--json'],
      ['loans', 'list', '--state', 'quarantined', '--json'],
      ['platform', 'status', '--json'],
      ['loans', 'show', 'L-001', '--json'],
    ]) {
      const a = await runCli(['--config', cfg.sqlite, ...args]);
      const b = await runCli(['--config', cfg.postgres, ...args], pgEnv());
      expect(a.error).toBeNull();
      expect(b.error).toBeNull();
      expect({ args, out: JSON.parse(b.stdout) as unknown }).toEqual({
        args,
        out: JSON.parse(a.stdout) as unknown,
      });
    }
    expect(
      (
        JSON.parse(
          (await runCli(['--config', cfg.postgres, 'platform', 'status', '--json'], pgEnv())).stdout,
        ) as { strikes24h: number }
      ).strikes24h,
    ).toBe(1);
    // The copied strike joined the shared ledger without touching rate_strikes: still identical
    // (regression guard: adopting by moving the rows would make --verify-only fail after any command).
    const verified = await runCli(
      ['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url, '--verify-only'],
      pgEnv(),
    );
    expect(verified.error).toBeNull();
    expect(verified.stdout).toMatch(/identical: \d+ tables/);

    // The sequences were moved past the copied rows: new events and audit entries get new numbers.
    const store = await openStore(pgTarget(pg.url, { poolSize: 1, connectTimeoutMs: 5000 }));
    try {
      const s = createBoardingStore(store);
      const before = (await s.loans.events('L-001')).map((e) => e.seq);
      await s.loans.recordEvent('L-001', { kind: 'ops', reason: 'after the move' }, T0 + 100);
      const after = (await s.loans.events('L-001')).map((e) => e.seq);
      expect(after.length).toBe(before.length + 1);
      const maxSqlite = (sqlite.prepare('SELECT max(seq) AS m FROM loan_events').get() as { m: number }).m;
      expect(after[after.length - 1]).toBeGreaterThan(maxSqlite);
      await createConsoleStore(store).appendAudit({ at: T0 + 101, actor: 'carol', kind: 'login_failed' });
      const inbox = createWebhookInbox(store);
      expect(
        await inbox.insert(
          { webhookId: 'w3', type: 'loan.created', loanId: 'L-005', occurredAt: T0 + 5, payload: {} },
          T0 + 102,
        ),
      ).toBe(true);
      // Arrival order (the rowid PostgreSQL keeps for the inbox) continues after the copied rows.
      const rowids = (
        await store.all<{ webhook_id: string; rowid: number }>(
          'SELECT webhook_id, rowid FROM webhook_inbox ORDER BY rowid',
        )
      ).map((x) => x.webhook_id);
      expect(rowids).toEqual(['w2', 'w1', 'w3']);
    } finally {
      await store.close();
    }
  });

  it('refuses a second run into the database that now holds the state, changing nothing (regression guard: a copy never merges or overwrites)', async () => {
    const pg = await fresh();
    const cfg = configs(dir, dbPath, pg.url);
    expect((await runCli(['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url], pgEnv())).code).toBe(
      0,
    );
    const pool = pg.pool();
    const count = async (): Promise<number> =>
      Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM loan_events')).rows[0]?.n);
    const n = await count();
    const again = await runCli(['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url], pgEnv());
    expect(again.code).toBe(1);
    expect(again.error).toMatch(/already holds a state \(rows in [^)]*loans/);
    expect(again.error).toContain('never merges into or overwrites');
    expect(await count()).toBe(n);
    // --verify-only compares without copying: identical.
    const v = await runCli(
      ['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url, '--verify-only'],
      pgEnv(),
    );
    expect(v.error).toBeNull();
    expect(v.stdout).toMatch(/identical: \d+ tables/);
  });

  it('a tampered row on PostgreSQL fails verification, naming its table and no other', async () => {
    const pg = await fresh();
    const cfg = configs(dir, dbPath, pg.url);
    expect((await runCli(['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url], pgEnv())).code).toBe(
      0,
    );
    await pg.pool().query("UPDATE idempotency_keys SET loan_id = 'L-999' WHERE key = 'ack:L-002:b1'");
    const v = await runCli(
      ['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url, '--verify-only'],
      pgEnv(),
    );
    expect(v.code).toBe(1);
    expect(v.error).toBe(
      `verification failed: idempotency_keys differs between ${dbPath} and ${redactUrl(pg.url)}`,
    );
    expect(v.stdout).toMatch(/^idempotency_keys +6 +6 +[0-9a-f]{12} +DIFFERS \(postgres [0-9a-f]{12}\)$/m);
    expect(v.stdout.split('\n').filter((l) => l.includes('DIFFERS'))).toHaveLength(1);
    // A row missing is a count difference.
    await pg.pool().query("DELETE FROM webhook_inbox WHERE webhook_id = 'w1'");
    const w = await runCli(
      ['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url, '--verify-only'],
      pgEnv(),
    );
    expect(w.error).toBe(
      `verification failed: idempotency_keys, webhook_inbox differ between ${dbPath} and ${redactUrl(pg.url)}`,
    );
    expect(w.stdout).toMatch(/^webhook_inbox +2 +1 /m);
  });

  it('copies the snapshot while another connection keeps writing, and says the SQLite state changed after it (exit 1: do not switch)', async () => {
    const pg = await fresh();
    const cfg = configs(dir, dbPath, pg.url);
    const writerDb = openDatabase(dbPath);
    const s = createBoardingStore(sqliteStore(writerDb));
    // The "daemon" says it runs (this process, this host): the command notes it before copying.
    await s.daemon.publish({
      owner: 'daemon-under-test',
      pid: process.pid,
      host: hostname(),
      startedAt: Date.now(),
      updatedAt: Date.now(),
      mappingVersion: 'v1',
      mappingDir: '/m',
      reloadError: null,
    });
    let n = 0;
    const writer = setInterval(() => {
      n += 1;
      void s.loans.insert({ id: `W${n}`, state: 'queued' }, T0 + 500 + n);
    }, 1);
    const r = await runCli(['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url], pgEnv());
    clearInterval(writer);
    await s.write(() => Promise.resolve());
    await s.daemon.remove('daemon-under-test');
    writerDb.close();
    expect(r.stdout).toContain(
      `note: a daemon (pid ${process.pid} on ${hostname()}) is running on ${dbPath}`,
    );
    expect(n).toBeGreaterThan(0);
    expect(r.code).toBe(1);
    // The copy itself is consistent: every table verifies against the snapshot.
    expect(r.stdout).not.toContain('DIFFERS');
    expect(r.error).toMatch(
      /copied and verified, but the SQLite state changed after the snapshot \([^)]*loans[^)]*\): .*Do not switch/,
    );
  });

  it("a serial sequence continues past SQLite's AUTOINCREMENT high-water mark, not just the highest row left (no event number is ever reused)", async () => {
    const own = mkdtempSync(join(tmpdir(), 'state-migrate-seq-'));
    const path = join(own, 'state.sqlite');
    const db = openDatabase(path);
    const s = createBoardingStore(sqliteStore(db));
    await s.loans.insert({ id: 'A1', state: 'queued' }, T0);
    // Events 2..500 existed once and were removed: SQLite never hands out those numbers again.
    db.prepare("UPDATE sqlite_sequence SET seq = 500 WHERE name = 'loan_events'").run();
    db.close();
    const pg = await fresh();
    const cfg = configs(own, path, pg.url);
    expect((await runCli(['--config', cfg.sqlite, 'state', 'migrate', '--to', pg.url], pgEnv())).code).toBe(
      0,
    );
    const store = await openStore(pgTarget(pg.url, { poolSize: 1, connectTimeoutMs: 5000 }));
    try {
      await createBoardingStore(store).loans.recordEvent(
        'A1',
        { kind: 'ops', reason: 'after the move' },
        T0 + 1,
      );
      expect((await createBoardingStore(store).loans.events('A1')).map((e) => e.seq)).toEqual([1, 501]);
    } finally {
      await store.close();
    }
  });

  it('bad --to: not a postgres URL (exit 2); an unreachable server names --to with the password hidden (exit 1)', async () => {
    const cfg = configs(dir, dbPath, 'postgres://x@127.0.0.1:1/none');
    const a = await runCli(['--config', cfg.sqlite, 'state', 'migrate', '--to', 'mysql://x/y']);
    expect(a.code).toBe(2);
    expect(a.error).toContain('--to: expected a postgres:// or postgresql:// URL');
    const b = await runCli(
      ['--config', cfg.sqlite, 'state', 'migrate', '--to', 'postgres://boarding@127.0.0.1:1/boarding'],
      { ...pgEnv(), BOARDING_STORE_PASSWORD: 'hunter2' },
    );
    expect(b.code).toBe(1);
    expect(b.error).toMatch(
      /^--to: cannot open the state store at postgres:\/\/boarding@127\.0\.0\.1:1\/boarding/,
    );
    expect(`${b.error ?? ''}${b.stdout}`).not.toContain('hunter2');
  });
});
