/**
 * `npm run bench -- scale` (issue 37): is the cost of a loan flat in the size of the backlog?
 *
 * 1. `sync --once` (the built dist/main.js, a child process) over N released loans of a sandbox
 *    (another child process, its CPU not counted) for each size and each engine, the file core
 *    with batches on (the default). The connector's CPU time is read from /proc/<pid>/stat and the
 *    loans acknowledged so far from its state database, every SAMPLE_MS; from those samples the
 *    CPU and wall time per loan of the first and the last 1,000 boards, the queue walk's cost and
 *    the whole run's CPU per loan are printed, then the largest ÷ smallest size per-loan ratio.
 *    CPU time, not wall time, is the figure to trust on a shared machine.
 * 2. A daemon (`run`) over a state of BENCH_SCALE_DAEMON_LOANS acknowledged loans (SQLite): its
 *    drain cycles over a small new release, a reconciliation and the console's first page, timed.
 *
 *   BENCH_SCALE_SIZES          comma-separated sizes (default "3000,30000"; e.g. "300,3000" to iterate)
 *   BENCH_SCALE_ENGINES        comma-separated: sqlite, postgres (default both)
 *   BENCH_SCALE_DAEMON_LOANS   loans in the daemon's state (default 100000; 0 skips part 2)
 *   BENCH_SCALE_DAEMON_NEW     new releases the daemon boards over that state (default 300)
 *   BENCH_SCALE_BUILD          0 to skip `npm run build` (dist/ must be current)
 *   BENCH_SCALE_PROFILE        a directory: `sync --once` runs with --cpu-prof writing there
 *   BENCH_SCALE_CONCURRENCY    boarding.concurrency (default: the config default)
 *   BENCH_SCALE_NODE_ARGS      node options for the measured `sync --once` (e.g. "--max-semi-space-size=32")
 *   BENCH_SCALE_TMPDIR         where the state and the core go (default the OS temp dir; /dev/shm takes
 *                              the disk's fsync waits out of a profile)
 *
 * The sandbox's rate window is 1 s with large budgets, and the connector is configured with the
 * same, so the budget never limits. PostgreSQL: BOARDING_TEST_PG_URL, else the test server
 * (bench/pg-server.ts); each run gets a fresh database. Never fails on figures: it prints them.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { benchPgClient, benchPgStore, benchPgUrl } from './pg-server.js';
import { hashPassword } from '../src/console/auth.js';
import { buildExceptionStore } from './console-store.js';

const SIZES = (process.env['BENCH_SCALE_SIZES'] ?? '3000,30000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n) && n > 0);
const ENGINES = (process.env['BENCH_SCALE_ENGINES'] ?? 'sqlite,postgres')
  .split(',')
  .map((s) => s.trim())
  .filter((e): e is Engine => e === 'sqlite' || e === 'postgres');
const PROFILE_DIR = process.env['BENCH_SCALE_PROFILE'];
const CONCURRENCY = process.env['BENCH_SCALE_CONCURRENCY'];
const NODE_ARGS = (process.env['BENCH_SCALE_NODE_ARGS'] ?? '').split(' ').filter(Boolean);
const WINDOW_MS = 1000;
const READS = 5000;
const WRITES = 2000;
const SAMPLE_MS = 100;
const SLICE = 1000;
const IO_EXPR = `expr: 'paymentFrequency = "irregular payments" ? null : $interestOnlyPeriods(monthsInterestOnly, paymentFrequency)'`;
const DAEMON_LOANS = Number(process.env['BENCH_SCALE_DAEMON_LOANS'] ?? 100_000);
/** New loans the daemon boards on top of the big state. */
const DAEMON_NEW = Number(process.env['BENCH_SCALE_DAEMON_NEW'] ?? 300);
const IDLE_CYCLES = 6;
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

type Engine = 'sqlite' | 'postgres';

interface Sandbox {
  child: ChildProcess;
  baseUrl: string;
  apiKey: string;
  adminUrl: string;
}

async function startSandboxProcess(loans: number): Promise<Sandbox> {
  const child = spawn(
    process.execPath,
    [
      'dist/main.js',
      'sandbox',
      '--loans',
      String(loans),
      '--release-ratio',
      '1',
      '--unmasked-key',
      '--window-ms',
      String(WINDOW_MS),
      '--reads-per-window',
      String(READS),
      '--writes-per-window',
      String(WRITES),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const first = await new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) =>
      reject(new Error(`sandbox exited with ${code} before printing its address`)),
    );
  });
  return { child, ...(JSON.parse(first) as { baseUrl: string; apiKey: string; adminUrl: string }) };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await exited;
}

