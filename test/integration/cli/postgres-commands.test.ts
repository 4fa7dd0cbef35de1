/**
 * Every CLI command that reads or writes the state, run for real (in-process, as main.ts runs it)
 * against `store: { engine: postgres }` (issue 26 point 6): the sandbox platform, the shipped
 * generic mapping set, the file core, and the state in a fresh PostgreSQL database of the test
 * server. Each command group: its output, its exit code, the rows it changed in PostgreSQL; and at
 * the end, no SQLite file anywhere under the connector's folder (never a silent fall-back).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BOARDING_LEASE } from '../../../src/pipeline/cycle.js';
import { createBoardingStore, type BoardingStore } from '../../../src/store/index.js';
import { openStore } from '../../../src/store/open.js';
import { pgLeaseBackend } from '../../../src/store/leadership/pg.js';
import type { PgPool } from '../../../src/store/pg/pool.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { runCliSplit, type CliRun } from '../../support/cli-run.js';
import {
  createTestDatabase,
  pgSkipReason,
  type TestDatabase,
  pgTarget,
  pgEnv,
  usePostgres,
} from '../../support/pg.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import { fineractExternalId } from '../../../src/core/fineract/external-id.js';
import { startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

const LOANS = 8;
// platform.environment: development lets a loopback http endpoint through (the sandbox allows it too).
const PUBLIC_URL = 'http://127.0.0.1:9/webhooks/platform';

/** Every file under dir, recursively (relative paths). */
function filesUnder(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(dir, prefix), { withFileTypes: true })) {
    const rel = join(prefix, e.name);
    if (e.isDirectory()) out.push(...filesUnder(dir, rel));
    else out.push(rel);
  }
  return out;
}

