/**
 * `npm run bench -- budget-replicas`: two replica PROCESSES, each with the real platform client
 * as the daemon builds it (platformClientFromConfig on a store.engine postgres state: RateBudget
 * asking the shared ledger for every token), spend one API key's budget against the sandbox, whose
 * documented budget (100 reads, 30 writes a window) is scaled to a short window. A recording proxy
 * in front of the sandbox notes when each request ARRIVES. Prints per bucket the share of the
 * allowance (documented limit × headroom, what the client allows itself) used in steady state,
 * i.e. after the first window (issue 37: target ≥ 0.98 with the shipped headroom 0.9), the same
 * over the whole run (the first window may hold a whole allowance at once), the share of the
 * documented budget, the 429 count (target 0) and the most requests that arrived in any sliding
 * window against the limit. Never fails on timing.
 *
 * PostgreSQL: BOARDING_TEST_PG_URL when set, else scripts/pg-test-server.sh starts the throwaway
 * test server. BUDGET_REPLICAS_SECONDS (default 20), BUDGET_REPLICAS_WINDOW_MS (default 2000) and
 * BUDGET_REPLICAS_HEADROOM (platform.rateLimit.headroom, default 0.9 as shipped) change the run.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { platformClientFromConfig } from '../src/app/platform.js';
import { loadConfig } from '../src/config/load.js';
import { systemClock } from '../src/lib/clock.js';
import { silentLogger } from '../src/lib/logger.js';
import { startSandbox } from '../src/sandbox/index.js';
import { openPgPool } from '../src/store/pg/pool.js';
import { migratePg } from '../src/store/migrations/pg.js';
import { benchPgClient, benchPgStore, benchPgUrl, runBenchReplica } from './pg-server.js';
import { pgStore } from '../src/store/pg/store.js';

const SECONDS = Number(process.env['BUDGET_REPLICAS_SECONDS'] ?? 20);
const WINDOW_MS = Number(process.env['BUDGET_REPLICAS_WINDOW_MS'] ?? 2000);
const DOCUMENTED = { read: 100, write: 30 } as const;
const HEADROOM = Number(process.env['BUDGET_REPLICAS_HEADROOM'] ?? 0.9);
const REPLICAS = 2;
const READERS = 3;
const WRITERS = 2;

function configText(baseUrl: string, apiKey: string, pgUrl: string): string {
  return [
    `platform: { baseUrl: ${JSON.stringify(baseUrl)}, apiKey: ${apiKey}, environment: development, maxRetries: 0,`,
    `  rateLimit: { readsPerWindow: ${DOCUMENTED.read}, writesPerWindow: ${DOCUMENTED.write}, windowMs: ${WINDOW_MS}, headroom: ${HEADROOM} } }`,
    benchPgStore(pgUrl).yaml,
    '',
  ].join('\n');
}

async function replica(): Promise<void> {
  const env = process.env;
  const config = loadConfig({
    env: benchPgStore(env['BENCH_PG']!).env,
    fileText: configText(env['BENCH_BASE']!, env['BENCH_KEY']!, env['BENCH_PG']!),
  });
  const pool = openPgPool({
    url: env['BENCH_PG']!,
    client: benchPgClient(env['BENCH_PG']!),
    applicationName: `bench-replica-${env['BENCH_REPLICA']}`,
    max: 3,
  });
  const client = platformClientFromConfig(config, {
    logger: silentLogger(),
    db: pgStore(pool, 'bench'),
    clock: systemClock,
  });
  const loanId = env['BENCH_LOAN']!;
  const stop = Date.now() + SECONDS * 1000;
  const outcomes: Record<string, number> = {};
  const count = (k: string): void => {
    outcomes[k] = (outcomes[k] ?? 0) + 1;
  };
  const loop = async (call: () => Promise<unknown>, kind: string): Promise<void> => {
    while (Date.now() < stop) {
      try {
        await call();
        count(`${kind} ok`);
      } catch (err) {
        count(`${kind} ${(err as { code?: string }).code ?? 'error'}`);
      }
    }
  };
  await Promise.all([
    ...Array.from({ length: READERS }, () => loop(() => client.getLoan(loanId), 'read')),
    // The same ack with the same key: the first boards, the rest are idempotent replays (each a write).
    ...Array.from({ length: WRITERS }, () =>
      loop(
        () =>
          client.acknowledgeBoarding(
            loanId,
            { boardingReference: 'bench' },
            { idempotencyKey: `ack:${loanId}:bench` },
          ),
        'write',
      ),
    ),
  ]);
  const stats = client.stats();
  await client.close();
  await pool.end();
  process.stdout.write(JSON.stringify({ outcomes, rateLimited: stats.rateLimited }) + '\n');
}

interface Arrival {
  at: number;
  bucket: 'read' | 'write';
  status: number;
}

/** A proxy in front of the sandbox that notes each API request's arrival (before forwarding). */
async function recordingProxy(
  target: URL,
): Promise<{ base: string; arrivals: Arrival[]; close: () => Promise<void> }> {
  const arrivals: Arrival[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const at = Date.now();
    const bucket = req.method === 'GET' || req.method === 'HEAD' ? 'read' : 'write';
    const up = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (r) => {
        if (req.url?.startsWith('/api/')) arrivals.push({ at, bucket, status: r.statusCode ?? 0 });
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}/api`,
    arrivals,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function maxInSliding(times: number[], windowMs: number): number {
  const t = [...times].sort((a, b) => a - b);
  let max = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i]! - t[j]! >= windowMs) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

async function main(): Promise<void> {
  const base = benchPgUrl();
  const name = `bench_replicas_${process.pid}`;
  const admin = new pg.Client(benchPgClient(base, 'fixture'));
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} OWNER boarding`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  const pgUrl = u.toString();
  const sb = await startSandbox({
    loans: 10,
    releaseRatio: 1,
    windowMs: WINDOW_MS,
    readsPerWindow: DOCUMENTED.read,
    writesPerWindow: DOCUMENTED.write,
  });
  const proxy = await recordingProxy(new URL(sb.baseUrl));
  try {
    const pool = openPgPool({ url: pgUrl, client: benchPgClient(pgUrl), max: 1 });
    await migratePg(pool);
    await pool.end();
    const queue = (await (
      await fetch(`${sb.baseUrl}/public/v1/loans/boarding-queue?limit=1`, {
        headers: { authorization: `Bearer ${sb.apiKey}` },
      })
    ).json()) as { data: Array<{ id: string }> };
    const loanId = queue.data[0]!.id;
    const env = { BENCH_BASE: proxy.base, BENCH_KEY: sb.apiKey, BENCH_PG: pgUrl, BENCH_LOAN: loanId };
    const per = await Promise.all(
      Array.from(
        { length: REPLICAS },
        async (_, i) =>
          JSON.parse(await runBenchReplica(import.meta.url, i, env)) as {
            outcomes: Record<string, number>;
            rateLimited: number;
          },
      ),
    );
    const counters = (await (await fetch(`${sb.baseUrl.replace(/\/api$/, '')}/admin/counters`)).json()) as {
      rateLimited: number;
    };

    process.stdout.write(
      `sandbox budget ${DOCUMENTED.read} reads / ${DOCUMENTED.write} writes per ${WINDOW_MS} ms (the documented counts, window scaled), headroom ${HEADROOM}; ` +
        `${REPLICAS} replica processes × (${READERS} readers + ${WRITERS} writers), real client + shared PostgreSQL ledger, ${SECONDS} s\n`,
    );
    per.forEach((p, i) =>
      process.stdout.write(
        `  replica ${i}: ${Object.entries(p.outcomes)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}; 429s seen ${p.rateLimited}\n`,
      ),
    );
    for (const bucket of ['read', 'write'] as const) {
      const served = proxy.arrivals.filter((a) => a.bucket === bucket && a.status !== 429).map((a) => a.at);
      const refused = proxy.arrivals.filter((a) => a.bucket === bucket && a.status === 429).length;
      const all = proxy.arrivals.filter((a) => a.bucket === bucket).map((a) => a.at);
      const t0 = Math.min(...all);
      const t1 = Math.max(...all);
      const windows = (t1 - t0) / WINDOW_MS;
      const perWindow = served.length / windows;
      // Steady state: from the end of the first window on (a fresh budget lets a whole allowance through at once).
      const steady = served.filter((t) => t >= t0 + WINDOW_MS).length / ((t1 - t0 - WINDOW_MS) / WINDOW_MS);
      const limit = DOCUMENTED[bucket];
      const allowance = Math.floor(limit * HEADROOM);
      const maxSliding = maxInSliding(all, WINDOW_MS);
      process.stdout.write(
        [
          `  ${bucket}s: ${served.length} served over ${windows.toFixed(1)} windows = ${perWindow.toFixed(2)} per window`,
          `    steady state (after the first window): ${steady.toFixed(2)} per window = ${(steady / allowance).toFixed(3)} of the allowance (${allowance} = limit ${limit} × headroom ${HEADROOM}; target ≥ 0.98)`,
          `    whole run: ${(perWindow / allowance).toFixed(3)} of the allowance, ${(perWindow / limit).toFixed(3)} of the documented budget (${limit})`,
          `    429s: ${refused} (target 0)`,
          `    max arrivals in any sliding ${WINDOW_MS} ms window: ${maxSliding} (limit ${limit}, allowance ${allowance}) ${maxSliding <= limit ? 'OK' : 'OVER THE LIMIT'}`,
        ].join('\n') + '\n',
      );
    }
    process.stdout.write(`  sandbox counters: rateLimited ${counters.rateLimited}\n`);
  } finally {
    await proxy.close();
    await sb.close();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

if (process.env['BENCH_ROLE'] === 'replica') await replica();
else await main();
