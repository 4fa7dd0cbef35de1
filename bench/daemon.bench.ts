/**
 * The daemon's memory at rest: `run` (the built dist/main.js, as a bank runs it) boards a small
 * sandbox queue with the webhook receiver and the admin listener up, then sits idle; its resident
 * set is sampled from /proc while idle. Goal: idle RSS < 120 MB. Prints the figures; never fails on
 * them. BENCH_DAEMON_IDLE_SECONDS (default 20) sets the idle sampling window.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startTestPlatform, writeConnectorConfig } from '../test/integration/pipeline/harness.js';

const LOANS = 30;
const IDLE_S = Number(process.env['BENCH_DAEMON_IDLE_SECONDS'] ?? 20);
const GOAL_MB = 120;

function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number | null {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

const mb = (kb: number): string => (kb / 1024).toFixed(1);

async function main(): Promise<void> {
  const build = spawnSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' });
  if (build.status !== 0) throw new Error('npm run build failed');
  const p = await startTestPlatform({ loans: LOANS, releaseRatio: 1, seed: 5 });
  const cfg = writeConnectorConfig(p, {
    windowMs: 60_000,
    readsPerWindow: 300,
    writesPerWindow: 100,
    extra: {
      schedule: { drain: '*/5 * * * * *' },
      webhooks: {
        host: '127.0.0.1',
        port: 0,
        secrets: [`whsec_${Buffer.from('bench-secret-bench-secret-32byte').toString('base64')}`],
      },
      log: { level: 'warn' },
    },
  });
  const child = spawn(
    process.execPath,
    [join(process.cwd(), 'dist/main.js'), 'run', '--config', cfg.configPath],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const pid = child.pid as number;
  try {
    const deadline = Date.now() + 180_000;
    let acked = 0;
    while (acked < LOANS) {
      if (Date.now() > deadline) throw new Error(`only ${acked}/${LOANS} loans acknowledged after 180 s`);
      if (child.exitCode !== null) throw new Error(`the daemon exited with ${child.exitCode}`);
      await new Promise((r) => setTimeout(r, 500));
      acked = Object.keys((await p.counters()).acks).length;
    }
    const samples: number[] = [];
    const until = Date.now() + IDLE_S * 1000;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 500));
      const kb = statusKb(pid, 'VmRSS');
      if (kb !== null) samples.push(kb);
    }
    samples.sort((a, b) => a - b);
    const median = samples[Math.floor(samples.length / 2)] ?? 0;
    const max = samples[samples.length - 1] ?? 0;
    const hwm = statusKb(pid, 'VmHWM') ?? 0;
    process.stdout.write(
      `daemon (run: queue drain every 5 s, webhook receiver + admin listener up) after boarding ${acked} loans, idle ${IDLE_S} s:\n` +
        `  RSS median ${mb(median)} MB, max ${mb(max)} MB (goal < ${GOAL_MB} MB: ${max / 1024 < GOAL_MB ? 'met' : 'NOT met'}); peak since start ${mb(hwm)} MB\n`,
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await p.close();
    rmSync(cfg.dir, { recursive: true, force: true });
  }
}

await main();
