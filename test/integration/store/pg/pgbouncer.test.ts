/**
 * Behind Debian's PgBouncer (issue 33 point 7). Session pooling is the mode that works: two
 * replicas open the store through it (TLS and scram-sha-256 at both hops), one leads, a graceful
 * stop hands over at once (the standby's LISTEN hears it), and `config check --connect` is ok.
 * Transaction and statement pooling cannot work (the standby's LISTEN and the sessions the
 * takeover ends belong to whoever ran the last transaction; statement pooling refuses
 * transactions): detected when the store opens and refused with a sentence, not found later as a
 * lost lease.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { systemClock } from '../../../../src/lib/clock.js';
import { ConfigError } from '../../../../src/lib/errors.js';
import { openLeadership } from '../../../../src/store/leadership/leases.js';
import { openStore } from '../../../../src/store/open.js';
import type { StoreDb } from '../../../../src/store/sql.js';
import { runCliSplit } from '../../../support/cli-run.js';
import {
  createTestDatabase,
  pgEnv,
  pgSkipReason,
  pgStoreConfig,
  pgTarget,
  TEST_TIN_HASH_KEY,
  type TestDatabase,
} from '../../../support/pg.js';
import { pgBouncerSkipReason, startPgBouncer, type PgBouncer } from '../../../support/pgbouncer.js';

const skip = pgSkipReason ?? pgBouncerSkipReason();

describe.skipIf(skip !== null)('PgBouncer in front of the state database', () => {
  let db: TestDatabase;
  let bouncer: PgBouncer;
  const opened: StoreDb[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
    bouncer = await startPgBouncer(db.url);
  });
  afterAll(async () => {
    for (const s of opened) await s.close();
    await bouncer?.stop();
    await db?.drop();
  });

  it('session pooling: two replicas open the store through it, one leads, a graceful stop hands over at once; config check --connect is ok', async () => {
    const url = bouncer.url('session');
    const a = await openStore(pgTarget(url, { poolSize: 3 }), { applicationName: 'bouncer-a' });
    opened.push(a);
    const b = await openStore(pgTarget(url, { poolSize: 3 }), { applicationName: 'bouncer-b' });
    opened.push(b);
    const settings = { name: 'boarding', clock: systemClock, ttlMs: 15_000, renewEveryMs: 5_000 };
    const la = await openLeadership(a, { ...settings, holder: 'A' });
    const lb = await openLeadership(b, { ...settings, holder: 'B' });
    try {
      await la.start();
      await lb.start();
      expect([la.role, lb.role]).toEqual(['leader', 'standby']);
      const t0 = Date.now();
      await la.stop();
      // Well inside renewEveryMs (5 s): the NOTIFY reached the standby's LISTEN through the bouncer.
      await expect.poll(() => lb.role, { timeout: 4_000, interval: 20 }).toBe('leader');
      expect(Date.now() - t0).toBeLessThan(4_000);
    } finally {
      await la.stop();
      await lb.stop();
    }

    const dir = mkdtempSync(join(tmpdir(), 'bouncer-check-'));
    try {
      const config = join(dir, 'config.yaml');
      writeFileSync(
        config,
        stringify({
          platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
          store: { engine: 'postgres', postgres: pgStoreConfig(url) },
          customers: { tinHashKey: TEST_TIN_HASH_KEY },
          core: { adapter: 'file', file: { dir: join(dir, 'core') } },
        }),
      );
      const r = await runCliSplit(['--config', config, 'config', 'check', '--connect'], { env: pgEnv() });
      expect(r.stdout).toMatch(
        /^ok +store +postgresql:\/\/boarding@127\.0\.0\.1:\d+\/t_\w+ takes a write; TLS TLSv1\.[23]/m,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [
      'transaction',
      /^store\.postgres\.url: postgresql:\/\/boarding@127\.0\.0\.1:\d+\/t_\w+_txn: the connections go through a transaction-pooling pooler .* use PgBouncer's pool_mode = session/,
    ],
    [
      'statement',
      /^store\.postgres\.url: postgresql:\/\/boarding@127\.0\.0\.1:\d+\/t_\w+_stmt: the connections go through a statement-pooling pooler .* use PgBouncer's pool_mode = session/,
    ],
  ] as const)(
    '%s pooling is refused when the store opens, with a sentence naming the mode that works',
    async (mode, sentence) => {
      const err = await openStore(pgTarget(bouncer.url(mode), { poolSize: 3 })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(sentence);
    },
  );
});
