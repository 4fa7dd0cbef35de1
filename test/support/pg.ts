/**
 * PostgreSQL for a test file: a fresh database of its own on the run's server (started by
 * test/support/pg-global-setup.ts), so files running in parallel never see each other's rows.
 */
import pg from 'pg';
import { migratePg } from '../../src/store/pg/schema.js';
import { openPgPool, type PgPool } from '../../src/store/pg/pool.js';

export const pgUrl = process.env['BOARDING_TEST_PG_URL'] ?? null;
/** Why the PostgreSQL tests cannot run here, or null. */
export const pgSkipReason: string | null = pgUrl
  ? null
  : (process.env['BOARDING_TEST_PG_SKIP'] ?? 'BOARDING_TEST_PG_URL is not set (the vitest globalSetup starts scripts/pg-test-server.sh)');
if (pgSkipReason) process.stderr.write(`\n[postgresql tests] SKIPPED: ${pgSkipReason}\n\n`);

export interface TestDatabase {
  url: string;
  /** A pool on the test database; `applicationName` shows in pg_stat_activity. */
  pool(applicationName?: string, max?: number): PgPool;
  /** Ends every pool opened here and drops the database. */
  drop(): Promise<void>;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/** Creates a fresh database (migrated unless told otherwise) on the test server. */
export async function createTestDatabase(opts: { migrate?: boolean } = {}): Promise<TestDatabase> {
  if (!pgUrl) throw new Error(pgSkipReason ?? 'no PostgreSQL');
  const name = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(pgUrl, name);
  const pools: PgPool[] = [];
  const db: TestDatabase = {
    url,
    pool: (applicationName = 'test', max = 5) => {
      const p = openPgPool({ url, applicationName, max });
      pools.push(p);
      return p;
    },
    drop: async () => {
      await Promise.all(pools.map((p) => p.end().catch(() => {})));
      const c = new pg.Client({ connectionString: pgUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
  if (opts.migrate !== false) {
    const p = db.pool('migrate', 1);
    await migratePg(p);
  }
  return db;
}
