import { readdirSync, readFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasValidCheckDigit } from '../../../src/lib/check-digit.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { DEFAULT_NUMBER_POOLS } from '../../../src/store/identity/numbers.js';
import { loadConfig } from '../../../src/config/load.js';
import { createWebhookService } from '../../../src/app/webhook-service.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import { fineractExternalId } from '../../../src/core/fineract/external-id.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

/**
 * Issue 23 (23a): platform ids of every shape (short, UUID, opaque up to 64 characters with
 * - _ . :) board through the shipped sets and both cores, each loan keyed by the bank's own
 * account number: unique, fitting its column, with a valid check digit.
 */

const RATE = { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 100 };
const isUuid = (id: string): boolean =>
  /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id);

interface Summary {
  fatal: { code: string; message: string } | null;
  states: Record<string, number>;
  problems: Array<{ loanId: string; state: string; code: string; message: string }>;
}

function dbRows<T>(dbPath: string, sql: string): T[] {
  const db = openDatabase(dbPath, { readonly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

describe('mixed id shapes through the file core and the default generic set (fixed-width LNLOAD.DAT included)', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await startTestPlatform({ loans: 40, releaseRatio: 1, seed: 23, idShapes: 'mixed', ...RATE });
  });
  afterAll(() => p.close());

  it('nothing quarantines for an id; every account number fits ACCOUNT_NO, is unique and checks (Luhn)', async () => {
    const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
    const ids = list.data.map((l) => l.id);
    // The data set really is mixed: UUIDs, ids with ':' and ids of the longest length.
    expect(ids.some(isUuid)).toBe(true);
    expect(ids.some((id) => id.includes(':') && id.length === 64)).toBe(true);
    expect(ids.some((id) => /^ln_/.test(id))).toBe(true);

    const cfg = writeConnectorConfig(p, RATE);
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.error).toBeNull();
    const summary = JSON.parse(r.stdout) as Summary;
    expect(summary.fatal).toBeNull();
    // Quarantines are the sandbox's contradictory data only, never the core refusing an id.
    expect(
      summary.problems.filter(
        (q) => q.code.startsWith('core') || /LOAN_ID|BORROWER_ID|bytes|externalId|maxLength/.test(q.message),
      ),
    ).toEqual([]);
    const boarded = summary.states['acknowledged'] ?? 0;
    expect(boarded).toBeGreaterThan(25);

    const seal = await runCli([
      '--config',
      cfg.configPath,
      'batches',
      'seal',
      '--reason',
      'test',
      '--by',
      'test',
    ]);
    expect(seal.error).toBeNull();
    const [batch] = readdirSync(join(cfg.coreDir, 'batches'));
    const dat = readFileSync(join(cfg.coreDir, 'batches', batch!, 'LNLOAD.DAT'))
      .toString('latin1')
      .split('\r\n')
      .filter((l) => l !== '');
    const records = dat.slice(1, -1);
    expect(records).toHaveLength(boarded);
    const accounts = records.map((rec) => rec.slice(1, 21));
    for (const a of accounts) {
      // ACCOUNT_NO is 20 bytes: the pool's 10 digits, left-aligned, space-padded.
      expect(a).toMatch(/^\d{10} {10}$/);
      expect(hasValidCheckDigit('luhn', a.trim()), a).toBe(true);
    }
    expect(new Set(accounts).size).toBe(accounts.length);

    // The state database: one number per loan (quarantined loans keep theirs: a gap), unique,
    // and each boarded loan's row holds the number its batch line carries.
    const numbers = dbRows<{ key: string; number: string }>(
      cfg.dbPath,
      "SELECT key, number FROM bank_numbers WHERE pool = 'account'",
    );
    expect(new Set(numbers.map((n) => n.number)).size).toBe(numbers.length);
    const rows = dbRows<{ id: string; account_number: string | null; state: string }>(
      cfg.dbPath,
      'SELECT id, account_number, state FROM loans',
    );
    const byKey = new Map(numbers.map((n) => [n.key, n.number]));
    for (const row of rows.filter((x) => x.state === 'acknowledged'))
      expect(row.account_number, row.id).toBe(byKey.get(row.id));
    expect(accounts.map((a) => a.trim()).sort()).toEqual(
      rows
        .filter((x) => x.state === 'acknowledged')
        .map((x) => x.account_number)
        .sort(),
    );

    // A second sync writes nothing new and allocates nothing new: every loan keeps its number.
    const again = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(again.error).toBeNull();
    expect(
      dbRows<{ key: string; number: string }>(
        cfg.dbPath,
        "SELECT key, number FROM bank_numbers WHERE pool = 'account'",
      ),
    ).toEqual(numbers);

    // loans show names the account number.
    const acked = rows.find((x) => x.state === 'acknowledged' && x.id.includes(':'))!;
    const show = await runCli(['--config', cfg.configPath, 'loans', 'show', acked.id]);
    expect(show.stdout).toContain(
      `account number:  ${acked.account_number} (from the pool, identity.accountNumbers)`,
    );
  }, 120_000);

  it("refuses to start when the pool's numbers are wider than the column the mapping set puts them in", async () => {
    const cfg = writeConnectorConfig(p, {
      ...RATE,
      extra: {
        identity: {
          accountNumbers: { pool: { ranges: [{ from: '1', to: '999' }], width: 24, checkDigit: 'luhn' } },
        },
      },
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once']);
    expect(r.code).toBe(1);
    expect(r.error).toMatch(
      /^identity\.accountNumbers\.pool\.width: 24 characters do not fit mapping\.yaml:\d+:\d+ loan\.accountNumber \(maxLength\) \(20\), .*layout\.yaml LNLOAD\.DAT ACCOUNT_NO \(20\); narrow the pool \(width\) or widen the column$/,
    );
  });

  it('an exhausted pool stops boarding with a fatal error naming the config key, never a reused number', async () => {
    // Its own sandbox: the loans above are boarded already.
    const p = await startTestPlatform({ loans: 12, releaseRatio: 1, seed: 24, idShapes: 'mixed', ...RATE });
    try {
      await exhaust(p);
    } finally {
      await p.close();
    }
  }, 120_000);
});

async function exhaust(p: TestPlatform): Promise<void> {
  {
    const cfg = writeConnectorConfig(p, {
      ...RATE,
      extra: {
        identity: {
          accountNumbers: { pool: { ranges: [{ from: '1', to: '5' }], width: 4, checkDigit: 'mod11' } },
        },
      },
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once']);
    expect(r.code).toBe(1);
    expect(r.error).toMatch(
      /boarding stopped \(identity\.pool_exhausted\): identity\.accountNumbers\.pool: the account number pool is exhausted/,
    );
    expect(r.error).toMatch(/add a range to identity\.accountNumbers\.pool\.ranges/);
    const numbers = dbRows<{ key: string; number: string }>(
      cfg.dbPath,
      "SELECT key, number FROM bank_numbers WHERE pool = 'account'",
    );
    // 1–5 with mod 11: sequence 0006 would need 10 → skipped; only the sequences that check were issued.
    expect(numbers.length).toBeGreaterThan(0);
    expect(numbers.length).toBeLessThanOrEqual(5);
    expect(new Set(numbers.map((n) => n.number)).size).toBe(numbers.length);
    for (const n of numbers) expect(hasValidCheckDigit('mod11', n.number), n.number).toBe(true);
    // The loan that found the pool empty was not quarantined: it waits for a wider pool.
    const quarantined = dbRows<{ n: number }>(
      cfg.dbPath,
      "SELECT COUNT(*) AS n FROM loans WHERE state = 'quarantined' AND last_error_code LIKE 'identity%'",
    );
    expect(quarantined[0]!.n).toBe(0);

    // Widened: boarding resumes where it stopped; the loans keep the numbers they had.
    const wider = writeConnectorConfig(p, {
      ...RATE,
      extra: {
        store: { path: cfg.dbPath },
        core: { adapter: 'file', file: { dir: cfg.coreDir } },
        identity: {
          accountNumbers: {
            pool: {
              ranges: [
                { from: '1', to: '5' },
                { from: '100', to: '999' },
              ],
              width: 4,
              checkDigit: 'mod11',
            },
          },
        },
      },
    });
    const r2 = await runCli(['--config', wider.configPath, 'sync', '--once', '--json']);
    expect(r2.error).toBeNull();
    const after = dbRows<{ key: string; number: string }>(
      cfg.dbPath,
      "SELECT key, number FROM bank_numbers WHERE pool = 'account'",
    );
    for (const n of numbers) expect(after.find((a) => a.key === n.key)?.number).toBe(n.number);
    expect(new Set(after.map((n) => n.number)).size).toBe(after.length);
    expect(after.length).toBeGreaterThan(numbers.length);
  }
}

describe('mixed id shapes through the fineract set into the strict fake Fineract', () => {
  let p: TestPlatform;
  let fake: FakeFineract;
  beforeAll(async () => {
    p = await startTestPlatform({ loans: 30, releaseRatio: 1, seed: 29, idShapes: 'mixed', ...RATE });
    fake = await startFakeFineract();
  });
  afterAll(async () => {
    await fake.close();
    await p.close();
  });

  const fineract = (extra: Record<string, unknown> = {}) =>
    writeConnectorConfig(p, {
      ...RATE,
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
        ...extra,
      },
    });

  it('by default Fineract assigns accountNo; the connector reads it back and keeps it on the loan row', async () => {
    const cfg = fineract();
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
    expect(r.error).toBeNull();
    const summary = JSON.parse(r.stdout) as Summary;
    expect(summary.problems.filter((q) => /externalId|exceeds|length/.test(q.message))).toEqual([]);
    expect(fake.writes().filter((w) => w.status >= 400)).toEqual([]);
    const rows = dbRows<{ id: string; account_number: string | null; core_reference: string }>(
      cfg.dbPath,
      "SELECT id, account_number, core_reference FROM loans WHERE state = 'acknowledged'",
    );
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) {
      const loan = fake.loans.find((l) => l.externalId === fineractExternalId(row.id));
      expect(loan, row.id).toBeDefined();
      expect(row.account_number).toBe(loan!.accountNo);
    }
    // Nothing allocated from a pool: the core is the source.
    expect(dbRows<{ n: number }>(cfg.dbPath, 'SELECT COUNT(*) AS n FROM bank_numbers')[0]!.n).toBe(0);
    // Ids longer than 100 characters and ids with / % ? # spaces or non-ASCII are in Fineract
    // under path-safe digests, never raw.
    expect(rows.some((row) => row.id.length > 100)).toBe(true);
    expect(rows.some((row) => /[/% ]/.test(row.id) && /[\u0080-\uffff]/.test(row.id))).toBe(true);
    expect(fake.requests.filter((q) => q.status === 400)).toEqual([]);
    // Reconciliation maps the digests Fineract lists back to the platform ids: every boarded loan
    // is in the core under its own id, none unknown.
    // (Regression: `reconcile` opened Fineract without the state database and listed digests as
    // loans unknown to the connector, the boarded ones as missing in the core.)
    const rec = await runCli([
      '--config',
      cfg.configPath,
      'reconcile',
      '--json',
      '--out',
      join(cfg.dir, 'reports'),
    ]);
    expect(rec.error).toBeNull();
    const report = JSON.parse(rec.stdout) as {
      totals: { writtenToCore: { count: number } };
      exceptionsByReason: Record<string, number>;
    };
    expect(report.totals.writtenToCore.count).toBe(rows.length);
    expect(report.exceptionsByReason['acknowledged_missing_in_core'] ?? 0).toBe(0);
    expect(report.exceptionsByReason['in_core_unknown_to_connector'] ?? 0).toBe(0);
  }, 120_000);

  it('with identity.accountNumbers.source pool, the pool number is sent as accountNo and Fineract holds it', async () => {
    // Its own sandbox (other loans), into the same Fineract.
    const p2 = await startTestPlatform({ loans: 20, releaseRatio: 1, seed: 31, idShapes: 'mixed', ...RATE });
    try {
      const cfg = writeConnectorConfig(p2, {
        ...RATE,
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
          identity: {
            accountNumbers: {
              source: 'pool',
              pool: { ranges: [{ from: '5000000', to: '5999999' }], width: 8, checkDigit: 'luhn' },
            },
          },
        },
      });
      const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
      expect(r.error).toBeNull();
      expect(fake.writes().filter((w) => w.status >= 400)).toEqual([]);
      const rows = dbRows<{ id: string; account_number: string | null }>(
        cfg.dbPath,
        "SELECT id, account_number FROM loans WHERE state = 'acknowledged'",
      );
      expect(rows.length).toBeGreaterThan(8);
      for (const row of rows) {
        expect(row.account_number).toMatch(/^5\d{7}$/);
        expect(hasValidCheckDigit('luhn', row.account_number!)).toBe(true);
        expect(fake.loans.find((l) => l.externalId === fineractExternalId(row.id))?.accountNo).toBe(
          row.account_number,
        );
      }
      expect(new Set(rows.map((x) => x.account_number)).size).toBe(rows.length);
    } finally {
      await p2.close();
    }
  }, 120_000);
});