describe.skipIf(pgSkipReason !== null)('every state command on store.engine: postgres', () => {
  let p: TestPlatform;
  let pg: TestDatabase;
  let cfg: ReturnType<typeof writeConnectorConfig>;
  let db: StoreDb;
  let store: BoardingStore;
  const cli = (...args: string[]): Promise<CliRun> =>
    runCliSplit(['--config', cfg.configPath, '--progress=never', ...args], {
      env: { USER: 'ops-test', ...pgEnv() },
    });
  /** The command's own account of itself, for an assertion's message. */
  const said = (r: CliRun): string => `exit ${r.code}: ${r.error ?? ''}\n${r.stdout}\n${r.stderr}`;

  beforeAll(async () => {
    p = await startTestPlatform({
      loans: LOANS,
      releaseRatio: 1,
      seed: 11,
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
      allowLoopbackWebhooks: true,
    });
    pg = await createTestDatabase({ migrate: false });
    cfg = writeConnectorConfig(p, { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 60 });
    const doc = parse(readFileSync(cfg.configPath, 'utf8')) as Record<string, unknown>;
    // store.path stays set (as a bank's config keeps it after `state migrate`): it must not be used.
    doc['store'] = { path: cfg.dbPath };
    usePostgres(doc, pg.url, { poolSize: 3 });
    doc['reports'] = { dir: join(cfg.dir, 'reports') };
    (doc['platform'] as Record<string, unknown>)['environment'] = 'development';
    writeFileSync(cfg.configPath, stringify(doc));
    db = await openStore(pgTarget(pg.url, { poolSize: 2, connectTimeoutMs: 5000 }));
    store = createBoardingStore(db);
  });

  afterAll(async () => {
    await db?.close();
    await p?.close();
    await pg?.drop();
  });

  it('sync --dry-run reads only; sync --once boards every loan into PostgreSQL', async () => {
    const dry = await cli('sync', '--dry-run', '--json');
    expect(dry.code, said(dry)).toBe(0);
    expect(await store.loans.countByState()).toMatchObject({ acknowledged: 0 });
    const r = await cli('sync', '--once', '--json', '--settle-ms', '20000');
    expect(r.code, said(r)).toBe(0);
    const states = (JSON.parse(r.stdout) as { states: Record<string, number> }).states;
    expect((states['acknowledged'] ?? 0) + (states['quarantined'] ?? 0)).toBe(LOANS);
    expect(states['acknowledged']).toBeGreaterThan(0);
    expect((await store.loans.countByState()).acknowledged).toBe(states['acknowledged']);
  });

  it('loans list / show / retry / skip / reboard', async () => {
    const list = await cli('loans', 'list', '--json');
    expect(list.code, said(list)).toBe(0);
    const rows = JSON.parse(list.stdout) as Array<{ id: string; state: string }>;
    expect(rows).toHaveLength(LOANS);
    const acked = rows.find((r) => r.state === 'acknowledged')?.id as string;

    const show = await cli('loans', 'show', acked);
    expect(show.code, said(show)).toBe(0);
    expect(show.stdout).toContain(acked);
    expect(show.stdout).toContain('acknowledged');
    // By the bank's account number too (the lookup on PostgreSQL).
    const account = /account number: +(\d+)/.exec(show.stdout)?.[1];
    expect(account, show.stdout).toBeDefined();
    const byNumber = await cli('loans', 'show', account!);
    expect(byNumber.code, said(byNumber)).toBe(0);
    expect(byNumber.stdout).toContain(`loan ${acked}`);
    const unknown = await cli('loans', 'show', 'no-such-loan');
    expect(unknown.code).not.toBe(0);
    expect(unknown.error ?? unknown.stderr).toContain('no-such-loan');

    // A loan quarantined by the pipeline (put there directly: which ones the sandbox makes fail is its business).
    await store.loans.insert(
      { id: 'pg-q-1', state: 'quarantined', patch: { quarantineReason: 'mapping' } },
      Date.now(),
    );
    const preview = await cli('loans', 'retry', '--all', '--dry-run');
    expect(preview.code, said(preview)).toBe(0);
    expect(preview.stdout).toContain('pg-q-1');
    expect((await store.loans.require('pg-q-1')).state).toBe('quarantined');
    const retry = await cli('loans', 'retry', 'pg-q-1', '--by', 'ops-anna');
    expect(retry.code, said(retry)).toBe(0);
    expect((await store.loans.require('pg-q-1')).state).toBe('queued');
    const skip = await cli(
      'loans',
      'skip',
      'pg-q-1',
      '--reason',
      'withdrawn by the borrower',
      '--by',
      'ops-anna',
    );
    expect(skip.code, said(skip)).toBe(0);
    expect((await store.loans.require('pg-q-1')).state).toBe('skipped');
    expect((await store.loans.events('pg-q-1')).filter((e) => e.kind === 'ops').map((e) => e.actor)).toEqual([
      'ops-anna',
      'ops-anna',
    ]);
    // Refused: an acknowledged loan cannot be skipped (usage error, nothing changed).
    const refused = await cli('loans', 'skip', acked, '--reason', 'x');
    expect(refused.code).not.toBe(0);
    expect((await store.loans.require(acked)).state).toBe('acknowledged');

    const diff = await cli('loans', 'reboard', acked, '--dry-run', '--json');
    expect(diff.code, said(diff)).toBe(0);
    const reboard = await cli(
      'loans',
      'reboard',
      acked,
      '--force',
      '--reason',
      'core asked for a re-send',
      '--by',
      'ops-anna',
      '--json',
    );
    expect(reboard.code, said(reboard)).toBe(0);
    expect(
      (await store.loans.events(acked)).some(
        (e) => e.kind === 'ops' && e.actor === 'ops-anna' && /re-send/.test(e.reason ?? ''),
      ),
    ).toBe(true);
    expect((await store.loans.require(acked)).state).toBe('acknowledged');
  });

  it('customers list / show', async () => {
    const list = await cli('customers', 'list', '--json');
    expect(list.code, said(list)).toBe(0);
    const rows = JSON.parse(list.stdout) as Array<{ entityId: string }>;
    expect(rows.length).toBeGreaterThan(0);
    const show = await cli('customers', 'show', rows[0]?.entityId as string, '--json');
    expect(show.code, said(show)).toBe(0);
    expect(
      (JSON.parse(show.stdout) as { customers: Array<{ entityId: string }> }).customers[0]?.entityId,
    ).toBe(rows[0]?.entityId);
    expect((await cli('customers', 'list', '--matched-by', 'nonsense')).code).toBe(2);
  });

  it('mappings preview reads the stored queue item from PostgreSQL', async () => {
    const acked = (await store.loans.list({ state: 'acknowledged' }))[0]?.id as string;
    const r = await cli('mappings', 'preview', '--loan', acked);
    expect(r.code, said(r)).toBe(0);
    expect(r.stdout).toContain(acked);
  });

  it('platform status / strikes clear: the ledger in PostgreSQL', async () => {
    const now = Date.now();
    for (const at of [now - 120_000, now - 60_000]) {
      await db.run('INSERT INTO rate_strikes (at, bucket, path, retry_after_ms) VALUES (?, ?, ?, ?)', [
        at,
        'write',
        '/public/v1/loans/:id/boarding',
        2000,
      ]);
    }
    const before = await cli('platform', 'status', '--json');
    expect(before.code, said(before)).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({ strikes24h: 2, trafficStopped: true });
    const cleared = await cli(
      'platform',
      'strikes',
      'clear',
      '--by',
      'ops-anna',
      '--reason',
      'support ticket 4711: key in good standing',
    );
    expect(cleared.code, said(cleared)).toBe(0);
    expect(cleared.stdout).toContain('cleared 2 strike(s)');
    // The ledger every replica shares: the clear reaches them all at their next request.
    expect(cleared.stdout).toContain('every replica on this API key resumes');
    expect(await db.all('SELECT cleared_by FROM rate_shared_strikes ORDER BY at')).toEqual([
      { cleared_by: 'ops-anna: support ticket 4711: key in good standing' },
      { cleared_by: 'ops-anna: support ticket 4711: key in good standing' },
    ]);
    const after = await cli('platform', 'status');
    expect(after.code, said(after)).toBe(0);
    expect(after.stdout).toContain('429 strikes in the last 24 h: 0');
  });

  it('webhooks register / list / enable keep their idempotency keys in PostgreSQL', async () => {
    const reg = await cli('webhooks', 'register', '--url', PUBLIC_URL, '--json');
    expect(reg.code, said(reg)).toBe(0);
    const registered = JSON.parse(reg.stdout) as { registered: boolean; endpoint: { id: string } };
    expect(registered.registered).toBe(true);
    // Again: the platform's endpoint is found, none is created twice.
    expect(
      JSON.parse((await cli('webhooks', 'register', '--url', PUBLIC_URL, '--json')).stdout),
    ).toMatchObject({ registered: false });
    const list = await cli('webhooks', 'list', '--json');
    expect(list.code, said(list)).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject([{ id: registered.endpoint.id }]);
    const enable = await cli('webhooks', 'enable', registered.endpoint.id);
    expect(enable.code, said(enable)).toBe(0);
    expect(
      await db.get("SELECT COUNT(*) AS n FROM idempotency_keys WHERE operation LIKE 'webhook-endpoint:%'"),
    ).toMatchObject({ n: expect.any(Number) });
    expect(
      (
        (await db.get<{ n: number }>(
          "SELECT COUNT(*) AS n FROM idempotency_keys WHERE operation = 'webhook-endpoint:create'",
        )) as { n: number }
      ).n,
    ).toBe(1);
  });

  it('reconcile writes its report from the PostgreSQL state', async () => {
    const out = join(cfg.dir, 'recon');
    const r = await cli('reconcile', '--out', out, '--json');
    expect(r.code, said(r)).toBe(0);
    for (const f of ['report.json', 'report.csv', 'report.html']) expect(existsSync(join(out, f))).toBe(true);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
      totals: Record<string, { count: number }>;
    };
    // The connector's ledger in the report is the PostgreSQL state's.
    const counts = await store.loans.countByState();
    expect(report.totals['acknowledged']?.count).toBe(counts.acknowledged);
    expect(report.totals['skipped']?.count).toBe(counts.skipped);
  });

  it('batches list / show / seal', async () => {
    const list = await cli('batches', 'list', '--json');
    expect(list.code, said(list)).toBe(0);
    const batches = JSON.parse(list.stdout) as Array<{ id: string; status: string; loans: number }>;
    expect(batches.length).toBeGreaterThan(0);
    const open = batches.find((b) => b.status === 'open');
    expect(open, list.stdout).toBeDefined();
    const show = await cli('batches', 'show', open?.id as string, '--json');
    expect(show.code, said(show)).toBe(0);
    expect((JSON.parse(show.stdout) as { loanList: unknown[] }).loanList.length).toBe(open?.loans);
    const seal = await cli('batches', 'seal', '--reason', 'early cut-off for the audit', '--by', 'ops-anna');
    expect(seal.code, said(seal)).toBe(0);
    expect(seal.stdout).toContain(`sealed ${open?.id as string}`);
    expect(
      await db.get(
        'SELECT status, sealed_by AS "sealedBy", seal_reason AS "sealReason" FROM file_batches WHERE id = ?',
        [open?.id],
      ),
    ).toMatchObject({ status: 'sealed', sealedBy: 'ops-anna' });
    expect((await cli('batches', 'seal', '--reason', 'again')).code).toBe(1);
  });

  it('config check --connect checks the PostgreSQL state database', async () => {
    const r = await cli('config', 'check', '--connect', '--json');
    const checks = Object.fromEntries(
      (
        JSON.parse(r.stdout) as { checks: Array<{ name: string; status: string; detail: string | null }> }
      ).checks.map((c) => [c.name, c]),
    );
    expect(checks['store'], r.stdout).toMatchObject({ status: 'ok' });
    expect(JSON.stringify(checks['store'])).toMatch(/postgres/i);
    // A wrong database: the store check fails, naming the key.
    const doc = parse(readFileSync(cfg.configPath, 'utf8')) as { store: { postgres: { url: string } } };
    const bad = join(cfg.dir, 'bad.yaml');
    writeFileSync(
      bad,
      stringify({
        ...doc,
        store: {
          ...doc.store,
          postgres: {
            ...doc.store.postgres,
            url: doc.store.postgres.url.replace(/\/[^/]+$/, '/no_such_database'),
          },
        },
      }),
    );
    const failing = await runCliSplit(['--config', bad, 'config', 'check', '--connect', '--json'], {
      env: pgEnv(),
    });
    expect(failing.code).toBe(1);
    const store = (
      JSON.parse(failing.stdout) as { checks: Array<{ name: string; status: string; detail: string | null }> }
    ).checks.find((c) => c.name === 'store');
    expect(store?.status).toBe('fail');
    expect(store?.detail).toContain('store.postgres.url');
  });

  it('state backup says to use the PostgreSQL backups (exit 2, nothing written); state migrate has no SQLite to copy', async () => {
    const out = join(cfg.dir, 'backup.sqlite');
    const r = await cli('state', 'backup', '--out', out);
    expect(r.code).toBe(2);
    expect(r.error).toMatch(/store\.engine is postgres/);
    expect(r.error).toMatch(/pg_dump/);
    expect(r.error).toMatch(/point-in-time recovery/);
    expect(existsSync(out)).toBe(false);
    const m = await cli('state', 'migrate', '--to', pg.url);
    expect(m.code).toBe(2);
    expect(m.error).toMatch(/store\.path: there is no SQLite state/);
  });

  it('sync --once exits 3 (busy) while another process leads on PostgreSQL, and boards again once it lets go', async () => {
    const leases = pgLeaseBackend(db.pool as PgPool);
    const holder = `${hostname()}:${process.pid}:replica-b`;
    const term = await leases.acquire(BOARDING_LEASE, holder, 60_000);
    expect(term).not.toBeNull();
    const busy = await cli('sync', '--once');
    expect(busy.code, said(busy)).toBe(3);
    expect(busy.error).toContain('holds the boarding lease');
    expect(await leases.release({ name: BOARDING_LEASE, holder, epoch: term?.epoch as number })).toBe(true);
    const again = await cli('sync', '--once', '--json');
    expect(again.code, said(again)).toBe(0);
  });

  it('no command created a SQLite file', () => {
    expect(existsSync(cfg.dbPath)).toBe(false);
    expect(filesUnder(cfg.dir).filter((f) => /\.sqlite(-wal|-shm|-journal)?$/.test(f))).toEqual([]);
  });
});

