import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import {
  loanStates,
  MAIN,
  slidingWindowReport,
  startFailoverSet,
  startPgServer,
  until,
  type FailoverSet,
  type PgServer,
  type Replica,
} from '../support/failover.js';
import { expectExactlyOnce, gauge, readyzWhen, report } from './support/harness.js';

/**
 * Clock skew (issue 37): two `run` replicas on one PostgreSQL, one with its clock 3 minutes ahead
 * and one 2 minutes behind (Debian's libfaketime, LD_PRELOAD), the file core cutting a batch every
 * minute. Leadership and the shared rate budget decide on the database's clock, so: one leader at a
 * time (the leader is killed mid-run and the other, minutes apart, takes over), the key within its
 * limit in every sliding window of the sandbox's (true) clock, 0 × 429, every loan boarded once and
 * in exactly one sealed batch. The skew is reported: /readyz (check `clock`), /metrics
 * (boarding_clock_offset_seconds) and `config check --connect` (store.clock). Skipped, with the
 * reason, without libfaketime (scripts/ci-faults-setup.sh installs it).
 */
const LEASE = { ttlMs: 4000, renewEveryMs: 1000 };
const RATE = { windowMs: 2000, readsPerWindow: 40, writesPerWindow: 10 };
const LOANS = Number(process.env['FAULTS_SKEW_LOANS'] ?? 60);
const SKEWS: Record<string, number> = { a: 180, b: -120 };

const lib = spawnSync('sh', ['-c', 'ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n 1'], {
  encoding: 'utf8',
}).stdout.trim();
const server: PgServer | { skip: string } | null = lib === '' ? null : startPgServer();
const skip =
  lib === ''
    ? 'libfaketime not installed (Debian package faketime; scripts/ci-faults-setup.sh installs it as root)'
    : server !== null && 'skip' in server
      ? server.skip
      : null;
if (skip) process.stderr.write(`\n[faults: clock skew] SKIPPED: ${skip}\n\n`);
const pg = server as PgServer;
let set: FailoverSet | null = null;
afterAll(async () => {
  await set?.close().catch(() => undefined);
  if (!skip) pg.destroy();
});

/** Starts a replica under libfaketime: its clock `seconds` off (the environment is copied when the child is spawned). */
function startSkewed(r: Replica, seconds: number): void {
  const saved = { LD_PRELOAD: process.env['LD_PRELOAD'], FAKETIME: process.env['FAKETIME'] };
  process.env['LD_PRELOAD'] = lib;
  process.env['FAKETIME'] = `${seconds >= 0 ? '+' : ''}${seconds}s`;
  try {
    r.start();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

function configCheck(
  configPath: string,
  seconds: number,
  replicaEnv: Record<string, string>,
): Promise<{ code: number | null; stdout: string }> {
  const child = spawn(process.execPath, [MAIN, 'config', 'check', '--connect', '--config', configPath], {
    stdio: ['ignore', 'pipe', 'ignore'],
    // As the replicas run: the store's password from the environment (BOARDING_STORE_PASSWORD).
    env: {
      ...process.env,
      ...replicaEnv,
      LD_PRELOAD: lib,
      FAKETIME: `${seconds >= 0 ? '+' : ''}${seconds}s`,
      LOG_LEVEL: 'error',
    },
  });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout })));
}

