/**
 * Webhook receiver throughput and latency. The receiver is the production composition (the
 * webhook service as `run` builds it: signature verified, JSON parsed and validated, inbox INSERT
 * OR IGNORE committed with synchronous=FULL on the inbox thread before the 2xx, processing passes,
 * WAL checkpointer), compiled (dist/, built first, as `run` ships), on a file SQLite database; the yardstick is a bare node:http server that
 * reads the same request and answers 200. Targets: receiver requests/s ÷ bare requests/s ≥ 0.5,
 * receiver p99 < 10 ms. Prints figures; never fails on timing.
 *
 * Throughput is a capacity: the receiver's requests/s at the level of open connections where it
 * peaks ÷ the bare server's at that level, from the same alternating rounds (a durable receiver
 * answers each request after a disk sync, so with few connections it waits on the disk rather than
 * the CPU, and only more concurrent deliveries fill its group commits; the bare server is
 * CPU-bound from the first level, so any level is its capacity). Every level is printed, and each
 * server's best level too (that compares runs minutes apart and takes the bare server's luckiest). Latency is
 * taken where a platform's deliveries really arrive: at 10 connections and at a steady 200 req/s.
 *
 * Each server runs in its own child process (this file with `--serve <kind>`), so the load
 * generator (autocannon, in this process) does not share an event loop with the server. At each
 * level the two servers are loaded in alternating rounds (BENCH_WEBHOOKS_ROUNDS, default 3, of
 * BENCH_WEBHOOKS_SECONDS, default 4) and the median round is used. BENCH_WEBHOOKS_CONCURRENCY
 * (default "10,50,100") sets the levels; BENCH_WEBHOOKS_EVENTS (default "loan.funded") the event
 * types sent in turn. To see where the receiver's time goes:
 * BENCH_WEBHOOKS_CPU_PROF=<dir> writes a V8 CPU profile per thread of each server child.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import type * as DbModule from '../src/store/db.js';

const SECRET = `whsec_${Buffer.from('bench-secret-bench-secret-32byte').toString('base64')}`;
const DURATION_S = Number(process.env['BENCH_WEBHOOKS_SECONDS'] ?? 4);
const ROUNDS = Number(process.env['BENCH_WEBHOOKS_ROUNDS'] ?? 3);
const LEVELS = (process.env['BENCH_WEBHOOKS_CONCURRENCY'] ?? '10,50,100').split(',').map(Number).filter((n) => n > 0);
const LATENCY_CONNECTIONS = 10;
const CPU_RATE = 2000;
const PACED_RATE = 200;
// Event types sent in turn (default loan.funded, the one the connector acts on). E.g.
// BENCH_WEBHOOKS_EVENTS=loan.funded,loan.created,loan.status_changed,document.uploaded,document.signed
const EVENTS = (process.env['BENCH_WEBHOOKS_EVENTS'] ?? 'loan.funded').split(',').map((e) => e.trim()).filter(Boolean);

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p97_5: number; p99: number; average: number; max: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
type AutocannonFn = (opts: Record<string, unknown>) => Promise<AutocannonResult>;

async function serve(kind: string): Promise<void> {
  if (kind === 'bare') {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"received":true}');
      });
    });
    server.listen(0, '127.0.0.1', () => {
      process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
    });
    return;
  }
  // The compiled service, as `run` ships it (main() built dist/ first): under the TypeScript
  // loader every request and inbox-thread message also paid for its runtime helpers (about a fifth
  // of the receiver's CPU per delivery).
  const dist = '../dist/store/db.js';
  const { openDatabase } = (await import(dist)) as typeof DbModule;
  const { startWebhookService } = await import('../test/support/webhook-service.js');
  const dir = mkdtempSync(join(tmpdir(), 'webhooks-bench-'));
  const db = openDatabase(join(dir, 'state.sqlite'));
  // The receiver exactly as `run` composes it (inbox thread, checkpointer, processor, metrics).
  const svc = await startWebhookService({ db, dir, secret: SECRET, debounceMs: 1000, build: 'dist' });
  process.stdout.write(`${JSON.stringify({ port: new URL(svc.url() ?? '').port })}\n`);
  process.on('SIGTERM', () => {
    void svc.stop().then(() => {
      const s = svc.inbox.stats();
      db.close();
      rmSync(dir, { recursive: true, force: true });
      process.stderr.write(`receiver stored ${s.pending + s.processed} deliveries (${s.processed} processed)\n`);
      process.exit(0);
    });
  });
}

async function startChild(kind: string): Promise<{ port: number; child: ChildProcess }> {
  // BENCH_WEBHOOKS_CPU_PROF=<dir>: write a V8 CPU profile of each server child there (off by default).
  const profDir = process.env['BENCH_WEBHOOKS_CPU_PROF'];
  const prof = profDir ? ['--cpu-prof', '--cpu-prof-dir', join(profDir, kind)] : [];
  const child = spawn(process.execPath, [...prof, '--import', 'tsx', fileURLToPath(import.meta.url), '--serve', kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (c: Buffer) => {
      buf += c.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve((JSON.parse(buf.slice(0, nl)) as { port: number }).port);
    });
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
  return { port, child };
}

async function stopChild(child: ChildProcess): Promise<void> {
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  await exited;
}

let sent = 0;
function signedRequest(): { method: string; path: string; headers: Record<string, string>; body: string } {
  const id = `msg_${randomBytes(12).toString('hex')}`;
  const loanId = `L${randomBytes(4).toString('hex')}`;
  const type = EVENTS[sent++ % EVENTS.length] ?? 'loan.funded';
  const now = new Date().toISOString();
  const data: Record<string, unknown> = { loanId };
  if (type === 'loan.funded') Object.assign(data, { centsAmount: 12_500_000, fundedAt: now });
  else if (type === 'loan.status_changed') Object.assign(data, { status: 'active', previousStatus: 'application' });
  else if (type.startsWith('document.')) data['documentId'] = `D${randomBytes(4).toString('hex')}`;
  const body = JSON.stringify({ id: `evt_${id}`, type, createdAt: now, data });
  const at = new Date();
  return {
    method: 'POST',
    path: '/webhooks/platform',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign(id, at, body),
    },
    body,
  };
}

async function load(autocannon: AutocannonFn, port: number, seconds: number, connections: number, overallRate?: number): Promise<AutocannonResult> {
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections,
    duration: seconds,
    ...(overallRate ? { overallRate } : {}),
    // Every request a new, correctly signed delivery (a unique webhook id: a real insert each time).
    requests: [{ method: 'POST', path: '/webhooks/platform', setupRequest: () => signedRequest() }],
  });
}

/** Median time of one write+fsync of a small block in the temp directory. */
/** CPU time (user + system, every thread) a child process has used so far, in ms; null off Linux. */
function cpuMs(pid: number | undefined): number | null {
  const file = `/proc/${pid}/stat`;
  if (pid === undefined || !existsSync(file)) return null;
  const fields = readFileSync(file, 'utf8').split(') ')[1]?.split(' ') ?? [];
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ticks) ? ticks * 10 : null; // USER_HZ is 100 on Linux
}

