/**
 * PostgreSQL for a test file: a fresh database of its own on the run's server (started by
 * test/support/pg-global-setup.ts), so files running in parallel never see each other's rows.
 *
 * The server is as strict as a bank's (scripts/pg-test-server.sh): scram-sha-256 over TLS only,
 * a login role that is no superuser. Tests connect the way docs/deploy.md tells a bank to: a URL
 * without a password, the password as BOARDING_STORE_PASSWORD, `ssl: verify-full` with
 * `sslRootCert` (pgStoreConfig + pgEnv for a config file, pgTarget for openStore). Each test
 * database is created by the fixture role, owned by the login role.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { parse as parseYaml } from 'yaml';
import { migratePg } from '../../src/store/migrations/pg.js';
import { openPgPool, type PgPool } from '../../src/store/pg/pool.js';
import type { StoreTarget } from '../../src/store/open.js';

export const pgUrl = process.env['BOARDING_TEST_PG_URL'] ?? null;
/** The login role's password (what a bank gives as BOARDING_STORE_PASSWORD). */
export const pgPassword = process.env['BOARDING_TEST_PG_PASSWORD'] ?? '';
/** The CA that signed the server's certificate (store.postgres.sslRootCert). */
export const pgCa = process.env['BOARDING_TEST_PG_CA'] ?? '';
/** The server's data directory (heap files, pg_wal). */
export const pgDataDir = process.env['BOARDING_TEST_PG_DATA'] ?? '';
const fixturePassword = process.env['BOARDING_TEST_PG_FIXTURE_PASSWORD'] ?? '';

/** Why the PostgreSQL tests cannot run here, or null. */
export const pgSkipReason: string | null = pgUrl
  ? null
  : (process.env['BOARDING_TEST_PG_SKIP'] ??
    'BOARDING_TEST_PG_URL is not set (the vitest globalSetup starts scripts/pg-test-server.sh)');
if (pgSkipReason) process.stderr.write(`\n[postgresql tests] SKIPPED: ${pgSkipReason}\n\n`);

/** The environment a connector process is given beside its config: the password, as the docs say. */
export function pgEnv(): Record<string, string> {
  return { BOARDING_STORE_PASSWORD: pgPassword };
}

/** `store.postgres` of a config file, as docs/deploy.md shows it (the password comes from pgEnv). */
export function pgStoreConfig(url: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { url, ssl: 'verify-full', sslRootCert: pgCa, ...extra };
}

/** The openStore target of a test database, as a configured connector opens it. */
export function pgTarget(
  url: string,
  extra: Partial<Extract<StoreTarget, { engine: 'postgres' }>> = {},
): Extract<StoreTarget, { engine: 'postgres' }> {
  return {
    engine: 'postgres',
    url,
    password: pgPassword,
    ssl: 'verify-full',
    sslRootCert: pgCa,
    poolSize: 2,
    connectTimeoutMs: 5000,
    ...extra,
  };
}

/** A node-postgres client config for a URL on the test server (the login role unless `as` says fixture). */
export function pgClientConfig(url: string, as: 'login' | 'fixture' = 'login'): pg.ClientConfig {
  const u = new URL(url);
  const fixture = as === 'fixture';
  return {
    host: u.hostname,
    port: Number(u.port),
    database: decodeURIComponent(u.pathname.slice(1)),
    user: fixture ? 'boarding_fixture' : decodeURIComponent(u.username),
    password: fixture ? fixturePassword : pgPassword,
    ssl: { ca: readFileSync(pgCa, 'utf8'), rejectUnauthorized: true },
  };
}

/** Runs statements as the fixture role (CREATE/DROP DATABASE, CHECKPOINT) on the test server. */
export async function asFixture<T>(fn: (c: pg.Client) => Promise<T>, url = pgUrl): Promise<T> {
  if (!url) throw new Error(pgSkipReason ?? 'no PostgreSQL');
  const c = new pg.Client(pgClientConfig(url, 'fixture'));
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

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

/** Creates a fresh database (migrated unless told otherwise) on the test server, owned by the login role. */
export async function createTestDatabase(opts: { migrate?: boolean } = {}): Promise<TestDatabase> {
  if (!pgUrl) throw new Error(pgSkipReason ?? 'no PostgreSQL');
  const name = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  await asFixture((c) => c.query(`CREATE DATABASE ${name} OWNER boarding`));
  const url = withDatabase(pgUrl, name);
  const pools: PgPool[] = [];
  const db: TestDatabase = {
    url,
    pool: (applicationName = 'test', max = 5) => {
      const p = openPgPool({ url, applicationName, max, client: pgClientConfig(url) });
      pools.push(p);
      return p;
    },
    drop: async () => {
      await Promise.all(pools.map((p) => p.end().catch(() => {})));
      await asFixture((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
  if (opts.migrate !== false) {
    const p = db.pool('migrate', 1);
    await migratePg(p);
  }
  return db;
}

/** The tax-id hash key every replica of a test shares (customers.tinHashKey is required on PostgreSQL). */
export const TEST_TIN_HASH_KEY = 'test-tin-hash-key-shared-by-replicas';

/**
 * Points a parsed connector config at a PostgreSQL test database as docs/deploy.md shows it
 * (store.path stays as it was: a bank's config keeps it after `state migrate`), with the shared
 * tin hash key; give the process pgEnv() for the password.
 */
export function usePostgres(
  doc: Record<string, unknown>,
  url: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const store = (doc['store'] ?? {}) as Record<string, unknown>;
  doc['store'] = { ...store, engine: 'postgres', postgres: pgStoreConfig(url, extra) };
  const customers = (doc['customers'] ?? {}) as Record<string, unknown>;
  doc['customers'] = { tinHashKey: TEST_TIN_HASH_KEY, ...customers };
  return doc;
}

/** Where the test server listens (for a TCP proxy in front of it). */
export function pgServerAddress(): { host: string; port: number } {
  if (!pgUrl) throw new Error(pgSkipReason ?? 'no PostgreSQL');
  const u = new URL(pgUrl);
  return { host: u.hostname, port: Number(u.port) };
}

/** A test database's URL through another port of 127.0.0.1 (a proxy in front of the server). */
export function viaPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.toString();
}

/**
 * The PostgreSQL config docs/deploy.md shows a bank (the first yaml block of its "PostgreSQL"
 * section), with only the bank's own values put in: the URL of a test database, the test CA, the
 * shared tin hash key. Every other key is as documented.
 */
export function documentedPostgresConfig(url: string): {
  store: Record<string, unknown>;
  customers: Record<string, unknown>;
} {
  const text = readFileSync(new URL('../../docs/deploy.md', import.meta.url), 'utf8');
  const section = text.slice(text.indexOf('## PostgreSQL (store.engine: postgres)'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error('docs/deploy.md: no yaml block in the "PostgreSQL" section');
  const doc = parseYaml(block) as {
    store: { postgres: Record<string, unknown> };
    customers: Record<string, unknown>;
  };
  const documentedUrl = new URL(String(doc.store.postgres['url']));
  // What a bank changes: its own server and CA, its own key. The URL keeps the documented shape.
  if (documentedUrl.password !== '' || documentedUrl.search !== '')
    throw new Error('docs/deploy.md: the documented URL carries a password or parameters');
  doc.store.postgres['url'] = url;
  doc.store.postgres['sslRootCert'] = pgCa;
  doc.customers['tinHashKey'] = TEST_TIN_HASH_KEY;
  return doc;
}
