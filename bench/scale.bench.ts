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
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { benchPgUrl } from './pg-server.js';
import { hashPassword } from '../src/console/auth.js';
import { buildExceptionStore } from './console-store.js';
import {
  READS,
  SAMPLE_MS,
  SLICE,
  WINDOW_MS,
  WRITES,
  mappingsInto,
  measure,
  report,
  startSandboxProcess,
  stop,
  cpuMs,
  type Engine,
  type Run,
} from './sync-once.js';

const SIZES = (process.env['BENCH_SCALE_SIZES'] ?? '3000,30000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n) && n > 0);
const ENGINES = (process.env['BENCH_SCALE_ENGINES'] ?? 'sqlite,postgres')
  .split(',')
  .map((s) => s.trim())
  .filter((e): e is Engine => e === 'sqlite' || e === 'postgres');
const OPTIONS = {
  profileDir: process.env['BENCH_SCALE_PROFILE'],
  concurrency: process.env['BENCH_SCALE_CONCURRENCY'],
  nodeArgs: (process.env['BENCH_SCALE_NODE_ARGS'] ?? '').split(' ').filter(Boolean),
};
const DAEMON_LOANS = Number(process.env['BENCH_SCALE_DAEMON_LOANS'] ?? 100_000);
/** New loans the daemon boards on top of the big state. */
const DAEMON_NEW = Number(process.env['BENCH_SCALE_DAEMON_NEW'] ?? 300);
const IDLE_CYCLES = 6;

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
      const r = await measure(engine, n, pgBase, OPTIONS);
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
