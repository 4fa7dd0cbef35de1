/**
 * Peak memory of `sync --once` as the work grows: the built CLI runs as a child process against a
 * sandbox (itself another child process, so its memory is not counted) holding N released loans,
 * and its peak resident set size is read from `/usr/bin/time -v` ("Maximum resident set size").
 *
 *   BENCH_MEMORY_LOANS   comma-separated sizes (default "3000,30000")
 *   BENCH_MEMORY_BUILD   0 to skip `npm run build` (dist/ must be current)
 *   BENCH_MEMORY_NODE_ARGS  node options for the measured `sync --once` (e.g. "--max-old-space-size=112");
 *                        default none. BOARDING_HEAP_GROWTH_PERCENT is passed through (src/lib/heap.ts).
 *   BENCH_MEMORY_RECONCILE_LOANS  loans of the reconciliation measured last (bench/reconcile.bench.ts,
 *                        default 100000; 0 skips it)
 *
 * Target (issue 24): the peak for 30,000 loans within 10 % of the peak for 3,000, and under 200 MB;
 * the nightly reconciliation of `run` at 100,000 loans fits in the same.
 * The sandbox's rate window is set so that the budget, not the clock, is never what limits the run
 * (1 s windows, large budgets); the connector is configured with the same budget. Never fails on
 * figures: it prints them.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { READS, WINDOW_MS, WRITES, startSandboxProcess, stop } from './sync-once.js';

const SIZES = (process.env['BENCH_MEMORY_LOANS'] ?? '3000,30000')
  .split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n) && n > 0);
const IO_EXPR = `expr: 'paymentFrequency = "irregular payments" ? null : $interestOnlyPeriods(monthsInterestOnly, paymentFrequency)'`;
const TIME = '/usr/bin/time';
const NODE_ARGS = (process.env['BENCH_MEMORY_NODE_ARGS'] ?? '').split(' ').filter(Boolean);

interface Measured {
  loans: number;
  peakKb: number;
  seconds: number;
  boarded: number;
  quarantined: number;
  acks: number;
  duplicateAcks: number;
}

async function measure(loans: number): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), 'boarding-mem-'));
  const sandbox = await startSandboxProcess(loans);
  try {
    const mappingsDir = join(dir, 'mappings');
    cpSync(join(process.cwd(), 'mappings/generic'), mappingsDir, { recursive: true });
    const mf = join(mappingsDir, 'mapping.yaml');
    writeFileSync(mf, readFileSync(mf, 'utf8').replace(IO_EXPR, `expr: 'null'`));
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
        store: { path: join(dir, 'state.sqlite') },
        core: { adapter: 'file', file: { dir: join(dir, 'core') } },
        mappings: { dir: mappingsDir },
        // The local sandbox serves documents from loopback: allowed, or loans quarantine instead of boarding.
        boarding: { documentHosts: { allow: ['127.0.0.1'] } },
        reports: { dir: join(dir, 'reports') },
        log: { level: 'warn' },
      }),
    );
    const t0 = performance.now();
    const r = spawnSync(
      TIME,
      [
        '-v',
        process.execPath,
        ...NODE_ARGS,
        'dist/main.js',
        'sync',
        '--once',
        '--json',
        '--config',
        configPath,
      ],
      {
        encoding: 'utf8',
        maxBuffer: 256 * 1024 * 1024,
        env: { ...process.env, BOARDING_CONFIG: configPath },
      },
    );
    const seconds = (performance.now() - t0) / 1000;
    const peak = /Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr ?? '');
    if (!peak)
      throw new Error(`no peak RSS from ${TIME} (exit ${r.status}): ${(r.stderr ?? '').slice(-2000)}`);
    if (r.status !== 0)
      process.stdout.write(
        `  sync --once exited ${r.status}: ${(r.stderr ?? '').split('\n').slice(-30).join('\n')}\n`,
      );
    const lastLine = (r.stdout ?? '').trim().split('\n').pop() ?? '{}';
    const summary = JSON.parse(lastLine) as { acknowledged?: number; quarantined?: Record<string, number> };
    const counters = (await (await fetch(`${sandbox.adminUrl}/counters`)).json()) as {
      acks?: Record<string, number>;
      duplicateAcks?: Record<string, number>;
    };
    return {
      loans,
      peakKb: Number(peak[1]),
      seconds,
      boarded: summary.acknowledged ?? 0,
      quarantined: Object.values(summary.quarantined ?? {}).reduce((a, n) => a + n, 0),
      acks: Object.values(counters.acks ?? {}).reduce((a, n) => a + n, 0),
      duplicateAcks: Object.values(counters.duplicateAcks ?? {}).reduce((a, n) => a + n, 0),
    };
  } finally {
    await stop(sandbox.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Peak RSS of a reconciliation over `loans` loans (bench/reconcile.bench.ts in its own processes). */
function reconcilePeak(loans: number): string {
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', join(process.cwd(), 'bench/reconcile.bench.ts')],
    {
      encoding: 'utf8',
      env: { ...process.env, RECONCILE_BENCH_LOANS: String(loans) },
    },
  );
  const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('reconcile '));
  if (r.status !== 0 || line === undefined)
    return `reconcile bench failed (${r.status ?? r.signal}): ${(r.stderr ?? '').slice(-500)}`;
  return line;
}

async function main(): Promise<void> {
  if (!existsSync(TIME)) {
    console.log(`${TIME} is not installed: cannot read a child's peak RSS; skipped`);
    return;
  }
  if (process.env['BENCH_MEMORY_BUILD'] !== '0') {
    const b = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
    if (b.status !== 0) throw new Error('npm run build failed');
  }
  if (NODE_ARGS.length > 0) console.log(`sync --once runs with node ${NODE_ARGS.join(' ')}`);
  const results: Measured[] = [];
  for (const n of SIZES) {
    const m = await measure(n);
    results.push(m);
    console.log(
      `sync --once over ${m.loans} loans: peak RSS ${(m.peakKb / 1024).toFixed(1)} MB in ${m.seconds.toFixed(1)} s; boarded ${m.boarded}, quarantined ${m.quarantined}; sandbox acks ${m.acks}, duplicate acks ${m.duplicateAcks}`,
    );
  }
  if (results.length >= 2) {
    const small = results[0] as Measured;
    const large = results[results.length - 1] as Measured;
    const ratio = large.peakKb / small.peakKb;
    console.log(
      `peak ${large.loans} ÷ peak ${small.loans}: ${ratio.toFixed(3)}   (target ≤ 1.10); largest peak ${(large.peakKb / 1024).toFixed(1)} MB (target < 200 MB)`,
    );
  }
  const reconcileLoans = Number(process.env['BENCH_MEMORY_RECONCILE_LOANS'] ?? 100_000);
  if (Number.isInteger(reconcileLoans) && reconcileLoans > 0) console.log(reconcilePeak(reconcileLoans));
}

await main();