describe.skipIf(pgSkipReason !== null)('the Fineract core with the state in PostgreSQL', () => {
  let p: TestPlatform;
  let pg: TestDatabase;
  let fake: FakeFineract;
  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 16,
      releaseRatio: 1,
      seed: 37,
      idShapes: 'mixed',
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 100,
    });
    pg = await createTestDatabase({ migrate: false });
    fake = await startFakeFineract();
  });
  afterAll(async () => {
    await fake?.close();
    await p?.close();
    await pg?.drop();
  });

  it('sync --once boards ids of every shape under digests, keeps the platform ids in PostgreSQL, and reconcile maps them back', async () => {
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 100,
      mappingsDir: join(process.cwd(), 'mappings/fineract'),
      extra: {
        core: {
          adapter: 'http',
          http: {
            baseUrl: fake.url,
            username: fake.username,
            password: fake.password,
            tenantId: fake.tenantId,
            timeoutMs: 5000,
          },
        },
      },
    });
    const doc = parse(readFileSync(cfg.configPath, 'utf8')) as Record<string, unknown>;
    doc['store'] = { path: cfg.dbPath };
    usePostgres(doc, pg.url, { poolSize: 3 });
    writeFileSync(cfg.configPath, stringify(doc));
    const r = await runCliSplit(
      ['--config', cfg.configPath, '--progress=never', 'sync', '--once', '--json'],
      { env: pgEnv() },
    );
    expect(r.code, `${r.error ?? ''}\n${r.stderr}`).toBe(0);
    expect(fake.writes().filter((w) => w.status >= 400)).toEqual([]);
    const db = await openStore(pgTarget(pg.url, { poolSize: 1, connectTimeoutMs: 5000 }));
    try {
      const rows = await db.all<{ id: string; account_number: string | null }>(
        "SELECT id, account_number FROM loans WHERE state = 'acknowledged' ORDER BY id",
      );
      expect(rows.length).toBeGreaterThan(5);
      for (const row of rows)
        expect(row.account_number, row.id).toBe(
          fake.loans.find((l) => l.externalId === fineractExternalId(row.id))?.accountNo,
        );
      // The digests Fineract holds for long and path-unsafe ids, and the platform id of each, are in PostgreSQL.
      const digested = rows.filter((row) => fineractExternalId(row.id) !== row.id);
      expect(digested.length).toBeGreaterThan(0);
      for (const row of digested) {
        expect(
          await db.get('SELECT platform_id AS id FROM core_external_refs WHERE ref = ?', [
            fineractExternalId(row.id),
          ]),
          row.id,
        ).toEqual({ id: row.id });
      }
      const rec = await runCliSplit(
        [
          '--config',
          cfg.configPath,
          '--progress=never',
          'reconcile',
          '--json',
          '--out',
          join(cfg.dir, 'reports'),
        ],
        { env: pgEnv() },
      );
      expect(rec.code, rec.error ?? '').toBe(0);
      const report = JSON.parse(rec.stdout) as {
        totals: { writtenToCore: { count: number } };
        exceptionsByReason: Record<string, number>;
      };
      expect(report.totals.writtenToCore.count).toBe(rows.length);
      expect(report.exceptionsByReason['acknowledged_missing_in_core'] ?? 0).toBe(0);
      expect(report.exceptionsByReason['in_core_unknown_to_connector'] ?? 0).toBe(0);
    } finally {
      await db.close();
    }
    expect(filesUnder(cfg.dir).filter((f) => /\.sqlite(-wal|-shm|-journal)?$/.test(f))).toEqual([]);
  }, 120_000);
});