/**
 * CPU per request at a fixed offered rate (neither server saturated): less noisy than saturated
 * throughput on a shared machine, and says what a change costs. The receiver's figure includes
 * processing the deliveries (measured until its inbox is worked off).
 */
async function cpuPerRequest(autocannon: AutocannonFn, child: ChildProcess, port: number, settleMs: number): Promise<number | null> {
  const before = cpuMs(child.pid);
  const r = await load(autocannon, port, DURATION_S, 50, CPU_RATE);
  await new Promise((res) => setTimeout(res, settleMs));
  const after = cpuMs(child.pid);
  return before === null || after === null || r.requests.total === 0 ? null : ((after - before) * 1000) / r.requests.total;
}

function fsyncMs(): number {
  const dir = mkdtempSync(join(tmpdir(), 'fsync-probe-'));
  const fd = openSync(join(dir, 'probe'), 'w');
  const times: number[] = [];
  try {
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      writeSync(fd, Buffer.alloc(4096, i));
      fsyncSync(fd);
      times.push(performance.now() - t);
    }
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? 0;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
};

async function main(): Promise<void> {
  const require = createRequire(import.meta.url);
  const autocannon = require('autocannon') as AutocannonFn;
  // The receiver runs from dist/ (see serve): build it from the current sources.
  const built = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    stdio: 'inherit',
  });
  if (built.status !== 0) throw new Error(`building dist/ for the receiver failed (exit ${built.status ?? built.signal})`);
  // The build leaves megabytes of dirty pages; written back during the runs they would stall the
  // receiver's fsyncs and be measured as its latency.
  spawnSync('sync', { stdio: 'ignore' });
  // Both servers stay up and are loaded in turn, ROUNDS times per level: each round compares runs
  // seconds apart, so a change in the machine's background load hits both sides alike.
  const bareChild = await startChild('bare');
  const recvChild = await startChild('receiver');
  const levels: Array<{ connections: number; bare: AutocannonResult[]; recv: AutocannonResult[] }> = [];
  const paced = { bare: [] as AutocannonResult[], recv: [] as AutocannonResult[] };
  let bareCpu: number | null = null;
  let recvCpu: number | null = null;
  try {
    await load(autocannon, bareChild.port, 1, LATENCY_CONNECTIONS); // warm-up (JIT, SQLite page cache)
    await load(autocannon, recvChild.port, 1, LATENCY_CONNECTIONS);
    // Latency at a steady, unsaturated rate (what a delivery sees in practice), first: after the
    // saturation runs the receiver is still working off their processing backlog for a while.
    // Rounds as below; the bare server's figure is the load generator's own floor at that rate
    // (autocannon's pacing adds a few ms to the tail of any server).
    for (let round = 0; round < ROUNDS; round++) {
      paced.bare.push(await load(autocannon, bareChild.port, DURATION_S, LATENCY_CONNECTIONS, PACED_RATE));
      paced.recv.push(await load(autocannon, recvChild.port, DURATION_S, LATENCY_CONNECTIONS, PACED_RATE));
    }
    for (const connections of LEVELS) {
      const level = { connections, bare: [] as AutocannonResult[], recv: [] as AutocannonResult[] };
      for (let round = 0; round < ROUNDS; round++) {
        level.bare.push(await load(autocannon, bareChild.port, DURATION_S, connections));
        level.recv.push(await load(autocannon, recvChild.port, DURATION_S, connections));
      }
      levels.push(level);
    }
    bareCpu = await cpuPerRequest(autocannon, bareChild.child, bareChild.port, 0);
    recvCpu = await cpuPerRequest(autocannon, recvChild.child, recvChild.port, 3000);
  } finally {
    await stopChild(bareChild.child);
    await stopChild(recvChild.child);
  }
  const row = (name: string, r: AutocannonResult): string =>
    `${name.padEnd(30)} ${r.requests.average.toFixed(0).padStart(7)} req/s   p50 ${String(r.latency.p50).padStart(3)} ms   p97.5 ${String(r.latency.p97_5).padStart(3)} ms   p99 ${String(r.latency.p99).padStart(3)} ms   errors ${r.errors} non2xx ${r.non2xx}`;
  const medianRun = (runs: AutocannonResult[], by: (r: AutocannonResult) => number = (r) => r.requests.average): AutocannonResult => {
    const sorted = [...runs].sort((a, b) => by(a) - by(b));
    return sorted[Math.floor(sorted.length / 2)] as AutocannonResult;
  };
  process.stdout.write(`webhook receiver vs bare node:http: signed ${EVENTS.join('/')} deliveries with unique ids, ${DURATION_S}s runs, ${ROUNDS} alternating rounds per level (median round shown)\n`);
  let bestBare = 0;
  let bestRecv = 0;
  // The level where the receiver peaks, with the bare server's figure from the same rounds.
  let peak: { connections: number; recv: number; bare: number } | null = null;
  for (const level of levels) {
    const bare = medianRun(level.bare);
    const recv = medianRun(level.recv);
    bestBare = Math.max(bestBare, bare.requests.average);
    bestRecv = Math.max(bestRecv, recv.requests.average);
    if (peak === null || recv.requests.average > peak.recv) peak = { connections: level.connections, recv: recv.requests.average, bare: bare.requests.average };
    process.stdout.write(
      `${level.connections} connections   ratio ${(recv.requests.average / bare.requests.average).toFixed(2)}\n  ${row('bare node:http (reads body)', bare)}\n  ${row('receiver (verify+parse+inbox)', recv)}\n`,
    );
  }
  const latencyLevel = levels.find((l) => l.connections === LATENCY_CONNECTIONS);
  const p99 = latencyLevel ? median(latencyLevel.recv.map((r) => r.latency.p99)) : NaN;
  process.stdout.write(
    (peak
      ? `capacity: the receiver at its best level (${peak.connections} connections) ${peak.recv.toFixed(0)} req/s ÷ bare at that level ${peak.bare.toFixed(0)} = ratio ${(peak.recv / peak.bare).toFixed(2)} (target ≥ 0.5)\n`
      : '') +
      `  (each server's best level, measured minutes apart: ${bestRecv.toFixed(0)} ÷ ${bestBare.toFixed(0)} = ${(bestRecv / bestBare).toFixed(2)}; the bare server is saturated at every level, so its best is the luckiest of ${levels.length} samples)\n` +
      `receiver p99 at ${LATENCY_CONNECTIONS} connections: ${p99} ms median of rounds; at a steady ${PACED_RATE} req/s: ${median(paced.recv.map((r) => r.latency.p99))} ms median of rounds (target < 10 ms)\n`,
  );
  if (paced.recv.length > 0) {
    process.stdout.write(
      `steady ${PACED_RATE} req/s at ${LATENCY_CONNECTIONS} connections (median round)\n  ${row('bare node:http (reads body)', medianRun(paced.bare, (r) => r.latency.p99))}\n  ${row('receiver (verify+parse+inbox)', medianRun(paced.recv, (r) => r.latency.p99))}\n`,
    );
  }
  if (bareCpu !== null && recvCpu !== null) {
    process.stdout.write(
      `CPU per request at ${CPU_RATE} req/s (all threads; the receiver's includes processing): receiver ${recvCpu.toFixed(0)} µs, bare ${bareCpu.toFixed(0)} µs (${(recvCpu / bareCpu).toFixed(1)}×)\n`,
    );
  }
  process.stdout.write(
    `one 4 KiB write+fsync in the temp directory ≈ ${fsyncMs().toFixed(2)} ms (every 2xx waits for one: the receiver's latency floor)\n` +
      `machine load average (1 min) after the run: ${loadavg()[0]?.toFixed(1) ?? '?'} on ${cpus().length} cores (other load skews every figure)\n`,
  );
}

if (process.argv[2] === '--serve') {
  await serve(process.argv[3] ?? 'receiver');
} else {
  await main();
}
