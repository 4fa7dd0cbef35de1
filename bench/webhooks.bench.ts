/**
 * Webhook receiver latency, as a regression check: p99 of signed deliveries (each a new webhook
 * id, so a real durable insert) at a steady 50 req/s — far above the ~27 a minute the platform
 * sends. Goal: p99 < 50 ms. Prints the figures; never fails on timing.
 *
 * The receiver is the webhook service as `run` composes it (verify, parse, one synchronous
 * insert with synchronous=FULL, processing, metrics) on a file database, in a child process so the
 * load generator does not share its event loop. BENCH_WEBHOOKS_SECONDS (default 20) sets the run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';

const SECRET = `whsec_${Buffer.from('bench-secret-bench-secret-32byte').toString('base64')}`;
const DURATION_S = Number(process.env['BENCH_WEBHOOKS_SECONDS'] ?? 20);
const RATE = 50;
const CONNECTIONS = 10;
const GOAL_P99_MS = 50;

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p97_5: number; p99: number; average: number; max: number };
  errors: number;
  timeouts: number;
  non2xx: number;
}
type AutocannonFn = (opts: Record<string, unknown>) => Promise<AutocannonResult>;

async function serve(): Promise<void> {
  const { openDatabase } = await import('../src/store/sqlite/db.js');
  const { startWebhookService } = await import('../test/support/webhook-service.js');
  const dir = mkdtempSync(join(tmpdir(), 'webhooks-bench-'));
  const db = openDatabase(join(dir, 'state.sqlite'));
  const svc = await startWebhookService({ db, dir, secret: SECRET, debounceMs: 1000 });
  process.stdout.write(`${JSON.stringify({ port: new URL(svc.url() ?? '').port })}\n`);
  process.on('SIGTERM', () => {
    void svc.stop().then(async () => {
      const s = await svc.inbox.stats();
      db.close();
      rmSync(dir, { recursive: true, force: true });
      process.stderr.write(
        `receiver stored ${s.pending + s.processed} deliveries (${s.processed} processed)\n`,
      );
      process.exit(0);
    });
  });
}

async function startChild(): Promise<{ port: number; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (c: Buffer) => {
      buf += c.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve((JSON.parse(buf.slice(0, nl)) as { port: number }).port);
    });
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
  });
  return { port, child };
}

function signedRequest(): { method: string; path: string; headers: Record<string, string>; body: string } {
  const id = `msg_${randomBytes(12).toString('hex')}`;
  const now = new Date();
  const body = JSON.stringify({
    id: `evt_${id}`,
    type: 'loan.funded',
    createdAt: now.toISOString(),
    data: { loanId: `L${randomBytes(4).toString('hex')}`, fundedAt: now.toISOString() },
  });
  return {
    method: 'POST',
    path: '/webhooks/platform',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign(id, now, body),
    },
    body,
  };
}

async function main(): Promise<void> {
  const autocannon = createRequire(import.meta.url)('autocannon') as AutocannonFn;
  const { port, child } = await startChild();
  let r: AutocannonResult;
  try {
    const load = (seconds: number): Promise<AutocannonResult> =>
      autocannon({
        url: `http://127.0.0.1:${port}`,
        connections: CONNECTIONS,
        duration: seconds,
        overallRate: RATE,
        requests: [{ setupRequest: () => signedRequest() }],
      });
    await load(2); // warm-up (JIT, SQLite page cache)
    r = await load(DURATION_S);
  } finally {
    const exited = new Promise<void>((res) => child.once('exit', () => res()));
    child.kill('SIGTERM');
    await exited;
  }
  const verdict = r.latency.p99 < GOAL_P99_MS ? 'within goal' : 'OVER GOAL';
  process.stdout.write(
    `webhook receiver at a steady ${RATE} req/s (${CONNECTIONS} connections, ${DURATION_S}s, ${r.requests.total} signed loan.funded deliveries)\n` +
      `  p50 ${r.latency.p50} ms   p97.5 ${r.latency.p97_5} ms   p99 ${r.latency.p99} ms   max ${r.latency.max} ms   errors ${r.errors} non2xx ${r.non2xx}\n` +
      `receiver p99: ${r.latency.p99} ms (goal < ${GOAL_P99_MS} ms: ${verdict})\n` +
      `machine load average (1 min) after the run: ${loadavg()[0]?.toFixed(1) ?? '?'} on ${cpus().length} cores (other load skews the figure)\n`,
  );
}

if (process.argv[2] === '--serve') {
  await serve();
} else {
  await main();
}
