/**
 * PostgreSQL failing over to a promoted standby (issue 37), for the fault suite: a streaming
 * standby of the failover harness's throwaway server (pg_basebackup -R from its unix socket, a
 * socket of its own), and a TCP address the replicas use that the test moves from the old primary
 * to the promoted standby, as a managed database's DNS name or virtual IP moves. Kept apart from
 * test/support (the test PostgreSQL's setup changes elsewhere): it builds on startPgServer.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

function bindir(): string {
  const r = spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1'], { encoding: 'utf8' });
  const d = r.stdout.trim();
  if (d === '') throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql');
  return d;
}

/** Runs a PostgreSQL binary as the cluster owner (`postgres` when we are root, as scripts/pg-test-server.sh does). */
function asOwner(cmd: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const full = join(bindir(), cmd);
  const r = process.getuid?.() === 0 ? spawnSync('runuser', ['-u', 'postgres', '--', full, ...args], { encoding: 'utf8' }) : spawnSync(full, args, { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The standby's application_name, the one the primary's synchronous_standby_names waits for. */
export const STANDBY_NAME = 'faults_standby';

export interface Standby {
  dir: string;
  /** The unix socket file the standby listens on. */
  socket: string;
  /** Its URL for a database (a unix socket, like the primary's). */
  urlFor(db: string): string;
  promote(): void;
  stop(mode?: 'fast' | 'immediate'): void;
  destroy(): void;
}

/** The unix socket directory of a server URL (`?host=/dir`). */
export function socketDirOf(url: string): string {
  const host = new URL(url).searchParams.get('host');
  if (!host) throw new Error(`${url}: no ?host= socket directory`);
  return host;
}

/** Clones the primary at `primaryUrl` into a streaming standby in a temp dir and starts it. */
export function startStandby(primaryUrl: string): Standby {
  const dir = mkdtempSync(join(tmpdir(), 'faults-standby-'));
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  const sock = join(dir, 'sock');
  spawnSync('mkdir', ['-p', sock]);
  if (process.getuid?.() === 0) spawnSync('chown', ['-R', 'postgres:', dir]);
  const primarySock = socketDirOf(primaryUrl);
  const bb = asOwner('pg_basebackup', ['-D', data, '-h', primarySock, '-p', '5432', '-U', 'postgres', '-X', 'stream', '-R', '-c', 'fast', '--no-sync']);
  if (bb.status !== 0) throw new Error(`pg_basebackup failed (${bb.status}): ${bb.stderr}`);
  // Its own socket; the rest (no TCP, fsync off) comes with the primary's postgresql.conf. It
  // names itself to the primary (application_name), which then waits for it on every commit.
  appendFileSync(
    join(data, 'postgresql.auto.conf'),
    `\nunix_socket_directories = '${sock}'\nhot_standby = on\nprimary_conninfo = 'host=${primarySock} port=5432 user=postgres application_name=${STANDBY_NAME}'\n`,
  );
  const st = asOwner('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start']);
  if (st.status !== 0) throw new Error(`standby did not start (${st.status}): ${st.stderr} ${spawnSync('tail', ['-n', '20', join(dir, 'server.log')], { encoding: 'utf8' }).stdout}`);
  return {
    dir,
    socket: join(sock, '.s.PGSQL.5432'),
    urlFor: (db) => `postgresql://postgres@localhost/${db}?host=${sock}`,
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
 * commits before the failover can be lost too: docs/operations.md "When things break".) Resolves
 * once the standby replicates synchronously.
 */
export async function makeSynchronous(primary: { url: string; query(url: string, sql: string): Promise<Array<Record<string, unknown>>> }): Promise<void> {
  await primary.query(primary.url, `ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
  await primary.query(primary.url, "ALTER SYSTEM SET synchronous_commit = 'on'");
  await primary.query(primary.url, 'SELECT pg_reload_conf()');
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = await primary.query(primary.url, `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}'`);
    if (rows[0]?.['sync_state'] === 'sync') return;
    if (Date.now() > deadline) throw new Error(`the standby did not become synchronous: ${JSON.stringify(rows)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Stops the primary's server at once (its host dies: no checkpoint, no goodbye to clients). */
export function crashPrimary(primaryDir: string): void {
  const r = asOwner('pg_ctl', ['-D', join(primaryDir, 'data'), '-m', 'immediate', '-w', 'stop']);
  if (r.status !== 0) throw new Error(`pg_ctl stop -m immediate failed (${r.status}): ${r.stderr}`);
}

/** The address the replicas use: 127.0.0.1:port, forwarded to one server's unix socket at a time. */
export interface MovableAddress {
  port: number;
  urlFor(db: string): string;
  /** Cuts every open connection and forwards new ones to `socket` from now on (null: refuse). */
  moveTo(socket: string | null): void;
  target(): string | null;
  close(): Promise<void>;
}

export async function startMovableAddress(initial: string): Promise<MovableAddress> {
  let target: string | null = initial;
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
    const upstream = net.connect({ path: target });
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
    urlFor: (db) => `postgresql://postgres@127.0.0.1:${port}/${db}`,
    moveTo(socket) {
      target = socket;
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
