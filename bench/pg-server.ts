import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { StoreTarget } from '../src/store/open.js';
import { registerPgUser } from '../test/support/pg-users.js';

const here = dirname(fileURLToPath(import.meta.url));
const serverDir = process.env['BOARDING_TEST_PG_DIR'] ?? join(here, '..', 'var', 'pg-test');
const secret = (env: string, file: string): string =>
  process.env[env] ?? readFileSync(join(serverDir, file), 'utf8').trim();

/** The PostgreSQL a bench runs on: BOARDING_TEST_PG_URL, else the throwaway test server (started if needed). */
export function benchPgUrl(): string {
  const fromEnv = process.env['BOARDING_TEST_PG_URL'];
  if (fromEnv) return fromEnv;
  const r = spawnSync('bash', [join(here, '..', 'scripts', 'pg-test-server.sh'), 'start', serverDir], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`scripts/pg-test-server.sh start exited ${r.status}`);
  // A test run started meanwhile leaves the server running while this process lives.
  registerPgUser(serverDir);
  return r.stdout.trim().split('\n').pop()!;
}

/** node-postgres options for a database on the bench server: the login role, or the fixture role that creates databases. */
export function benchPgClient(url: string, as: 'login' | 'fixture' = 'login'): pg.ClientConfig {
  const u = new URL(url);
  const ca = process.env['BOARDING_TEST_PG_CA'] ?? join(serverDir, 'tls', 'ca.crt');
  return {
    host: u.hostname,
    port: Number(u.port),
    database: u.pathname.slice(1),
    user: as === 'fixture' ? 'boarding_fixture' : u.username,
    password:
      as === 'fixture'
        ? secret('BOARDING_TEST_PG_FIXTURE_PASSWORD', 'fixture-password')
        : secret('BOARDING_TEST_PG_PASSWORD', 'password'),
    ssl: { ca: readFileSync(ca, 'utf8'), rejectUnauthorized: true },
  };
}

/** The bench server's store settings, as docs/deploy.md shows them (the password as BOARDING_STORE_PASSWORD). */
export function benchPgStore(url: string): {
  target: Extract<StoreTarget, { engine: 'postgres' }>;
  yaml: string;
  env: Record<string, string>;
} {
  const password = secret('BOARDING_TEST_PG_PASSWORD', 'password');
  const ca = process.env['BOARDING_TEST_PG_CA'] ?? join(serverDir, 'tls', 'ca.crt');
  return {
    target: {
      engine: 'postgres',
      url,
      password,
      ssl: 'verify-full',
      sslRootCert: ca,
      poolSize: 2,
      connectTimeoutMs: 10_000,
    },
    yaml: `store: { engine: postgres, postgres: { url: ${JSON.stringify(url)}, ssl: verify-full, sslRootCert: ${JSON.stringify(ca)} } }\ncustomers: { tinHashKey: bench-replicas-share-this-tin-key }`,
    env: { BOARDING_STORE_PASSWORD: password },
  };
}

/**
 * Runs the bench file `file` (its import.meta.url) again as replica i (BENCH_ROLE=replica,
 * BENCH_REPLICA=i, plus env) and resolves with the last line it printed on stdout.
 */
export function runBenchReplica(file: string, i: number, env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(file)], {
    env: { ...process.env, ...env, BENCH_ROLE: 'replica', BENCH_REPLICA: String(i) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  return new Promise((resolve, reject) =>
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`replica ${i} exited ${code}`));
      resolve(stdout.trim().split('\n').pop() ?? '');
    }),
  );
}
