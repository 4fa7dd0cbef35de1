/**
 * PostgreSQL failing over to a promoted standby (issue 37), for the fault suite, on the strict test
 * server of scripts/pg-test-server.sh (issue 33: the connector logs in over TCP with TLS and
 * scram-sha-256 as a role that is no superuser; the unix socket is the `postgres` superuser's, peer
 * auth). Here:
 *   - a streaming standby of the failover harness's throwaway server: pg_basebackup through the
 *     primary's unix socket as `postgres` (run as the OS user postgres), listening on a free TCP
 *     port of 127.0.0.1 of its own with the primary's TLS certificate (it names 127.0.0.1) and a
 *     socket directory of its own;
 *   - a TCP address the replicas use (127.0.0.1:port) that forwards to one server's TCP port at a
 *     time and that the test moves from the old primary to the promoted standby, as a managed
 *     database's DNS name or virtual IP moves. It forwards bytes only: TLS runs end to end between
 *     the connector and the server, so `ssl: verify-full` against the test CA still holds;
 *   - the superuser's statements the scenario needs (ALTER SYSTEM, pg_stat_replication,
 *     pg_stat_activity of every role) through a server's unix socket as `postgres`.
 * Kept apart from test/support: it builds on startPgServer.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../support/tcp-switch.js';

function bindir(): string {
  const r = spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1'], {
    encoding: 'utf8',
  });
  const d = r.stdout.trim();
  if (d === '') throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql');
  return d;
}

/** Runs a PostgreSQL binary as the cluster owner (`postgres` when we are root, as scripts/pg-test-server.sh does). */
function asOwner(cmd: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const full = join(bindir(), cmd);
  // cwd /: the postgres user may not be able to enter the checkout.
  const opts = { encoding: 'utf8' as const, cwd: '/' };
  const r =
    process.getuid?.() === 0
      ? spawnSync('runuser', ['-u', 'postgres', '--', full, ...args], opts)
      : spawnSync(full, args, opts);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Where a running server listens: its TCP port and unix socket directory (postmaster.pid lines 4 and 5). */
export interface ServerAddress {
  port: number;
  socketDir: string;
}

/** The address of the server running on `dataDir` (throws when it is not running). */
export function serverAddressOf(dataDir: string): ServerAddress {
  let lines: string[];
  try {
    lines = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch (e) {
    throw new Error(`${dataDir}: no postmaster.pid (is the server running?): ${(e as Error).message}`);
  }
  const port = Number(lines[3]);
  const socketDir = (lines[4] ?? '').trim();
  if (!Number.isInteger(port) || port <= 0 || socketDir === '')
    throw new Error(
      `${dataDir}/postmaster.pid: no port (line 4) or socket directory (line 5): ${lines.slice(0, 6).join(' | ')}`,
    );
  return { port, socketDir };
}

/**
 * Runs one SQL statement as the superuser `postgres` through the server's unix socket (peer auth,
 * the only way in as a superuser) and returns its rows, fields split on tabs.
 */
export function superuserSql(at: ServerAddress, sql: string, db = 'postgres'): string[][] {
  const r = asOwner('psql', [
    '-h',
    at.socketDir,
    '-p',
    String(at.port),
    '-U',
    'postgres',
    '-d',
    db,
    '-X',
    '-v',
    'ON_ERROR_STOP=1',
    '-Atq',
    '-F',
    '\t',
    '-c',
    sql,
  ]);
  if (r.status !== 0)
    throw new Error(
      `psql as postgres on ${at.socketDir}:${at.port} failed (${r.status}) for ${sql}: ${r.stderr.trim()}`,
    );
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split('\t'));
}

/** The standby's application_name, the one the primary's synchronous_standby_names waits for. */
export const STANDBY_NAME = 'faults_standby';

export interface Standby {
  dir: string;
  /** Where it listens: 127.0.0.1:port (TLS, as the primary) and its own socket directory. */
  address: ServerAddress;
  promote(): void;
  stop(mode?: 'fast' | 'immediate'): void;
  destroy(): void;
}

/**
 * Lets the OS user postgres stream WAL through the primary's unix socket (peer): the test server's
 * pg_hba.conf has no replication line (`all` does not cover replication connections). The socket
 * stays the superuser's alone; TCP is unchanged (TLS + scram-sha-256 only).
 */
function allowLocalReplication(primaryDataDir: string, at: ServerAddress): void {
  const hba = join(primaryDataDir, 'pg_hba.conf');
  const line = 'local   replication  postgres         peer';
  if (!readFileSync(hba, 'utf8').includes(line))
    appendFileSync(hba, `# --- test/faults/support/pg-failover.ts: the standby's WAL stream ---\n${line}\n`);
  superuserSql(at, 'SELECT pg_reload_conf()');
}

/**
 * Clones the primary whose cluster is in `primaryDir` (startPgServer's dir: DIR/data) into a
 * streaming standby in a temp dir and starts it on a free TCP port of 127.0.0.1.
 */
export async function startStandby(primaryDir: string): Promise<Standby> {
  const primaryData = join(primaryDir, 'data');
  const primary = serverAddressOf(primaryData);
  allowLocalReplication(primaryData, primary);
  const dir = mkdtempSync(join(tmpdir(), 'faults-standby-'));
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  const sock = join(dir, 'sock');
  spawnSync('mkdir', ['-p', sock]);
  if (process.getuid?.() === 0) spawnSync('chown', ['-R', 'postgres:', dir]);
  const bb = asOwner('pg_basebackup', [
    '-D',
    data,
    '-h',
    primary.socketDir,
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-X',
    'stream',
    '-R',
    '-c',
    'fast',
    '--no-sync',
  ]);
  if (bb.status !== 0)
    throw new Error(
      `pg_basebackup from ${primary.socketDir}:${primary.port} failed (${bb.status}): ${bb.stderr}`,
    );
  // Its own socket directory; the rest (127.0.0.1 only, ssl on with the primary's certificate and
  // key, fsync off) comes with the primary's postgresql.conf, and its pg_hba.conf with the copy. It
  // names itself to the primary (application_name), which then waits for it on every commit.
  appendFileSync(
    join(data, 'postgresql.auto.conf'),
    `\nunix_socket_directories = '${sock}'\nhot_standby = on\nprimary_conninfo = 'host=${primary.socketDir} port=${primary.port} user=postgres application_name=${STANDBY_NAME}'\n`,
  );
  const log = join(dir, 'server.log');
  let started = false;
  let why = '';
  // A free port now; another process may take it before the server binds: then try another.
  for (let i = 0; i < 5 && !started; i++) {
    const port = await freePort();
    const st = asOwner('pg_ctl', ['-D', data, '-l', log, '-o', `-p ${port}`, '-w', '-t', '60', 'start']);
    if (st.status === 0) {
      started = true;
      break;
    }
    const tail = spawnSync('tail', ['-n', '20', log], { encoding: 'utf8' }).stdout;
    why = `${st.stderr} ${tail}`;
    if (!/could not bind|could not create any TCP\/IP sockets/.test(tail)) break;
  }
  if (!started) throw new Error(`standby did not start: ${why}`);
  const address = serverAddressOf(data);
  return {
    dir,
    address,
    promote() {
      const r = asOwner('pg_ctl', ['-D', data, '-w', '-t', '60', 'promote']);
      if (r.status !== 0) throw new Error(`pg_ctl promote failed (${r.status}): ${r.stderr}`);
    },
    stop(mode = 'fast') {
      asOwner('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
    },
    destroy() {
      asOwner('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Makes the primary wait for the standby on every commit (synchronous_commit on with the standby
 * in synchronous_standby_names), as a managed database's high-availability mode does: a failover
 * then loses only transactions in flight, never a commit. (With asynchronous replication the last
 * commits before the failover can be lost too: docs/operations.md "When things break".) ALTER
 * SYSTEM is the superuser's: through the primary's socket. Resolves once the standby replicates
 * synchronously.
 */
export async function makeSynchronous(primaryDir: string): Promise<void> {
  const at = serverAddressOf(join(primaryDir, 'data'));
  superuserSql(at, `ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
  superuserSql(at, "ALTER SYSTEM SET synchronous_commit = 'on'");
  superuserSql(at, 'SELECT pg_reload_conf()');
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = superuserSql(
      at,
      `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}'`,
    );
    if (rows[0]?.[0] === 'sync') return;
    if (Date.now() > deadline)
      throw new Error(`the standby did not become synchronous: ${JSON.stringify(rows)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Stops the primary's server at once (its host dies: no checkpoint, no goodbye to clients). */
export function crashPrimary(primaryDir: string): void {
  const r = asOwner('pg_ctl', ['-D', join(primaryDir, 'data'), '-m', 'immediate', '-w', 'stop']);
  if (r.status !== 0) throw new Error(`pg_ctl stop -m immediate failed (${r.status}): ${r.stderr}`);
}

/** A server's TCP address on 127.0.0.1. */
export interface TcpTarget {
  host: string;
  port: number;
}

/** The address the replicas use: 127.0.0.1:port, forwarded to one server's TCP port at a time. */
export interface MovableAddress {
  port: number;
  /** `url` (a server's URL, role and database kept) through this address. */
  via(url: string): string;
  /** Cuts every open connection and forwards new ones to `to` from now on (null: refuse). */
  moveTo(to: TcpTarget | null): void;
  target(): TcpTarget | null;
  close(): Promise<void>;
}

export async function startMovableAddress(initial: TcpTarget): Promise<MovableAddress> {
  let target: TcpTarget | null = initial;
  const open = new Set<net.Socket>();
  const cut = (): void => {
    for (const s of open) s.destroy();
    open.clear();
  };
  const server = net.createServer((client) => {
    if (target === null) {
      client.resetAndDestroy();
      return;
    }
    // Bytes only: the TLS handshake (PostgreSQL's SSLRequest first) goes through to the server.
    const upstream = net.connect({ host: target.host, port: target.port });
    open.add(client);
    open.add(upstream);
    const drop = (): void => {
      open.delete(client);
      open.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    via(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    moveTo(to) {
      target = to;
      cut();
    },
    target: () => target,
    close: async () => {
      target = null;
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
