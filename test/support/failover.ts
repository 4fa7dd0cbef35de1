/**
 * Two (or more) `boarding-connector run` replicas on one PostgreSQL state store against the
 * sandbox: what the failover suite (test/e2e/failover.test.ts) and `npm run bench -- failover`
 * drive. Real processes (dist/main.js, as a bank runs it), a real PostgreSQL of their own (started
 * with scripts/pg-test-server.sh in a temp dir, so it can be stopped, restarted and its backends
 * terminated without touching anyone else's), the sandbox with its rate limiter on and its request
 * log (GET /admin/requests) to check every sliding window.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  createWriteStream,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
  type WriteStream,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { parseCsvLine } from '../../src/lib/csv.js';
import { maxInSlidingWindow, type RequestLogEntry } from '../../src/sandbox/request-log.js';
import { startTestPlatform, type TestPlatform } from '../integration/pipeline/harness.js';
import type { SandboxOptions } from '../../src/sandbox/index.js';

export const MAIN = join(process.cwd(), 'dist/main.js');
const PG_SCRIPT = join(process.cwd(), 'scripts/pg-test-server.sh');
export const ACK_ROUTE = 'POST /public/v1/loans/:id/boarding';
const IO_EXPR = `expr: 'paymentFrequency = "irregular payments" ? null : $interestOnlyPeriods(monthsInterestOnly, paymentFrequency)'`;

/** Seeded, so a failing run can be replayed from the seed it printed. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until fn returns a value other than undefined, or throws naming what it waited for. */
export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

// ---- PostgreSQL of our own ----

export interface PgServer {
  /** URL of the server's boarding_test database (TCP + TLS; no password in it). */
  url: string;
  dir: string;
  /** The login role's password (BOARDING_STORE_PASSWORD of the replicas). */
  password: string;
  /** The CA of the server's certificate (store.postgres.sslRootCert). */
  ca: string;
  stop(): void;
  start(): void;
  /** A fresh database on the server; returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Runs one statement on a database URL with a short-lived client. */
  query<R extends pg.QueryResultRow = Record<string, unknown>>(
    url: string,
    sql: string,
    params?: unknown[],
  ): Promise<R[]>;
  /**
   * Terminates every server backend connected from the process (pg_terminate_backend): the
   * process's TCP connections to the server (ss -tnp) are paired with pg_stat_activity.client_port.
   * Returns the pids terminated.
   */
  terminateBackendsOf(pid: number, url: string): Promise<number[]>;
  destroy(): void;
}

