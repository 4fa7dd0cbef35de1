/**
 * The kill -9 loop the crash tests share (test/e2e/crash-*.test.ts): a sandbox platform with
 * repeat borrowers and lost acknowledgement answers, the daemon (dist/main.js) SIGKILLed at random
 * moments, then run to the end. The core (its faults, its config block, what it must hold at the
 * end) is the caller's; this helper asserts what every core shares: every loan settled
 * acknowledged, acknowledged exactly once, nothing rate limited.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, vi } from 'vitest';
import {
  startTestPlatform,
  writeConnectorConfig,
  type TestPlatform,
} from '../integration/pipeline/harness.js';
import { rng } from './failover.js';

export const CRASH_MAIN = join(process.cwd(), 'dist/main.js');

const RATES = { windowMs: 1000, readsPerWindow: 40, writesPerWindow: 10 };

export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
}

export interface CrashPlatform {
  p: TestPlatform;
  /** Platform ids of the released loans. */
  released: string[];
  /** Where each run's log goes. */
  logDir: string;
}

/** A sandbox with `loans` released loans, repeat borrowers (0.4) and the crash tests' rate limits. */
export async function startCrashPlatform(o: {
  loans: number;
  seed: number;
  name: string;
}): Promise<CrashPlatform> {
  if (!existsSync(CRASH_MAIN))
    throw new Error('dist/main.js missing: run `npm run test:e2e` (it builds first)');
  const p = await startTestPlatform({
    loans: o.loans,
    releaseRatio: 1,
    seed: o.seed,
    repeatBorrowers: 0.4,
    ...RATES,
  });
  const list = (await p.admin('GET', '/loans?released=true')) as { data: Array<{ id: string }> };
  return {
    p,
    released: list.data.map((l) => l.id),
    logDir: mkdtempSync(join(tmpdir(), `crash-${o.name}-logs-`)),
  };
}

export interface CrashLoopResult {
  seed: number;
  kills: Array<{ afterAcks: number; delayMs: number; acksAtKill: number }>;
  /** The connector config the runs used (its state database, for the caller's own checks). */
  cfg: { dir: string; configPath: string; dbPath: string };
}

/**
 * Writes the connector config (`core` block and mapping set given), loses 15% of the
 * acknowledgement answers after commit, SIGKILLs the daemon `kills` times once it acknowledged
 * 1–3 more loans (plus 0–150 ms), then runs it until every loan settled and stops it with SIGTERM.
 * Asserts every loan acknowledged (none quarantined or skipped), each acknowledged exactly once
 * on the platform, nothing rate limited. `children` collects the live daemons for afterAll.
 */
export async function runCrashLoop(
  cp: CrashPlatform,
  o: {
    core: Record<string, unknown>;
    mappingsDir: string;
    kills: number;
    seed: number;
    children: Set<ChildProcess>;
    /** More top-level config blocks (e.g. `imaging`). */
    extra?: Record<string, unknown>;
  },
): Promise<CrashLoopResult> {
  const { p, released, logDir } = cp;
  const total = released.length;
  const { seed, children } = o;
  const random = rng(seed);
  await p.setFaults([{ route: 'POST /public/v1/loans/:id/boarding', resetAfterCommitRate: 0.15 }], seed);
  const cfg = writeConnectorConfig(p, {
    ...RATES,
    mappingsDir: o.mappingsDir,
    extra: {
      core: o.core,
      customers: { tinHashKey: 'crash-test-key-0123456789' },
      schedule: { drain: '*/1 * * * * *' },
      boarding: {
        concurrency: 4,
        retryBaseMs: 100,
        retryMaxMs: 500,
        maxAttempts: 50,
        shutdownTimeoutMs: 5000,
        documentHosts: { allow: ['127.0.0.1'] },
      },
      webhooks: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      log: { level: 'info' },
      ...o.extra,
    },
  });

  let run = 0;
  const start = (): ChildProcess => {
    run += 1;
    const child = spawn(process.execPath, [CRASH_MAIN, 'run', '--config', cfg.configPath], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'info' },
    });
    child.stderr?.pipe(createWriteStream(join(logDir, `run-${run}.log`)));
    children.add(child);
    child.once('exit', () => children.delete(child));
    return child;
  };
  const acked = async (): Promise<number> => Object.keys((await p.counters()).acks).length;
  const kills: CrashLoopResult['kills'] = [];
  for (let i = 0; i < o.kills; i++) {
    const before = await acked();
    const child = start();
    const wantAcks = 1 + Math.floor(random() * 3);
    const delayMs = Math.floor(random() * 150);
    await vi.waitFor(
      async () =>
        expect(
          await acked(),
          `run ${run} to acknowledge ${wantAcks} loan(s) (logs in ${logDir})`,
        ).toBeGreaterThanOrEqual(Math.min(total, before + wantAcks)),
      { timeout: 60_000, interval: 25 },
    );
    await new Promise((r) => setTimeout(r, delayMs));
    child.kill('SIGKILL');
    expect((await exited(child)).signal).toBe('SIGKILL');
    kills.push({ afterAcks: wantAcks, delayMs, acksAtKill: await acked() });
  }
  expect(
    kills.every((k) => k.acksAtKill < total),
    JSON.stringify({ seed, kills }),
  ).toBe(true);

  const last = start();
  const db = new Database(cfg.dbPath, { readonly: true, fileMustExist: true });
  try {
    await vi.waitFor(
      () => {
        const r = db
          .prepare(
            "SELECT COUNT(*) AS n FROM loans WHERE state IN ('acknowledged', 'quarantined', 'skipped')",
          )
          .get() as { n: number };
        expect(r.n, `all ${total} loans settled (seed ${seed}, logs in ${logDir})`).toBe(total);
      },
      { timeout: 120_000, interval: 25 },
    );
    expect(
      db
        .prepare("SELECT id, state, last_error_message AS error FROM loans WHERE state <> 'acknowledged'")
        .all(),
      'every loan acknowledged',
    ).toEqual([]);
  } finally {
    db.close();
  }
  last.kill('SIGTERM');
  expect(await exited(last)).toEqual({ code: 0, signal: null });

  const c = await p.counters();
  expect(c.rateLimited).toBe(0);
  expect(c.duplicateAcks).toEqual({});
  for (const id of released) expect(c.acks[id], `${id} (seed ${seed})`).toBe(1);
  return { seed, kills, cfg };
}

/** CRASH_SEED from the environment, else one from the clock (printed by the tests). */
export function crashSeed(): number {
  return Number(process.env['CRASH_SEED'] ?? Date.now() % 1_000_000);
}