describe.skipIf(skip !== null)('clock skew between replicas', () => {
  it('one replica 3 min ahead, one 2 min behind: one leader, the budget and batches right, the skew reported', async () => {
    if (!existsSync(MAIN))
      throw new Error('dist/main.js missing: run `npm run test:faults` (it builds first)');
    const s = await startFailoverSet({ pg, loans: LOANS, seed: 5, ...RATE, leadership: LEASE });
    set = s;
    const ctx = `clock skew (logs in ${s.logDir})`;
    // Batches cut every minute, on the leader's clock.
    const cfg = parse(readFileSync(s.configPath, 'utf8')) as { core: { file: Record<string, unknown> } };
    cfg.core.file['batch'] = { intervalMinutes: 1 };
    writeFileSync(s.configPath, stringify(cfg));
    const [a, b] = s.replicas as [Replica, Replica];
    startSkewed(a, SKEWS['a']!);
    await until(
      `${ctx}: a leads`,
      async () => ((await a.readyz())?.role === 'leader' ? true : undefined),
      30_000,
      100,
    );
    startSkewed(b, SKEWS['b']!);

    // The skew is reported by each replica.
    for (const r of [a, b]) {
      const z = await readyzWhen(
        r,
        `${ctx}: ${r.name} reports its skew`,
        (x) => x.checks['clock'] !== undefined,
        30_000,
      );
      expect(z.checks['clock'], `${ctx}: /readyz of ${r.name}`).toMatchObject({
        ok: false,
        detail: expect.stringMatching(
          SKEWS[r.name]! > 0
            ? /^CLOCK SKEW: this host's clock is 3\.0 min ahead of the database's/
            : /^CLOCK SKEW: this host's clock is 2\.0 min behind the database's/,
        ),
      });
      const off = gauge((await r.metrics()) ?? '', 'boarding_clock_offset_seconds');
      expect(
        Math.abs((off ?? 0) + SKEWS[r.name]!),
        `${ctx}: boarding_clock_offset_seconds of ${r.name} = ${off}`,
      ).toBeLessThan(5);
    }

    // Leadership moves from the clock ahead to the clock behind, mid-run.
    await until(
      `${ctx}: 20 acknowledged`,
      async () => ((await s.acked()) >= 20 ? true : undefined),
      120_000,
      50,
    );
    const killAt = Date.now();
    a.signal('SIGKILL');
    await a.exited();
    await until(
      `${ctx}: b takes over`,
      async () => ((await b.readyz())?.role === 'leader' ? true : undefined),
      30_000,
      100,
    );
    const takeoverAck = await until(
      `${ctx}: b acknowledges`,
      () => s.firstAckSince(killAt).then((t) => t ?? undefined),
      60_000,
      100,
    );
    startSkewed(a, SKEWS['a']!);
    await until(
      `${ctx}: all ${LOANS} acknowledged`,
      async () => ((await s.acked()) >= LOANS ? true : undefined),
      300_000,
      200,
    );
    await until(
      `${ctx}: every loan settled`,
      async () => ((await loanStates(pg, s.dbUrl))['acknowledged'] === LOANS ? true : undefined),
      60_000,
      200,
    );
    const roles = [await a.readyz(), await b.readyz()].map((z) => z?.role);
    expect(
      roles.filter((r) => r === 'leader'),
      `${ctx}: one leader (${JSON.stringify(roles)})`,
    ).toHaveLength(1);

    // config check --connect on a skewed host says so (and fails).
    const check = await configCheck(s.configPath, SKEWS['a']!, { BOARDING_STORE_PASSWORD: pg.password });
    expect(check.code, `${ctx}: config check --connect exit\n${check.stdout}`).toBe(1);
    expect(check.stdout, ctx).toMatch(
      /FAIL\s+store\.clock\s+this host's clock is 3\.0 min ahead of the database's/,
    );

    for (const r of [a, b]) r.signal('SIGTERM');
    for (const r of [a, b])
      expect(await r.exited(), `${ctx}: ${r.name} stops on SIGTERM`).toEqual({ code: 0, signal: null });
    const log = await s.requests();
    const windows = slidingWindowReport(log);
    for (const w of windows)
      expect(
        w.maxInWindow,
        `${ctx}: ${w.bucket} requests in one ${RATE.windowMs} ms window (sandbox clock)`,
      ).toBeLessThanOrEqual(w.limit);
    await expectExactlyOnce(s, ctx);
    // (Log times are each host's skewed clock: the epochs, from the database, order the terms.)
    const epochs = [...a.events, ...b.events]
      .filter((e) => e.kind === 'acquired')
      .sort((x, y) => (x.epoch ?? 0) - (y.epoch ?? 0));
    report('clock skew', {
      loans: LOANS,
      skewsS: SKEWS,
      recoveryMs: takeoverAck - killAt,
      acquisitions: epochs.map((e) => e.epoch),
      windows: windows.map((w) => ({ bucket: w.bucket, max: w.maxInWindow, limit: w.limit })),
    });
  });
});
