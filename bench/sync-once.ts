/**
 * One measured `sync --once` (the built dist/main.js, a child process) over N released loans of a
 * sandbox child process, for `npm run bench -- scale` and `npm run bench -- board-cost`: the
 * connector's CPU time read from /proc/<pid>/stat and its acknowledged loans from its state
 * database every SAMPLE_MS, the first and last slice of boards, the queue walk, the sandbox's
 * counters. The sandbox's rate window is 1 s with large budgets and the connector is configured
 * with the same, so the budget never limits.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { benchPgClient, benchPgStore } from './pg-server.js';

export const WINDOW_MS = 1000;
export const READS = 5000;
export const WRITES = 2000;
export const SAMPLE_MS = 100;
export const SLICE = 1000;

/** How many boards the first and last slices of a run hold: SLICE, or half a smaller run. */
export function sliceOf(loans: number): number {
  return Math.min(SLICE, Math.floor(loans / 2));
}
const IO_EXPR = `expr: 'paymentFrequency = "irregular payments" ? null : $interestOnlyPeriods(monthsInterestOnly, paymentFrequency)'`;
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

export interface MeasureOptions {
  /** Node options for the measured `sync --once` (e.g. a preload, "--max-semi-space-size=32"). */
  nodeArgs?: readonly string[];
  /** Extra environment for the measured process. */
  env?: Record<string, string>;
  /** A directory: `sync --once` runs with --cpu-prof writing there. */
  profileDir?: string | undefined;
  /** boarding.concurrency (default: the config default). */
  concurrency?: string | undefined;
  /**
   * Another checkout whose build is measured instead of this one (its `dist/main.js`; the sandbox
   * and the mappings are this checkout's).
   */
  build?: string | undefined;
}

export type Engine = 'sqlite' | 'postgres';

interface Sandbox {
  child: ChildProcess;
  baseUrl: string;
  apiKey: string;
  adminUrl: string;
}

export async function startSandboxProcess(loans: number): Promise<Sandbox> {
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

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await exited;
}

/** CPU time (user + system) of a process so far, in ms; null once it is gone. */
export function cpuMs(pid: number): number | null {
  const t = cpuTimes(pid);
  return t === null ? null : t.user + t.system;
}

/** User and system CPU time of a process so far, in ms; null once it is gone. */
export function cpuTimes(pid: number): { user: number; system: number } | null {
  return statTimes(`/proc/${pid}/stat`);
}

/**
 * CPU time of the process's main thread so far, in ms (user + system); null once it is gone. The
 * rest of cpuTimes is its other threads: V8's helpers (the concurrent collector's marking and
 * the optimising compiler, both of which a longer run spreads) and the libuv pool (fsyncs).
 */
export function mainThreadCpuMs(pid: number): number | null {
  const t = statTimes(`/proc/${pid}/task/${pid}/stat`);
  return t === null ? null : t.user + t.system;
}

/** utime and stime of a /proc stat file (a process's or one thread's), in ms; null once it is gone. */
function statTimes(path: string): { user: number; system: number } | null {
  try {
    const stat = readFileSync(path, 'utf8');
    // Fields after the command name (which may hold spaces) start after the last ')'.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { user: (Number(f[11]) * 1000) / CLK_TCK, system: (Number(f[12]) * 1000) / CLK_TCK };
  } catch {
    return null;
  }
}

/** The peak resident set of a process so far (VmHWM), in kB; null once it is gone. */
export function peakKb(pid: number): number | null {
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

export interface Run {
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
  /** Of cpuMs, the kernel's (system) share. */
  systemCpuMs: number;
  /** Of cpuMs, the main thread's (the rest: V8's helper threads and the libuv pool). */
  mainThreadCpuMs: number;
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

export async function newPgDatabase(
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

export function mappingsInto(dir: string): string {
  // Every generated loan must map, or the figures would mix in quarantines.
  const mappingsDir = join(dir, 'mappings');
  cpSync(join(process.cwd(), 'mappings/generic'), mappingsDir, { recursive: true });
  const mf = join(mappingsDir, 'mapping.yaml');
  writeFileSync(mf, readFileSync(mf, 'utf8').replace(IO_EXPR, `expr: 'null'`));
  return mappingsDir;
}

export async function measure(
  engine: Engine,
  loans: number,
  pgBase: string | null,
  opts: MeasureOptions = {},
): Promise<Run> {
  const PROFILE_DIR = opts.profileDir;
  const CONCURRENCY = opts.concurrency;
  const NODE_ARGS = opts.nodeArgs ?? [];
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
    const env = { ...process.env, ...opts.env, ...(db === null ? {} : benchPgStore(db.url).env) };
    const child = spawn(
      process.execPath,
      [
        ...NODE_ARGS,
        ...prof,
        join(opts.build ?? process.cwd(), 'dist/main.js'),
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
    let lastSystem = 0;
    let lastMain = 0;
    let peak = 0;
    while (!done) {
      const times = cpuTimes(pid);
      if (times === null) break;
      const cpu = times.user + times.system;
      lastCpu = cpu;
      lastSystem = times.system;
      lastMain = mainThreadCpuMs(pid) ?? lastMain;
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
    const slice = sliceOf(loans);
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
      systemCpuMs: lastSystem,
      mainThreadCpuMs: lastMain,
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

export function report(r: Run): void {
  const slice = sliceOf(r.loans);
  console.log(
    [
      `${r.engine} · sync --once over ${r.loans} loans: exit ${r.exit}, boarded ${r.boarded}, quarantined ${r.quarantined}; sandbox acks ${r.acks}, duplicate acks ${r.duplicateAcks}, 429s ${r.rateLimited}`,
      `  whole run: ${r.wallS.toFixed(1)} s wall, ${(r.cpuMs / 1000).toFixed(1)} s CPU = ${(r.cpuMs / r.loans).toFixed(2)} ms CPU per loan (system ${(r.systemCpuMs / r.loans).toFixed(2)}; ${((r.wallS * 1000) / r.loans).toFixed(2)} ms wall); peak RSS ${(r.peakKb / 1024).toFixed(0)} MB; sandbox ${(r.sandboxCpuMs / 1000).toFixed(1)} s CPU`,
      `  threads: main ${(r.mainThreadCpuMs / r.loans).toFixed(2)} ms CPU per loan, the others (V8's collector and compiler helpers, the libuv pool) ${((r.cpuMs - r.mainThreadCpuMs) / r.loans).toFixed(2)}`,
      `  queue walk (start to first ack): ${(r.walkCpuMs / 1000).toFixed(2)} s CPU, ${(r.walkWallMs / 1000).toFixed(2)} s wall`,
      `  boards, first ${slice}: ${r.first.cpu.toFixed(2)} ms CPU, ${r.first.wall.toFixed(2)} ms wall per loan`,
      `  boards, last ${slice}:  ${r.last.cpu.toFixed(2)} ms CPU, ${r.last.wall.toFixed(2)} ms wall per loan (last ÷ first CPU: ${(r.last.cpu / r.first.cpu).toFixed(2)})`,
    ].join('\n'),
  );
}