/** CPU time (user + system) of a process so far, in ms; null once it is gone. */
function cpuMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
  } catch {
    return null;
  }
}

/** The peak resident set of a process so far (VmHWM), in kB; null once it is gone. */
function peakKb(pid: number): number | null {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Counts acknowledged loans in the connector's state as it runs (a reader beside the writer). */
interface AckCounter {
  count(): number | Promise<number>;
  close(): void | Promise<void>;
}

function sqliteCounter(path: string): AckCounter {
  let db: Database.Database | null = null;
  return {
    count() {
      if (db === null) {
        if (!existsSync(path)) return 0;
        try {
          db = new Database(path, { readonly: true, fileMustExist: true });
        } catch {
          return 0;
        }
      }
      try {
        return (
          db.prepare(`SELECT count(*) AS n FROM loans WHERE state = 'acknowledged'`).get() as { n: number }
        ).n;
      } catch {
        return 0; // not migrated yet
      }
    },
    close() {
      db?.close();
    },
  };
}

function pgCounter(url: string): AckCounter {
  const client = new pg.Client(benchPgClient(url));
  const connected = client.connect();
  return {
    async count() {
      await connected;
      try {
        return Number(
          (await client.query<{ n: string }>(`SELECT count(*) AS n FROM loans WHERE state = 'acknowledged'`))
            .rows[0]?.n ?? 0,
        );
      } catch {
        return 0;
      }
    },
    async close() {
      await client.end();
    },
  };
}

interface Sample {
  t: number;
  cpu: number;
  acked: number;
}

interface Run {
  engine: Engine;
  loans: number;
  exit: number | null;
  boarded: number;
  quarantined: number;
  acks: number;
  duplicateAcks: number;
  rateLimited: number;
  wallS: number;
  cpuMs: number;
  sandboxCpuMs: number;
  peakKb: number;
  walkCpuMs: number;
  walkWallMs: number;
  first: { cpu: number; wall: number };
  last: { cpu: number; wall: number };
}

/** The sample values at the moment `acked` first reached k (linear between two samples). */
function at(samples: Sample[], k: number): { t: number; cpu: number } {
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1] as Sample;
    const b = samples[i] as Sample;
    if (b.acked >= k && a.acked < k) {
      const f = (k - a.acked) / (b.acked - a.acked);
      return { t: a.t + f * (b.t - a.t), cpu: a.cpu + f * (b.cpu - a.cpu) };
    }
  }
  const s = k <= 0 ? (samples.findLast((x) => x.acked === 0) ?? samples[0]) : samples[samples.length - 1];
  return { t: s?.t ?? 0, cpu: s?.cpu ?? 0 };
}

