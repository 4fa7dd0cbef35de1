/**
 * Debian's PgBouncer in front of the test server (issue 33 point 7), set up as a bank would: TLS
 * to the clients (the test CA's certificate for 127.0.0.1), TLS to the server (verify-ca),
 * scram-sha-256 both ways. One process serves one test database under three names, one per pool
 * mode: `<db>` (session), `<db>_txn` (transaction), `<db>_stmt` (statement). Runs as the
 * `postgres` user when we are root (PgBouncer refuses root), on a free port of 127.0.0.1.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pgCa, pgPassword, pgServerAddress } from './pg.js';

const BINARY = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  /** The test database through the bouncer, in a pool mode (URL without password, as the server's). */
  url(mode: 'session' | 'transaction' | 'statement'): string;
  stop(): Promise<void>;
}

/** Why PgBouncer cannot run here, or null (`apt-get install pgbouncer` installs it). */
export function pgBouncerSkipReason(): string | null {
  return existsSync(BINARY) ? null : `${BINARY} is not installed (Debian package pgbouncer)`;
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

export async function startPgBouncer(dbUrl: string): Promise<PgBouncer> {
  const dir = mkdtempSync(join(tmpdir(), 'pgbouncer-'));
  chmodSync(dir, 0o755);
  const db = new URL(dbUrl).pathname.slice(1);
  const server = pgServerAddress();
  const port = await freePort();
  const tls = dirname(pgCa);
  const target = (mode: string): string =>
    `host=${server.host} port=${server.port} dbname=${db} pool_mode=${mode}`;
  writeFileSync(join(dir, 'userlist.txt'), `"boarding" "${pgPassword}"\n`, { mode: 0o600 });
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${db} = ${target('session')}`,
      `${db}_txn = ${target('transaction')}`,
      `${db}_stmt = ${target('statement')}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = scram-sha-256',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'client_tls_sslmode = require',
      `client_tls_cert_file = ${join(tls, 'server.crt')}`,
      `client_tls_key_file = ${join(tls, 'server.key')}`,
      'server_tls_sslmode = verify-ca',
      `server_tls_ca_file = ${pgCa}`,
      'max_client_conn = 200',
      'default_pool_size = 20',
      'ignore_startup_parameters = extra_float_digits',
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      '',
    ].join('\n'),
  );
  const root = process.getuid?.() === 0;
  if (root) {
    const ids = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    for (const f of ['', 'userlist.txt', 'pgbouncer.ini'])
      chownSync(join(dir, f), Number(ids.stdout), Number(gid.stdout));
  }
  const args = [join(dir, 'pgbouncer.ini')];
  const child: ChildProcess = root
    ? spawn('runuser', ['-u', 'postgres', '--', BINARY, ...args], { stdio: 'ignore' })
    : spawn(BINARY, args, { stdio: 'ignore' });
  // Ready once it accepts connections.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      const log = existsSync(join(dir, 'pgbouncer.log'))
        ? readFileSync(join(dir, 'pgbouncer.log'), 'utf8')
        : '';
      child.kill('SIGKILL');
      throw new Error(
        `pgbouncer did not start (exit ${child.exitCode}): ${log.split('\n').slice(-5).join(' | ')}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: (mode) => {
      const u = new URL(dbUrl);
      u.port = String(port);
      u.pathname = `/${mode === 'session' ? db : mode === 'transaction' ? `${db}_txn` : `${db}_stmt`}`;
      return u.toString();
    },
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
