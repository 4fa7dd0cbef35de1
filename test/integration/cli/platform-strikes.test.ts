import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sharedRateLedger } from '../../../src/app/platform.js';
import { systemClock } from '../../../src/lib/clock.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createSqliteRateState } from '../../../src/store/rate-budget/sqlite.js';
import {
  createTestDatabase,
  pgEnv,
  pgSkipReason,
  pgStoreConfig,
  TEST_TIN_HASH_KEY,
} from '../../support/pg.js';
import { runCli } from '../pipeline/harness.js';

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function setup(strikes: number): string {
  dir = mkdtempSync(join(tmpdir(), 'platform-cli-'));
  const store = join(dir, 'state.sqlite');
  const config = join(dir, 'config.yaml');
  writeFileSync(
    config,
    `platform: { baseUrl: "http://127.0.0.1:9/api", apiKey: pk_test_cli, environment: staging }\nstore: { path: ${JSON.stringify(store)} }\n`,
  );
  const db = openDatabase(store);
  const state = createSqliteRateState(db);
  for (let i = 0; i < strikes; i++)
    state.recordStrike({
      at: Date.now() - i * 60_000,
      bucket: 'write',
      path: '/public/v1/loans/:id/boarding',
      retryAfterMs: 2000,
    });
  state.close?.();
  db.close();
  return config;
}

describe('platform status / strikes clear', () => {
  it('shows stopped writes after 2 strikes, and an audited clear lets them resume', async () => {
    const config = setup(2);
    const before = await runCli(['platform', 'status', '--json', '--config', config]);
    expect(before.code).toBe(0);
    expect(JSON.parse(before.stdout)).toMatchObject({ strikes24h: 2, trafficStopped: true });

    const refused = await runCli(['platform', 'strikes', 'clear', '--by', 'ops-anna', '--config', config]);
    expect(refused.code).toBe(2); // --reason is required

    const cleared = await runCli([
      'platform',
      'strikes',
      'clear',
      '--by',
      'ops-anna',
      '--reason',
      'support ticket 4711: key in good standing',
      '--config',
      config,
    ]);
    expect(cleared.code).toBe(0);
    expect(cleared.stdout).toContain(
      'cleared 2 strike(s); a running daemon picks this up on its next request',
    );

    const after = await runCli(['platform', 'status', '--json', '--config', config]);
    expect(JSON.parse(after.stdout)).toMatchObject({ strikes24h: 0, trafficStopped: false });
    const db = openDatabase(join(dir, 'state.sqlite'));
    const audit = db.prepare('SELECT cleared_by FROM rate_strikes').all() as Array<{ cleared_by: string }>;
    db.close();
    expect(audit.map((r) => r.cleared_by)).toEqual([
      'ops-anna: support ticket 4711: key in good standing',
      'ops-anna: support ticket 4711: key in good standing',
    ]);
  });

  it('a single strike slows the pace but leaves writes allowed', async () => {
    const config = setup(1);
    const r = await runCli(['platform', 'status', '--config', config]);
    expect(r.stdout).toContain('429 strikes in the last 24 h: 1');
    expect(r.stdout).toContain('platform requests: allowed at half pace');
  });
});

describe.skipIf(pgSkipReason !== null)(
  'platform status / strikes clear on store.engine postgres (the ledger every replica shares)',
  () => {
    it('shows the strikes replicas recorded in the shared ledger, and a clear from any host resumes them all', async () => {
      const pg = await createTestDatabase();
      dir = mkdtempSync(join(tmpdir(), 'platform-cli-pg-'));
      try {
        const config = join(dir, 'config.yaml');
        writeFileSync(
          config,
          `platform: { baseUrl: "http://127.0.0.1:9/api", apiKey: pk_test_cli, environment: staging, rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: 60000 } }\nstore: { engine: postgres, postgres: ${JSON.stringify(pgStoreConfig(pg.url))} }\ncustomers: { tinHashKey: ${TEST_TIN_HASH_KEY} }\n`,
        );
        // Two replicas on the key, each saw one 429.
        const platform = {
          apiKey: 'pk_test_cli',
          rateLimit: { readsPerWindow: 100, writesPerWindow: 30, windowMs: 60_000, headroom: 0.9 },
        };
        const a = sharedRateLedger(platform, pg.pool('replica-a', 1), { clock: systemClock });
        const b = sharedRateLedger(platform, pg.pool('replica-b', 1), { clock: systemClock });
        await a.recordRateLimited('write', { path: '/public/v1/boardings/{id}/ack', retryAfterMs: 30_000 });
        await b.recordRateLimited('read', { path: '/public/v1/loans/{id}', retryAfterMs: 0 });
        // Another key's ledger is not this key's.
        await sharedRateLedger({ ...platform, apiKey: 'pk_test_other' }, pg.pool('other', 1), {
          clock: systemClock,
        }).recordRateLimited('read', { path: null, retryAfterMs: 0 });

        const before = await runCli(['platform', 'status', '--json', '--config', config], pgEnv());
        expect(before.error).toBeNull();
        const status = JSON.parse(before.stdout) as {
          strikes24h: number;
          trafficStopped: boolean;
          strikes: Array<{ bucket: string; path: string }>;
          pauses: Array<{ bucket: string }>;
        };
        expect(status).toMatchObject({ strikes24h: 2, trafficStopped: true });
        expect(status.strikes.map((x) => [x.bucket, x.path])).toEqual([
          ['write', '/public/v1/boardings/{id}/ack'],
          ['read', '/public/v1/loans/{id}'],
        ]);
        expect(status.pauses.map((p) => p.bucket)).toEqual(['write']);
        const text = await runCli(['platform', 'status', '--config', config], pgEnv());
        expect(text.stdout).toContain('429 strikes in the last 24 h: 2');
        expect(text.stdout).toContain('platform requests: STOPPED');
        expect(text.stdout).toContain('ledger: shared by every replica on this API key (PostgreSQL)');
        expect((await a.take('read')).decision).toBe('stopped');

        const cleared = await runCli(
          ['platform', 'strikes', 'clear', '--by', 'ops-anna', '--reason', 'ticket 4711', '--config', config],
          pgEnv(),
        );
        expect(cleared.error).toBeNull();
        expect(cleared.stdout).toContain(
          'cleared 2 strike(s); every replica on this API key resumes on its next request',
        );
        expect((await b.take('read')).decision).toBe('granted');
        expect(await a.activeStrikes()).toBe(0);
        const audit = await pg
          .pool('audit', 1)
          .query<{ cleared_by: string | null }>('SELECT cleared_by FROM rate_shared_strikes ORDER BY seq');
        expect(audit.rows.map((r) => r.cleared_by)).toEqual([
          'ops-anna: ticket 4711',
          'ops-anna: ticket 4711',
          null,
        ]);
        const after = await runCli(['platform', 'status', '--json', '--config', config], pgEnv());
        expect(JSON.parse(after.stdout)).toMatchObject({ strikes24h: 0, trafficStopped: false });
      } finally {
        await pg.drop();
      }
    });
  },
);