async function newPgDatabase(
  base: string,
  name: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  // The strict test server: the fixture role creates databases, owned by the login role.
  const admin = new pg.Client(benchPgClient(base, 'fixture'));
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} OWNER ${new URL(base).username}`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

function mappingsInto(dir: string): string {
  // Every generated loan must map, or the figures would mix in quarantines.
  const mappingsDir = join(dir, 'mappings');
  cpSync(join(process.cwd(), 'mappings/generic'), mappingsDir, { recursive: true });
  const mf = join(mappingsDir, 'mapping.yaml');
  writeFileSync(mf, readFileSync(mf, 'utf8').replace(IO_EXPR, `expr: 'null'`));
  return mappingsDir;
}

async function measure(engine: Engine, loans: number, pgBase: string | null): Promise<Run> {
  const dir = mkdtempSync(join(process.env['BENCH_SCALE_TMPDIR'] ?? tmpdir(), 'boarding-scale-'));
  const sandbox = await startSandboxProcess(loans);
  const db =
    engine === 'postgres' ? await newPgDatabase(pgBase as string, `scale_${process.pid}_${loans}`) : null;
  try {
    const statePath = join(dir, 'state.sqlite');
    const configPath = join(dir, 'config.json');
    writeFileSync(
      configPath,
      JSON.stringify({
        platform: {
          baseUrl: sandbox.baseUrl,
          apiKey: sandbox.apiKey,
          environment: 'staging',
          rateLimit: { windowMs: WINDOW_MS, readsPerWindow: READS, writesPerWindow: WRITES },
        },
        store:
          db === null
            ? { path: statePath }
            : {
                engine: 'postgres',
                path: statePath,
                postgres: {
                  url: db.url,
                  ssl: 'verify-full',
                  sslRootCert: benchPgStore(db.url).target.sslRootCert,
                },
              },
        ...(db === null ? {} : { customers: { tinHashKey: 'bench-scale-tin-hash-key-0123456789' } }),
        core: { adapter: 'file', file: { dir: join(dir, 'core') } },
        mappings: { dir: mappingsInto(dir) },
        boarding: {
          documentHosts: { allow: ['127.0.0.1'] },
          ...(CONCURRENCY ? { concurrency: Number(CONCURRENCY) } : {}),
        },
        reports: { dir: join(dir, 'reports') },
        log: { level: 'warn' },
      }),
    );
    const counter = db === null ? sqliteCounter(statePath) : pgCounter(db.url);
    const prof = PROFILE_DIR
      ? [
          '--cpu-prof',
          '--cpu-prof-dir',
          PROFILE_DIR,
          '--cpu-prof-name',
          `scale-${engine}-${loans}.cpuprofile`,
        ]
      : [];
    const t0 = performance.now();
    const env = db === null ? process.env : { ...process.env, ...benchPgStore(db.url).env };
    const child = spawn(
      process.execPath,
      [
        ...NODE_ARGS,
        ...prof,
        'dist/main.js',
        'sync',
        '--once',
        '--json',
        '--progress=never',
        '--config',
        configPath,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-20_000)));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const pid = child.pid as number;
    const samples: Sample[] = [];
    let done = false;
    void exited.then(() => (done = true));
    let lastCpu = 0;
    let peak = 0;
    while (!done) {
      const cpu = cpuMs(pid);
      if (cpu === null) break;
      lastCpu = cpu;
      peak = peakKb(pid) ?? peak;
      const acked = await counter.count();
      samples.push({ t: performance.now() - t0, cpu, acked });
      await new Promise((r) => setTimeout(r, SAMPLE_MS));
    }
    const exit = await exited;
    const wallS = (performance.now() - t0) / 1000;
    // The child's own CPU total (children's rusage is not at hand here): the last sample before it exited.
    const totalCpu = lastCpu;
    await counter.close();
    if (exit !== 0)
      process.stdout.write(`  sync --once exited ${exit}: ${stderr.split('\n').slice(-30).join('\n')}\n`);
    const summary = JSON.parse(stdout.trim().split('\n').pop() || '{}') as {
      acknowledged?: number;
      quarantined?: Record<string, number>;
    };
    const counters = (await (await fetch(`${sandbox.adminUrl}/counters`)).json()) as {
      acks?: Record<string, number>;
      duplicateAcks?: Record<string, number>;
      rateLimited?: number;
    };
    const sandboxCpuMs = cpuMs(sandbox.child.pid as number) ?? 0;
    const slice = Math.min(SLICE, Math.floor(loans / 2));
    const start = at(samples, 0);
    const firstEnd = at(samples, slice);
    const lastStart = at(samples, loans - slice);
    const end = at(samples, loans);
    return {
      engine,
      loans,
      exit,
      boarded: summary.acknowledged ?? 0,
      quarantined: Object.values(summary.quarantined ?? {}).reduce((a, n) => a + n, 0),
      acks: Object.keys(counters.acks ?? {}).length,
      duplicateAcks: Object.values(counters.duplicateAcks ?? {}).reduce((a, n) => a + n, 0),
      rateLimited: counters.rateLimited ?? 0,
      wallS,
      cpuMs: totalCpu,
      sandboxCpuMs,
      peakKb: peak,
      walkCpuMs: start.cpu,
      walkWallMs: start.t,
      first: { cpu: (firstEnd.cpu - start.cpu) / slice, wall: (firstEnd.t - start.t) / slice },
      last: { cpu: (end.cpu - lastStart.cpu) / slice, wall: (end.t - lastStart.t) / slice },
    };
  } finally {
    await stop(sandbox.child);
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function report(r: Run): void {
  const slice = Math.min(SLICE, Math.floor(r.loans / 2));
  console.log(
    [
      `${r.engine} · sync --once over ${r.loans} loans: exit ${r.exit}, boarded ${r.boarded}, quarantined ${r.quarantined}; sandbox acks ${r.acks}, duplicate acks ${r.duplicateAcks}, 429s ${r.rateLimited}`,
      `  whole run: ${r.wallS.toFixed(1)} s wall, ${(r.cpuMs / 1000).toFixed(1)} s CPU = ${(r.cpuMs / r.loans).toFixed(2)} ms CPU per loan (${((r.wallS * 1000) / r.loans).toFixed(2)} ms wall); peak RSS ${(r.peakKb / 1024).toFixed(0)} MB; sandbox ${(r.sandboxCpuMs / 1000).toFixed(1)} s CPU`,
      `  queue walk (start to first ack): ${(r.walkCpuMs / 1000).toFixed(2)} s CPU, ${(r.walkWallMs / 1000).toFixed(2)} s wall`,
      `  boards, first ${slice}: ${r.first.cpu.toFixed(2)} ms CPU, ${r.first.wall.toFixed(2)} ms wall per loan`,
      `  boards, last ${slice}:  ${r.last.cpu.toFixed(2)} ms CPU, ${r.last.wall.toFixed(2)} ms wall per loan (last ÷ first CPU: ${(r.last.cpu / r.first.cpu).toFixed(2)})`,
    ].join('\n'),
  );
}

/** Times one GET (wall ms) and checks its status. */
async function timedGet(url: string, auth: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(url, { headers: { authorization: auth } });
  await res.text();
  if (res.status !== 200) throw new Error(`${url} → ${res.status}`);
  return performance.now() - t;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/**
 * Part 2: `run` over a state of `loans` loans (a quarter quarantined, the rest boarded; as the
 * console benches build it) and DAEMON_NEW new releases: CPU per new loan boarded, CPU and
 * duration of idle drain cycles, a reconciliation (`reconcile`, its own process beside the
 * daemon) and the console's first exception page over the JSON API.
 */
async function daemonOverState(loans: number): Promise<void> {
  const dir = mkdtempSync(join(process.env['BENCH_SCALE_TMPDIR'] ?? tmpdir(), 'boarding-scale-daemon-'));
  const statePath = join(dir, 'state.sqlite');
  const t0 = performance.now();
  buildExceptionStore(statePath, loans);
  console.log(
    `daemon over ${loans} loans (state built in ${((performance.now() - t0) / 1000).toFixed(1)} s) + ${DAEMON_NEW} new releases, drain every 5 s:`,
  );
  const sandbox = await startSandboxProcess(DAEMON_NEW);
  const password = 'bench-console-password';
  const configPath = join(dir, 'config.json');
  writeFileSync(
    configPath,
    JSON.stringify({
      platform: {
        baseUrl: sandbox.baseUrl,
        apiKey: sandbox.apiKey,
        environment: 'staging',
        rateLimit: { windowMs: WINDOW_MS, readsPerWindow: READS, writesPerWindow: WRITES },
      },
      store: { path: statePath },
      core: { adapter: 'file', file: { dir: join(dir, 'core') } },
      mappings: { dir: mappingsInto(dir) },
      boarding: { documentHosts: { allow: ['127.0.0.1'] } },
      reports: { dir: join(dir, 'reports') },
      schedule: { drain: '*/5 * * * * *' },
      webhooks: {
        host: '127.0.0.1',
        port: 0,
        secrets: [`whsec_${Buffer.from('bench-secret-bench-secret-32byte').toString('base64')}`],
      },
      admin: { host: '127.0.0.1', port: 0 },
      console: { users: [{ name: 'olga', passwordHash: await hashPassword(password), roles: ['operator'] }] },
      log: { level: 'info' },
    }),
  );
  // The daemon logs (JSON lines) on stderr.
  const child = spawn(process.execPath, ['dist/main.js', 'run', '--config', configPath], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const pid = child.pid as number;
  const cycles: Array<{ cpu: number; durationMs: number; acknowledged: number }> = [];
  let adminUrl: string | null = null;
  /** CPU when the services were up (module loading and migrations are not a loan's cost). */
  let startedCpu = 0;
  const lines = createInterface({ input: child.stderr });
  lines.on('line', (line) => {
    if (process.env['BENCH_SCALE_DEBUG']) process.stderr.write(`${line}\n`);
    if (!line.startsWith('{')) return;
    const o = JSON.parse(line) as {
      msg?: string;
      url?: string;
      cycle?: { durationMs: number; acknowledged: number };
    };
    if (o.msg === 'admin listener (ops pages) listening' && o.url) {
      adminUrl = o.url;
      startedCpu = cpuMs(pid) ?? 0;
    }
    if (o.cycle)
      cycles.push({
        cpu: cpuMs(pid) ?? 0,
        durationMs: o.cycle.durationMs,
        acknowledged: o.cycle.acknowledged,
      });
  });
  try {
    const deadline = Date.now() + 15 * 60_000;
    const acked = (): number => cycles.reduce((a, c) => a + c.acknowledged, 0);
    while (acked() < DAEMON_NEW || adminUrl === null) {
      if (Date.now() > deadline)
        throw new Error(`only ${acked()}/${DAEMON_NEW} new loans boarded after 15 min`);
      if (child.exitCode !== null) throw new Error(`the daemon exited with ${child.exitCode}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const boarding = cycles.slice();
    const firstBoarding = boarding.findIndex((c) => c.acknowledged > 0);
    const before = firstBoarding > 0 ? (boarding[firstBoarding - 1] as { cpu: number }).cpu : startedCpu;
    const boardCpu = (boarding[boarding.length - 1] as { cpu: number }).cpu - before;
    console.log(
      `  boarding: ${DAEMON_NEW} new loans, ${(boardCpu / DAEMON_NEW).toFixed(2)} ms CPU per loan (the cycles that boarded them, walk included)`,
    );
    const idleFrom = cycles.length;
    while (cycles.length < idleFrom + IDLE_CYCLES + 1) {
      if (child.exitCode !== null) throw new Error(`the daemon exited with ${child.exitCode}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const idle = cycles.slice(idleFrom);
    const idleCpu = idle.slice(1).map((c, i) => c.cpu - (idle[i] as { cpu: number }).cpu);
    console.log(
      `  idle drain cycles (nothing new): median ${median(idle.map((c) => c.durationMs))} ms each, ${median(idleCpu).toFixed(0)} ms CPU per cycle (median of ${idleCpu.length}, between cycle ends: the cycle and its 5 s of idling)`,
    );
    const auth = `Basic ${Buffer.from(`olga:${password}`).toString('base64')}`;
    const base = adminUrl as string;
    const me = [];
    const page = [];
    for (let i = 0; i < 6; i++) {
      me.push(await timedGet(`${base}/console/api/me`, auth));
      page.push(await timedGet(`${base}/console/api/exceptions`, auth));
    }
    console.log(
      `  console first exception page (GET /console/api/exceptions): first ${page[0]!.toFixed(0)} ms, median ${median(page.slice(1)).toFixed(0)} ms; ` +
        `/console/api/me (Basic auth alone: a password hash per request) median ${median(me.slice(1)).toFixed(0)} ms`,
    );
    const rec = spawnSync(
      '/usr/bin/time',
      [
        '-v',
        process.execPath,
        'dist/main.js',
        'reconcile',
        '--config',
        configPath,
        '--out',
        join(dir, 'reconcile-out'),
      ],
      {
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    const field = (name: string): string | undefined =>
      new RegExp(`${name}: ([\\d.:]+)`).exec(rec.stderr ?? '')?.[1];
    console.log(
      `  reconcile over the state (own process beside the daemon): exit ${rec.status}, ${field('Elapsed \\(wall clock\\) time \\(h:mm:ss or m:ss\\)')} wall, ` +
        `${(Number(field('User time \\(seconds\\)') ?? 0) + Number(field('System time \\(seconds\\)') ?? 0)).toFixed(1)} s CPU, peak RSS ${(Number(field('Maximum resident set size \\(kbytes\\)') ?? 0) / 1024).toFixed(0)} MB`,
    );
    if (rec.status !== 0)
      console.log(`  reconcile stderr: ${(rec.stderr ?? '').split('\n').slice(-15).join('\n')}`);
  } finally {
    await stop(child);
    await stop(sandbox.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (process.env['BENCH_SCALE_BUILD'] !== '0') {
    const b = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
    if (b.status !== 0) throw new Error('npm run build failed');
  }
  console.log(
    `sizes ${SIZES.join(', ')} on ${ENGINES.join(', ')}; CPU is process CPU time (user + system) from /proc, sampled every ${SAMPLE_MS} ms; on a shared machine trust it over wall time`,
  );
  for (const engine of ENGINES) {
    const pgBase = engine === 'postgres' ? benchPgUrl() : null;
    const runs: Run[] = [];
    for (const n of SIZES) {
      const r = await measure(engine, n, pgBase);
      runs.push(r);
      report(r);
    }
    if (runs.length >= 2) {
      const small = runs[0] as Run;
      const large = runs[runs.length - 1] as Run;
      console.log(
        `${engine}: CPU per loan ${large.loans} ÷ ${small.loans}: ${(large.cpuMs / large.loans / (small.cpuMs / small.loans)).toFixed(3)} (whole runs; target ≤ 1.2), ` +
          `last ${SLICE} boards: ${(large.last.cpu / small.last.cpu).toFixed(3)}; wall per loan: ${(large.wallS / large.loans / (small.wallS / small.loans)).toFixed(3)}`,
      );
    }
  }
  if (Number.isInteger(DAEMON_LOANS) && DAEMON_LOANS > 0) await daemonOverState(DAEMON_LOANS);
}

await main();