describe('number pool usage in /metrics and /readyz', () => {
  it('at warnAt: a warning detail in /readyz (still ready) and the ratio in /metrics; exhausted: not ready', async () => {
    const db = openDatabase(':memory:');
    const pools = {
      ...DEFAULT_NUMBER_POOLS,
      account: { ...DEFAULT_NUMBER_POOLS.account, ranges: [{ from: '1', to: '10' }], width: 4 },
    };
    const store = createBoardingStore(sqliteStore(db), { numberPools: pools });
    const config = loadConfig({
      env: {},
      fileText:
        'platform: { baseUrl: "http://127.0.0.1:9/api", apiKey: pk_test_pools, environment: development }\n',
    });
    config.webhooks.port = 0;
    config.admin.port = 0;
    const svc = createWebhookService({
      clock: systemClock,
      config,
      db: sqliteStore(db),
      platform: {
        health: () =>
          ({ lastSuccessAt: Date.now(), strikes24h: 0, trafficStopped: false, stopped: false }) as never,
        listWebhookEndpoints: () => Promise.resolve([]),
      },
      logger: silentLogger(),
      requestCycle: () => undefined,
      numberPools: async () => [await store.numbers.usage('account')],
    });
    await svc.start();
    try {
      for (let i = 0; i < 9; i++) await store.numbers.allocate('account', `L${i}`, 1);
      const ready = (await (await fetch(`${svc.adminUrl()}/readyz`)).json()) as {
        checks: Record<string, { ok: boolean; detail: string }>;
      };
      expect(ready.checks['numberPools']).toEqual({
        ok: true,
        detail:
          'account: WARNING 90.0% used (9 of 10), at or above warnAt 0.9: add a range to identity.accountNumbers.pool.ranges',
      });
      const metrics = await (await fetch(`${svc.adminUrl()}/metrics`)).text();
      expect(metrics).toMatch(/^boarding_number_pool_used_ratio\{pool="account"\} 0\.9$/m);
      expect(metrics).toMatch(/^boarding_number_pool_remaining\{pool="account"\} 1$/m);
      await store.numbers.allocate('account', 'L9', 1);
      const res = await fetch(`${svc.adminUrl()}/readyz`);
      expect(res.status).toBe(503);
      const exhausted = (await res.json()) as { checks: Record<string, { ok: boolean; detail: string }> };
      expect(exhausted.checks['numberPools']?.ok).toBe(false);
      expect(exhausted.checks['numberPools']?.detail).toMatch(/account: EXHAUSTED, boarding stopped/);
    } finally {
      await svc.stop();
      db.close();
    }
  });
});
