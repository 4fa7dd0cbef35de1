/**
 * `state migrate` (src/store/migrations/copy-sqlite-to-pg.ts) as the state grows: an SQLite state of N loans (each
 * with a ~1 KB queue item, 3 events and an idempotency key) is copied into a fresh PostgreSQL
 * database and verified (counts and digests of every table). Each size runs in its own process;
 * it prints the seconds of the copy and of the verification and the resident set size before the
 * copy and at its peak (sampled every 20 ms). Target: the peak does not grow with N (rows are
 * streamed, never all in memory). Never fails on figures.
 *
 *   BENCH_MIGRATE_LOANS  comma-separated sizes (default "10000,100000")
 *   PostgreSQL: BOARDING_TEST_PG_URL when set, else scripts/pg-test-server.sh starts the throwaway one.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openDatabase } from '../src/store/sqlite/db.js';
import {
  compareDigests,
  copyTables,
  digestPostgres,
  digestSqlite,
  inSqliteSnapshot,
  planTables,
} from '../src/store/migrations/copy-sqlite-to-pg.js';
import { openStore } from '../src/store/open.js';
import { benchPgClient, benchPgStore, benchPgUrl } from './pg-server.js';

const mb = (b: number): string => `${(b / 1024 / 1024).toFixed(0)} MB`;

async function one(n: number, base: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-migrate-'));
  const src = openDatabase(join(dir, 'state.sqlite'));
  const item = JSON.stringify({ loan: { terms: 'x'.repeat(900) } });
  const insLoan = src.prepare(
    "INSERT INTO loans (id, loan_number, state, queue_item, cents_amount, created_at, updated_at) VALUES (?, ?, 'acknowledged', ?, ?, ?, ?)",
  );
  const insEvent = src.prepare(
    "INSERT INTO loan_events (loan_id, at, kind, from_state, to_state) VALUES (?, ?, 'transition', ?, ?)",
  );
  const insKey = src.prepare(
    "INSERT INTO idempotency_keys (key, loan_id, operation, created_at) VALUES (?, ?, 'ack', ?)",
  );
  src.transaction(() => {
    for (let i = 0; i < n; i++) {
      const id = `L${i.toString().padStart(7, '0')}`;
      insLoan.run(id, `N${i}`, item, 100_000 + i, i, i);
      insEvent.run(id, i, null, 'queued');
      insEvent.run(id, i + 1, 'queued', 'written');
      insEvent.run(id, i + 2, 'written', 'acknowledged');
      insKey.run(`ack:${id}`, id, i);
    }
  })();
  const name = `bench_migrate_${process.pid}`;
  const admin = new pg.Client(benchPgClient(base, 'fixture'));
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} OWNER boarding`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  try {
    global.gc?.();
    const before = process.memoryUsage().rss;
    const target = await openStore(benchPgStore(u.toString()).target);
    const plans = await planTables(src, target);
    const t0 = performance.now();
    let t1 = 0;
    const result = await inSqliteSnapshot(src, async () => {
      await target.write(() => copyTables(src, target, plans));
      t1 = performance.now();
      return compareDigests(plans, digestSqlite(src, plans), await digestPostgres(target, plans));
    });
    const t2 = performance.now();
    await target.close();
    const rows = result.reduce((s, r) => s + r.sqlite.rows, 0);
    process.stdout.write(
      `loans ${n}: ${rows} rows; copy ${((t1 - t0) / 1000).toFixed(1)} s, verify ${((t2 - t1) / 1000).toFixed(1)} s; ` +
        `rss before ${mb(before)}, peak ${mb(Math.max(peak, process.memoryUsage().rss))}; ${result.every((r) => r.same) ? 'identical' : 'DIFFERS'}\n`,
    );
  } finally {
    clearInterval(sampler);
    src.close();
    rmSync(dir, { recursive: true, force: true });
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const size = process.argv[2];
if (size !== undefined) {
  await one(Number(size), process.env['BOARDING_TEST_PG_URL']!);
} else {
  const base = benchPgUrl();
  const sizes = (process.env['BENCH_MIGRATE_LOANS'] ?? '10000,100000')
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((x) => Number.isInteger(x) && x > 0);
  for (const n of sizes) {
    const r = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), String(n)], {
      stdio: 'inherit',
      env: { ...process.env, BOARDING_TEST_PG_URL: base },
    });
    if (r.status !== 0) process.exitCode = 1;
  }
}