describe('state commands with an unreachable PostgreSQL', () => {
  it('each group exits 1 naming store.postgres.url (the password hidden), and none falls back to SQLite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pg-unreachable-'));
    try {
      const configPath = join(dir, 'config.yaml');
      writeFileSync(
        configPath,
        stringify({
          platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
          store: {
            engine: 'postgres',
            path: join(dir, 'state.sqlite'),
            postgres: { url: 'postgres://boarding:hunter2@127.0.0.1:1/boarding', connectTimeoutMs: 1000 },
          },
          customers: { tinHashKey: 'unreachable-test-tin-key' },
          core: { adapter: 'file', file: { dir: join(dir, 'core') } },
          log: { level: 'silent' },
        }),
      );
      for (const args of [
        ['loans', 'list'],
        ['loans', 'retry', 'L1', '--by', 'ops'],
        ['customers', 'list'],
        ['platform', 'status'],
        ['platform', 'strikes', 'clear', '--reason', 'x', '--by', 'ops'],
        ['batches', 'list'],
        ['sync', '--once'],
        ['reconcile'],
      ]) {
        const r = await runCliSplit(['--config', configPath, '--progress=never', ...args]);
        expect(r.code, `${args.join(' ')}: ${r.error ?? ''}`).toBe(1);
        expect(r.error, args.join(' ')).toMatch(
          /^store\.postgres\.url: cannot open the state store at postgres:\/\/boarding:\(hidden\)@127\.0\.0\.1:1\/boarding/,
        );
        expect(`${r.error ?? ''}${r.stdout}${r.stderr}`).not.toContain('hunter2');
      }
      expect(filesUnder(dir).filter((f) => /\.sqlite/.test(f))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
