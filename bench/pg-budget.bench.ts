/**
 * `npm run bench -- pg-budget`: the shared rate budget (src/store/rate-budget/pg.ts) with two
 * replicas, each its own process and pool, spending one budget on a real PostgreSQL for ~20 s.
 * Prints the grants per window against the limit (target ≥ 0.9 of the budget) and the most grants
 * in any sliding window on the database clock (must be ≤ the limit). Never fails on timing.
 *
 * PostgreSQL: BOARDING_TEST_PG_URL when set, else scripts/pg-test-server.sh starts the throwaway
 * test server (installing Debian's postgresql when missing). PG_BUDGET_BENCH_SECONDS changes the
 * run length.
 */
import pg from 'pg';
import { systemClock } from '../src/lib/clock.js';
import { openPgPool } from '../src/store/pg/pool.js';
import { PgSharedRateBudget } from '../src/store/rate-budget/pg.js';
import { migratePg } from '../src/store/migrations/pg.js';
import { benchPgClient, benchPgUrl, runBenchReplica } from './pg-server.js';

const SECONDS = Number(process.env['PG_BUDGET_BENCH_SECONDS'] ?? 20);
const REPLICAS = 2;
const LOOPS_PER_REPLICA = 2;

async function replica(): Promise<void> {
  const env = process.env;
  const pool = openPgPool({
    url: env['BENCH_URL']!,
    client: benchPgClient(env['BENCH_URL']!),
    applicationName: `bench-replica-${env['BENCH_REPLICA']}`,
    max: LOOPS_PER_REPLICA,
  });
  const budget = new PgSharedRateBudget({
    pool,
    key: 'bench',
    limits: {
      write: { limit: Number(env['BENCH_LIMIT']), windowMs: Number(env['BENCH_WINDOW_MS']) },
      read: { limit: 1, windowMs: 1000 },
    },
    clock: systemClock,
  });
  const signal = AbortSignal.timeout(SECONDS * 1000);
  const out: string[] = [];
  let takes = 0;
  await Promise.all(
    Array.from({ length: LOOPS_PER_REPLICA }, async () => {
      while (!signal.aborted) {
        try {
          out.push(String((await budget.acquire('write', signal)).atUs));
          takes += 1;
        } catch (err) {
          if (!signal.aborted) throw err;
        }
      }
    }),
  );
  await pool.end();
  process.stdout.write(JSON.stringify({ grants: out, takes }) + '\n');
}

async function scenario(base: string, limit: number, windowMs: number): Promise<void> {
  const name = `bench_${process.pid}_${limit}`;
  const admin = new pg.Client(benchPgClient(base, 'fixture'));
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} OWNER boarding`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  const url = u.toString();
  try {
    const pool = openPgPool({ url, client: benchPgClient(url), max: 1 });
    await migratePg(pool);
    await pool.end();
    const per = await Promise.all(
      Array.from({ length: REPLICAS }, async (_, i) =>
        (
          JSON.parse(
            await runBenchReplica(import.meta.url, i, {
              BENCH_URL: url,
              BENCH_LIMIT: String(limit),
              BENCH_WINDOW_MS: String(windowMs),
            }),
          ) as { grants: string[] }
        ).grants.map((g) => BigInt(g)),
      ),
    );
    const all = per.flat().sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const w = BigInt(windowMs * 1000);
    // Most grants in any half-open window [g, g + W) (the max is reached at a window starting at a grant).
    let maxSliding = 0;
    for (let i = 0, j = 0; i < all.length; i++) {
      while (j < all.length && all[j]! < all[i]! + w) j++;
      maxSliding = Math.max(maxSliding, j - i);
    }
    // Full fixed windows from the first grant (the partial last one is left out).
    const t0 = all[0]!;
    const counts: number[] = [];
    for (const g of all) {
      const k = Number((g - t0) / w);
      counts[k] = (counts[k] ?? 0) + 1;
    }
    const full = counts.slice(0, Math.floor(Number(all[all.length - 1]! - t0) / (windowMs * 1000)));
    const mean = full.reduce((a, b) => a + b, 0) / Math.max(1, full.length);
    process.stdout.write(
      [
        `limit ${limit} per ${windowMs} ms, ${REPLICAS} replicas (processes) × ${LOOPS_PER_REPLICA} callers, ${SECONDS} s`,
        `  grants: ${all.length} (per replica: ${per.map((p) => p.length).join(' / ')})`,
        `  grants per full window: ${full.join(' ')}`,
        `  mean per window: ${mean.toFixed(2)} of ${limit} = ${(mean / limit).toFixed(3)} of the budget (target ≥ 0.9)`,
        `  max in any sliding ${windowMs} ms window (database clock): ${maxSliding} (limit ${limit}) ${maxSliding <= limit ? 'OK' : 'OVER THE LIMIT'}`,
        '',
      ].join('\n'),
    );
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

if (process.env['BENCH_ROLE'] === 'replica') {
  await replica();
} else {
  const base = benchPgUrl();
  await scenario(base, 20, 1_000);
  await scenario(base, 100, 1_000);
}