function pgScript(cmd: string, dir: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('bash', [PG_SCRIPT, cmd, dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Starts a throwaway PostgreSQL in a temp dir, or returns why it cannot (the script's exit 3/4). */
export function startPgServer(): PgServer | { skip: string } {
  const dir = mkdtempSync(join(tmpdir(), 'failover-pg-'));
  // The server runs as `postgres` when we are root: it must enter the dir.
  chmodSync(dir, 0o755);
  const r = pgScript('start', dir);
  const url = r.stdout.trim().split('\n').pop() ?? '';
  if (r.status === 3 || r.status === 4) {
    rmSync(dir, { recursive: true, force: true });
    return {
      skip: `scripts/pg-test-server.sh exited ${r.status}: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`,
    };
  }
  if (r.status !== 0 || !url.startsWith('postgresql://'))
    throw new Error(`scripts/pg-test-server.sh start failed (${r.status}): ${r.stderr}`);
  const password = readFileSync(join(dir, 'password'), 'utf8').trim();
  const fixturePassword = readFileSync(join(dir, 'fixture-password'), 'utf8').trim();
  const ca = join(dir, 'tls', 'ca.crt');
  // As the fixture role (creates databases owned by the login role, may end its sessions).
  const query = async <R extends pg.QueryResultRow>(
    on: string,
    sql: string,
    params: unknown[] = [],
  ): Promise<R[]> => {
    const u = new URL(on);
    const c = new pg.Client({
      host: u.hostname,
      port: Number(u.port),
      database: u.pathname.slice(1),
      user: 'boarding_fixture',
      password: fixturePassword,
      ssl: { ca: readFileSync(ca, 'utf8'), rejectUnauthorized: true },
      application_name: 'failover-test',
    });
    await c.connect();
    try {
      return (await c.query<R>(sql, params)).rows;
    } finally {
      await c.end();
    }
  };
  return {
    url,
    dir,
    password,
    ca,
    stop() {
      const s = pgScript('stop', dir);
      if (s.status !== 0) throw new Error(`pg stop failed: ${s.stderr}`);
    },
    start() {
      const s = pgScript('start', dir);
      if (s.status !== 0) throw new Error(`pg start failed: ${s.stderr}`);
    },
    async createDatabase(name) {
      await query(url, `CREATE DATABASE ${name} OWNER boarding`);
      const u = new URL(url);
      u.pathname = `/${name}`;
      return u.toString();
    },
    query,
    async terminateBackendsOf(pid, on) {
      const ports = clientPortsOf(pid, Number(new URL(on).port));
      if (ports.length === 0) return [];
      const backends = (
        await query<{ pid: number }>(
          on,
          'SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[])',
          [ports],
        )
      ).map((r) => r.pid);
      if (backends.length === 0) return [];
      // Only these pids (a WHERE beside pg_terminate_backend may be evaluated after it, for every row).
      const rows = await query<{ pid: number; ok: boolean }>(
        on,
        'SELECT pid, pg_terminate_backend(pid) AS ok FROM unnest($1::int[]) AS pid',
        [backends],
      );
      return rows.filter((r) => r.ok).map((r) => r.pid);
    },
    destroy() {
      pgScript('destroy', dir);
    },
  };
}

/** The local ports of the process's TCP connections to the server's port (ss -tnp). */
function clientPortsOf(pid: number, serverPort: number): number[] {
  const ss = spawnSync('ss', ['-tnpH', 'state', 'established'], { encoding: 'utf8' });
  if (ss.status !== 0) throw new Error(`ss -tnpH failed: ${ss.stderr}`);
  const out: number[] = [];
  for (const line of ss.stdout.split('\n')) {
    // 0 0 127.0.0.1:LOCAL 127.0.0.1:PEER users:(("node",pid=N,fd=M))
    if (!line.includes(`pid=${pid},`)) continue;
    const f = line.trim().split(/\s+/);
    const local = f[2] ?? '';
    const peer = f[3] ?? '';
    if (peer.endsWith(`:${serverPort}`)) out.push(Number(local.slice(local.lastIndexOf(':') + 1)));
  }
  return out;
}

// ---- the replicas ----

export interface Readyz {
  ready: boolean;
  role: 'leader' | 'standby';
  epoch: number | null;
  holder: string | null;
  checks: Record<string, { ok: boolean; detail?: string }>;
}

export interface LeadershipEvent {
  at: number;
  kind: 'acquired' | 'lost';
  epoch: number | null;
}

export class Replica {
  child: ChildProcess | null = null;
  adminUrl: string | null = null;
  runs = 0;
  readonly events: LeadershipEvent[] = [];
  private log: WriteStream | null = null;

  constructor(
    readonly name: string,
    readonly configPath: string,
    readonly logDir: string,
    /** Beside the config: BOARDING_STORE_PASSWORD. */
    readonly env: Record<string, string> = {},
  ) {}

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  start(): void {
    if (this.running) throw new Error(`replica ${this.name} is already running`);
    this.runs += 1;
    this.adminUrl = null;
    const child = spawn(process.execPath, [MAIN, 'run', '--config', this.configPath], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'info', ...this.env },
    });
    this.child = child;
    this.log = createWriteStream(join(this.logDir, `${this.name}-run-${this.runs}.log`));
    const log = this.log;
    let partial = '';
    child.stderr.on('data', (chunk: Buffer) => {
      log.write(chunk);
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.scan(line);
    });
    child.once('exit', () => log.end());
  }

  private scan(line: string): void {
    if (!line.startsWith('{')) return;
    let rec: { msg?: string; url?: string; epoch?: number; time?: number };
    try {
      rec = JSON.parse(line) as typeof rec;
    } catch {
      return;
    }
    const msg = rec.msg ?? '';
    if (msg === 'admin listener (ops pages) listening' && rec.url) this.adminUrl = rec.url;
    if (msg.startsWith('leadership acquired'))
      this.events.push({ at: rec.time ?? Date.now(), kind: 'acquired', epoch: rec.epoch ?? null });
    if (msg.startsWith('leadership lost'))
      this.events.push({ at: rec.time ?? Date.now(), kind: 'lost', epoch: rec.epoch ?? null });
  }

  signal(sig: NodeJS.Signals): void {
    this.child?.kill(sig);
  }

  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const c = this.child;
    if (!c) return Promise.resolve({ code: null, signal: null });
    if (c.exitCode !== null || c.signalCode !== null)
      return Promise.resolve({ code: c.exitCode, signal: c.signalCode });
    return new Promise((r) => c.once('exit', (code, signal) => r({ code, signal })));
  }

  /** /readyz as JSON (200 or 503 alike), or null when the replica does not answer. */
  async readyz(): Promise<Readyz | null> {
    if (!this.adminUrl || !this.running) return null;
    try {
      const res = await fetch(`${this.adminUrl}/readyz`, { signal: AbortSignal.timeout(2000) });
      return (await res.json()) as Readyz;
    } catch {
      return null;
    }
  }

  async metrics(): Promise<string | null> {
    if (!this.adminUrl || !this.running) return null;
    try {
      return await (await fetch(`${this.adminUrl}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
    } catch {
      return null;
    }
  }
}

export interface FailoverSetOptions {
  pg: PgServer;
  loans: number;
  seed: number;
  /** The rate window both the sandbox enforces and the connector is configured with (the "documented" one here). */
  windowMs: number;
  readsPerWindow: number;
  writesPerWindow: number;
  /** platform.rateLimit.headroom; omitted: the default (0.9). */
  headroom?: number;
  /** store.leadership; omitted: the defaults (15 s / 5 s). */
  leadership?: { ttlMs: number; renewEveryMs: number };
  replicas?: number;
  sandbox?: Partial<SandboxOptions>;
  drain?: string;
}

export interface FailoverSet {
  platform: TestPlatform;
  replicas: Replica[];
  released: string[];
  dbUrl: string;
  coreDir: string;
  logDir: string;
  configPath: string;
  /** The replica whose /readyz says leader (and only one does), or null. */
  leader(): Promise<Replica | null>;
  /** Number of loans acknowledged on the platform (state-changing acks). */
  acked(): Promise<number>;
  requests(
    sinceMs?: number,
  ): Promise<{ windowMs: number; limits: { read: number; write: number }; data: RequestLogEntry[] }>;
  /** Epoch ms of the first successful ack request that arrived at or after sinceMs, or null. */
  firstAckSince(sinceMs: number): Promise<number | null>;
  close(): Promise<void>;
}

/** A bank's fixed copy of the generic set, so every generated loan maps (as the crash test does). */
function mappingsCopy(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'failover-mappings-')), 'generic');
  cpSync(join(process.cwd(), 'mappings/generic'), dir, { recursive: true });
  const file = join(dir, 'mapping.yaml');
  writeFileSync(file, readFileSync(file, 'utf8').replace(IO_EXPR, `expr: 'null'`));
  return dir;
}

export async function startFailoverSet(o: FailoverSetOptions): Promise<FailoverSet> {
  const platform = await startTestPlatform({
    loans: o.loans,
    releaseRatio: 1,
    seed: o.seed,
    windowMs: o.windowMs,
    readsPerWindow: o.readsPerWindow,
    writesPerWindow: o.writesPerWindow,
    ...o.sandbox,
  });
  const list = (await platform.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
  const released = list.data.map((l) => l.id);
  const dbUrl = await o.pg.createDatabase(
    `failover_${process.pid}_${Math.random().toString(36).slice(2, 8)}`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'failover-'));
  const logDir = join(dir, 'logs');
  const coreDir = join(dir, 'core');
  spawnSync('mkdir', ['-p', logDir]);
  const config = {
    platform: {
      baseUrl: platform.sandbox.baseUrl,
      apiKey: platform.apiKey,
      environment: 'staging',
      rateLimit: {
        windowMs: o.windowMs,
        readsPerWindow: o.readsPerWindow,
        writesPerWindow: o.writesPerWindow,
        ...(o.headroom !== undefined ? { headroom: o.headroom } : {}),
      },
    },
    // As docs/deploy.md shows it: TLS verified, the password from BOARDING_STORE_PASSWORD (Replica.start).
    store: {
      engine: 'postgres',
      postgres: { url: dbUrl, ssl: 'verify-full', sslRootCert: o.pg.ca },
      ...(o.leadership ? { leadership: o.leadership } : {}),
    },
    customers: { tinHashKey: 'failover-replicas-share-this-tin-key' },
    // One core for every replica: the bank's file drop, shared as a network volume would be.
    core: { adapter: 'file', file: { dir: coreDir } },
    mappings: { dir: mappingsCopy() },
    schedule: { drain: o.drain ?? '*/1 * * * * *' },
    boarding: {
      concurrency: 4,
      retryBaseMs: 100,
      retryMaxMs: 1000,
      maxAttempts: 50,
      shutdownTimeoutMs: 5000,
      documentHosts: { allow: ['127.0.0.1'] },
    },
    webhooks: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
  };
  const configPath = join(dir, 'config.yaml');
  writeFileSync(configPath, stringify(config));
  const replicas = Array.from(
    { length: o.replicas ?? 2 },
    (_, i) =>
      new Replica(String.fromCharCode(97 + i), configPath, logDir, {
        BOARDING_STORE_PASSWORD: o.pg.password,
      }),
  );
  const requests: FailoverSet['requests'] = async (sinceMs = 0) =>
    (await platform.admin('GET', `/requests?since=${sinceMs}`)) as Awaited<
      ReturnType<FailoverSet['requests']>
    >;
  return {
    platform,
    replicas,
    released,
    dbUrl,
    coreDir,
    logDir,
    configPath,
    async leader() {
      const views = await Promise.all(replicas.map(async (r) => ({ r, z: await r.readyz() })));
      const leaders = views.filter((v) => v.z?.role === 'leader');
      if (leaders.length > 1)
        throw new Error(
          `two replicas say leader: ${JSON.stringify(leaders.map((l) => ({ name: l.r.name, epoch: l.z?.epoch })))}`,
        );
      return leaders[0]?.r ?? null;
    },
    acked: async () => Object.keys((await platform.counters()).acks).length,
    requests,
    async firstAckSince(sinceMs) {
      const log = await requests(sinceMs);
      const hit = log.data.find((e) => e.route === ACK_ROUTE && e.status >= 200 && e.status < 300);
      return hit ? hit.at : null;
    },
    async close() {
      for (const r of replicas) r.signal('SIGKILL');
      await Promise.all(replicas.map((r) => r.exited()));
      await platform.close();
    },
  };
}

// ---- the checks every scenario ends with ----

export interface BudgetReport {
  bucket: 'read' | 'write';
  limit: number;
  /** Most requests of the key in any sliding window of windowMs, over the whole run. */
  maxInWindow: number;
  at: number | null;
  total: number;
}

/** The most requests per key and bucket in any sliding window, from the sandbox's request log. */
export function slidingWindowReport(log: {
  windowMs: number;
  limits: { read: number; write: number };
  data: RequestLogEntry[];
}): BudgetReport[] {
  const out: BudgetReport[] = [];
  const byKey = new Map<string, number[]>();
  for (const e of log.data) {
    if (e.bucket === 'legacy') continue;
    const k = `${e.bucket} ${e.key}`;
    let l = byKey.get(k);
    if (!l) byKey.set(k, (l = []));
    l.push(e.at);
  }
  for (const [k, times] of byKey) {
    const bucket = k.split(' ')[0] as 'read' | 'write';
    times.sort((a, b) => a - b);
    const m = maxInSlidingWindow(times, log.windowMs);
    out.push({ bucket, limit: log.limits[bucket], maxInWindow: m.max, at: m.at, total: times.length });
  }
  return out;
}

/** Loans per state in the shared store. */
export async function loanStates(server: PgServer, dbUrl: string): Promise<Record<string, number>> {
  const rows = await server.query<{ state: string; n: string }>(
    dbUrl,
    'SELECT state, COUNT(*) AS n FROM loans GROUP BY state',
  );
  return Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
}

/**
 * What the core holds: the loan packages (one directory per loan) and, after a seal, the first-board
 * lines per loan across every sealed batch's loan.csv (a duplicate core record shows as 2).
 */
export function coreRecords(coreDir: string): {
  packages: string[];
  firstBoardLines: Map<string, number>;
  batches: number;
} {
  const packages = readdirSafe(join(coreDir, 'packages')).sort();
  const firstBoardLines = new Map<string, number>();
  const batches = readdirSafe(join(coreDir, 'batches'));
  for (const b of batches) {
    let text: string;
    try {
      text = readFileSync(join(coreDir, 'batches', b, 'loan.csv'), 'utf8');
    } catch {
      continue;
    }
    const [header, ...rows] = text.trim().split('\n');
    const cols = parseCsvLine(header ?? '', ',') as string[];
    const actionAt = cols.indexOf('action');
    const idAt = cols.indexOf('loan_id');
    for (const l of rows) {
      const f = parseCsvLine(l, ',');
      if (typeof f === 'string') throw new Error(`${b}/loan.csv: ${f}: ${l}`);
      const loanId = f[idAt < 0 ? 1 : idAt];
      if (f[actionAt < 0 ? 0 : actionAt] === 'A' && loanId)
        firstBoardLines.set(loanId, (firstBoardLines.get(loanId) ?? 0) + 1);
    }
  }
  return { packages, firstBoardLines, batches: batches.length };
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * `batches seal` with the replicas' config: seals what is open so every first board is in a sealed
 * file. "no open batch" is success too: the leader's own cut-off may have sealed the last batch
 * first (a replica minutes ahead reaches it sooner); callers then check every loan is in a sealed file.
 */
export async function sealOpenBatches(
  configPath: string,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(
    process.execPath,
    [MAIN, 'batches', 'seal', '--reason', 'end of failover test', '--by', 'failover', '--config', configPath],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...env },
    },
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  return { code: code !== 0 && /: no open batch\b/.test(stderr) ? 0 : code, stderr };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0
    ? NaN
    : s.length % 2 === 1
      ? s[(s.length - 1) / 2]!
      : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
