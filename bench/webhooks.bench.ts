/**
 * Webhook receiver throughput and latency: requests/s of the real receiver (signature verified,
 * JSON parsed and validated, inbox INSERT OR IGNORE into a file SQLite database with WAL and
 * synchronous=FULL, async processing) ÷ requests/s of a bare node:http server answering the same
 * request, and the receiver's p99 latency, saturated and at a steady 200 req/s. Targets: ratio
 * ≥ 0.5, p99 < 10 ms. Prints figures; never fails on timing.
 *
 * Each server runs in its own child process (this file with `--serve <kind>`), so the load
 * generator (autocannon, in this process) does not share an event loop with the server. The bare
 * server and the receiver are loaded in alternating rounds (BENCH_WEBHOOKS_ROUNDS, default 3, of
 * BENCH_WEBHOOKS_SECONDS, default 4) and the median round's ratio is printed. To see where the
 * receiver's time goes: BENCH_WEBHOOKS_CPU_PROF=<dir> writes a V8 CPU profile per server child.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';

const SECRET = `whsec_${Buffer.from('bench-secret-bench-secret-32byte').toString('base64')}`;
const DURATION_S = Number(process.env['BENCH_WEBHOOKS_SECONDS'] ?? 4);
const ROUNDS = Number(process.env['BENCH_WEBHOOKS_ROUNDS'] ?? 3);
const CONNECTIONS = 10;
const PACED_RATE = 200;

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
  const { openDatabase } = await import('../src/store/db.js');
  const { silentLogger } = await import('../src/lib/logger.js');
  const { createApp } = await import('../src/webhooks/app.js');
  const { createWebhookInbox } = await import('../src/webhooks/inbox.js');
  const { createWebhookProcessor } = await import('../src/webhooks/processor.js');
  const { createConnectorMetrics } = await import('../src/webhooks/metrics.js');
  const { startHttpServer } = await import('../src/webhooks/server.js');
  const dir = mkdtempSync(join(tmpdir(), 'webhooks-bench-'));
  const db = openDatabase(join(dir, 'state.sqlite'));
  // Comparison only: what the receiver costs without the per-commit fsync of synchronous=FULL.
  if (kind === 'receiver-nofsync') db.pragma('synchronous = NORMAL');
  const inbox = createWebhookInbox(db);
  const logger = silentLogger();
  const processor = createWebhookProcessor({ db, inbox, logger, debounceMs: 1000, requestCycle: () => undefined });
  await processor.start();
  const app = createApp({
    config: { scheme: 'standard', secrets: [SECRET], toleranceSeconds: 300, maxBodyBytes: 262_144 },
    inbox,
    logger,
    processor,
    metrics: createConnectorMetrics({ db, inbox, processMetrics: false }),
  });
  const server = await startHttpServer(app, '127.0.0.1', 0);
  process.stdout.write(`${JSON.stringify({ port: server.port })}\n`);
  process.on('SIGTERM', () => {
    void server.close(100).then(async () => {
      await processor.stop();
      const s = inbox.stats();
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

function signedRequest(): { method: string; path: string; headers: Record<string, string>; body: string } {
  const id = `msg_${randomBytes(12).toString('hex')}`;
  const loanId = `L${randomBytes(4).toString('hex')}`;
  const body = JSON.stringify({ id: `evt_${id}`, type: 'loan.funded', createdAt: new Date().toISOString(), data: { loanId, centsAmount: 12_500_000, fundedAt: new Date().toISOString() } });
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

async function load(autocannon: AutocannonFn, port: number, seconds: number, overallRate?: number): Promise<AutocannonResult> {
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    duration: seconds,
    ...(overallRate ? { overallRate } : {}),
    // Every request a new, correctly signed delivery (a unique webhook id: a real insert each time).
    requests: [{ method: 'POST', path: '/webhooks/platform', setupRequest: () => signedRequest() }],
  });
}

/** Median time of one write+fsync of a small block in the temp directory. */
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
  // Both servers stay up and are loaded in turn, ROUNDS times: each round's ratio compares runs
  // seconds apart, so a change in the machine's background load hits both sides of a ratio alike;
  // the median round is reported.
  const bareChild = await startChild('bare');
  const recvChild = await startChild('receiver');
  const bareRuns: AutocannonResult[] = [];
  const recvRuns: AutocannonResult[] = [];
  let paced: AutocannonResult | undefined;
  try {
    await load(autocannon, bareChild.port, 1); // warm-up (JIT, SQLite page cache)
    await load(autocannon, recvChild.port, 1);
    for (let round = 0; round < ROUNDS; round++) {
      bareRuns.push(await load(autocannon, bareChild.port, DURATION_S));
      recvRuns.push(await load(autocannon, recvChild.port, DURATION_S));
    }
    // Latency at a steady, unsaturated rate: what a delivery sees in practice.
    paced = await load(autocannon, recvChild.port, DURATION_S, PACED_RATE);
  } finally {
    await stopChild(bareChild.child);
    await stopChild(recvChild.child);
  }
  let nofsync: AutocannonResult | undefined;
  const nofsyncChild = await startChild('receiver-nofsync');
  try {
    await load(autocannon, nofsyncChild.port, 1);
    nofsync = await load(autocannon, nofsyncChild.port, DURATION_S);
  } finally {
    await stopChild(nofsyncChild.child);
  }
  const row = (name: string, r: AutocannonResult): string =>
    `${name.padEnd(34)} ${r.requests.average.toFixed(0).padStart(8)} req/s   p50 ${String(r.latency.p50).padStart(3)} ms   p97.5 ${String(r.latency.p97_5).padStart(3)} ms   p99 ${String(r.latency.p99).padStart(3)} ms   errors ${r.errors} non2xx ${r.non2xx}`;
  process.stdout.write(`webhook receiver, ${CONNECTIONS} connections, ${DURATION_S}s per run, ${ROUNDS} alternating rounds, signed loan.funded deliveries with unique ids\n`);
  const ratios: number[] = [];
  bareRuns.forEach((bare, i) => {
    const recv = recvRuns[i];
    if (!recv) return;
    ratios.push(recv.requests.average / bare.requests.average);
    process.stdout.write(`round ${i + 1}\n  ${row('bare node:http (reads body, 200)', bare)}\n  ${row('receiver (verify+parse+inbox, FULL)', recv)}\n`);
  });
  const p99 = median(recvRuns.map((r) => r.latency.p99));
  process.stdout.write(
    `ratio receiver/bare: ${median(ratios).toFixed(2)} median of rounds [${ratios.map((r) => r.toFixed(2)).join(', ')}] (target ≥ 0.5)   receiver p99: ${p99} ms median (target < 10 ms)\n`,
  );
  if (paced) process.stdout.write(`${row(`receiver at a steady ${PACED_RATE} req/s`, paced)}\n`);
  const bareMedian = median(bareRuns.map((r) => r.requests.average));
  process.stdout.write(
    `${row('receiver, synchronous=NORMAL (comparison)', nofsync)}\n` +
      `  ≈ ${(nofsync.requests.average / bareMedian).toFixed(2)} of the median bare run: what the WAL sync before each 2xx costs ` +
      `(one sync per group-committed batch; one fsync here ≈ ${fsyncMs().toFixed(1)} ms)\n`,
  );
  process.stdout.write(`machine load average (1 min) after the run: ${loadavg()[0]?.toFixed(1) ?? '?'} on ${cpus().length} cores (other load skews every figure)\n`);
}

if (process.argv[2] === '--serve') {
  await serve(process.argv[3] ?? 'receiver');
} else {
  await main();
}
