/**
 * vitest globalSetup: one throwaway PostgreSQL per test run (scripts/pg-test-server.sh), exported
 * to the test files and stopped at the end: BOARDING_TEST_PG_URL (no password in it, as the docs
 * tell a bank), BOARDING_TEST_PG_PASSWORD (what a bank puts in BOARDING_STORE_PASSWORD),
 * BOARDING_TEST_PG_CA (store.postgres.sslRootCert; verify-full), BOARDING_TEST_PG_FIXTURE_PASSWORD
 * (the role that creates each test file's database) and BOARDING_TEST_PG_DATA (the data
 * directory the tax-id-at-rest test reads). A URL already in the environment (a CI service, a
 * developer's own server) is used as is and left alone, with the others set beside it.
 *
 * When the script reports that PostgreSQL cannot be installed (exit 3) or started (exit 4), the run
 * goes on and BOARDING_TEST_PG_SKIP carries the reason: the PostgreSQL tests report themselves as
 * skipped with it (test/support/pg.ts). Any other failure fails the run.
 * BOARDING_TEST_PG_DIR puts the cluster elsewhere than var/pg-test (e.g. on a tmpfs).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { registerPgUser, releasePgUser } from './pg-users.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const script = join(root, 'scripts', 'pg-test-server.sh');

export default function setup(): (() => void) | undefined {
  if (process.env['BOARDING_TEST_PG_URL']) return undefined;
  const t0 = Date.now();
  const dir = process.env['BOARDING_TEST_PG_DIR'];
  const args = dir ? [dir] : [];
  const at = resolve(dir ?? join(root, 'var', 'pg-test'));
  const r = spawnSync('bash', [script, 'start', ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const ms = Date.now() - t0;
  const url = r.stdout.trim().split('\n').pop() ?? '';
  if (r.status === 0 && url.startsWith('postgresql://')) {
    process.env['BOARDING_TEST_PG_URL'] = url;
    process.env['BOARDING_TEST_PG_PASSWORD'] = readFileSync(join(at, 'password'), 'utf8').trim();
    process.env['BOARDING_TEST_PG_FIXTURE_PASSWORD'] = readFileSync(
      join(at, 'fixture-password'),
      'utf8',
    ).trim();
    process.env['BOARDING_TEST_PG_CA'] = join(at, 'tls', 'ca.crt');
    process.env['BOARDING_TEST_PG_DATA'] = join(at, 'data');
    process.stderr.write(`[pg-test-server] PostgreSQL for the tests ready in ${ms} ms\n`);
    registerPgUser(at);
    return () => {
      // A bench or another test run on the same server keeps it running.
      if (releasePgUser(at)) spawnSync('bash', [script, 'stop', ...args], { stdio: 'ignore' });
    };
  }
  const detail = r.stderr.trim().split('\n').slice(-5).join(' | ');
  if (r.status === 3 || r.status === 4) {
    const reason = `${r.status === 3 ? 'PostgreSQL cannot be installed' : 'PostgreSQL cannot be started'} by scripts/pg-test-server.sh: ${detail}`;
    process.env['BOARDING_TEST_PG_SKIP'] = reason;
    process.stderr.write(`\n[pg-test-server] PostgreSQL tests will be SKIPPED: ${reason}\n\n`);
    return undefined;
  }
  throw new Error(`scripts/pg-test-server.sh start failed (exit ${r.status ?? r.signal}): ${detail}`);
}
