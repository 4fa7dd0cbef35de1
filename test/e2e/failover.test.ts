import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { safeId } from '../../src/core/safe-name.js';
import {
  coreRecords,
  loanStates,
  median,
  rng,
  sealOpenBatches,
  sleep,
  slidingWindowReport,
  startFailoverSet,
  startPgServer,
  until,
  type FailoverSet,
  type PgServer,
  type Replica,
} from '../support/failover.js';

/**
 * High availability (issue 26): two `run` replicas on one PostgreSQL state store against the
 * sandbox (rate limiter on, a 2 s window), one file core. Four faults, each in its own run:
 * a. the leader SIGKILLed at random moments (seeded: FAILOVER_SEED replays a run), restarted;
 * b. the leader SIGSTOPped past its lease, then SIGCONTed: it steps down, its late writes change nothing;
 * c. the leader's database connections terminated (pg_terminate_backend) mid-run;
 * d. PostgreSQL restarted mid-run.
 * Each ends the same way: every released loan acknowledged once (no duplicate ack), exactly one
 * package and one first-board batch line per loan in the core, 0 × 429, and the key's traffic
 * within the limit in every sliding window of the documented length (the sandbox's request log).
 * The lease is short here (TTL 4 s, renew 1 s) to keep the suite fast; the takeover time at the
 * defaults (15 s / 5 s) is what `npm run bench -- failover` measures.
 */

const LEASE = { ttlMs: 4000, renewEveryMs: 1000 };
const RATE = { windowMs: 2000, readsPerWindow: 40, writesPerWindow: 10 };
const SEED = Number(process.env['FAILOVER_SEED'] ?? Date.now() % 1_000_000);
const TAKEOVER_TARGET_MS = 30_000;

const server: PgServer | { skip: string } = startPgServer();
const skip = 'skip' in server ? server.skip : null;
if (skip) process.stderr.write(`\n[failover suite] SKIPPED: ${skip}\n\n`);
const pgServer = server as PgServer;

const sets: FailoverSet[] = [];
afterAll(async () => {
  for (const s of sets) await s.close().catch(() => undefined);
  if (!skip) pgServer.destroy();
});

async function leaderOf(
  set: FailoverSet,
  what: string,
  timeoutMs = 30_000,
): Promise<{ replica: Replica; epoch: number }> {
  return until(
    what,
    async () => {
      const l = await set.leader();
      if (!l) return undefined;
      const z = await l.readyz();
      return z?.role === 'leader' && typeof z.epoch === 'number' ? { replica: l, epoch: z.epoch } : undefined;
    },
    timeoutMs,
    100,
  );
}

async function ackedAtLeast(set: FailoverSet, n: number, what: string, timeoutMs = 60_000): Promise<number> {
  return until(
    what,
    async () => {
      const a = await set.acked();
      return a >= n ? a : undefined;
    },
    timeoutMs,
    50,
  );
}

async function startSet(loans: number, label: string): Promise<FailoverSet> {
  const set = await startFailoverSet({ pg: pgServer, loans, seed: SEED % 1000, ...RATE, leadership: LEASE });
  sets.push(set);
  expect(set.released, label).toHaveLength(loans);
  for (const r of set.replicas) r.start();
  return set;
}

/** Every scenario's end: all boarded, once; then a graceful stop and the checks on what happened. */
async function finishAndCheck(set: FailoverSet, label: string): Promise<Record<string, unknown>> {
  const n = set.released.length;
  const ctx = `${label} (seed ${SEED}, logs in ${set.logDir})`;
  await ackedAtLeast(set, n, `${ctx}: all ${n} loans acknowledged`, 120_000);
  await until(
    `${ctx}: every loan settled in the store`,
    async () => ((await loanStates(pgServer, set.dbUrl))['acknowledged'] === n ? true : undefined),
    60_000,
    200,
  );
  expect(await loanStates(pgServer, set.dbUrl), ctx).toEqual({ acknowledged: n });
  const { replica: leader, epoch } = await leaderOf(set, `${ctx}: a leader at the end`);
  // What operators and load balancers script against: one leader, every healthy standby ready
  // (it takes webhooks), and the same view in /metrics.
  for (const r of set.replicas) {
    const z = await r.readyz();
    const m = (await r.metrics()) ?? '';
    const gauge = (name: string): number | null => {
      const hit = new RegExp(`^${name} (\\S+)$`, 'm').exec(m);
      return hit ? Number(hit[1]) : null;
    };
    if (r === leader) {
      expect(z, `${ctx}: /readyz of the leader ${r.name}`).toMatchObject({
        ready: true,
        role: 'leader',
        epoch,
      });
      expect(
        [gauge('boarding_leader'), gauge('boarding_leader_epoch')],
        `${ctx}: /metrics of the leader ${r.name}`,
      ).toEqual([1, epoch]);
      expect(gauge('boarding_leadership_acquisitions_total'), ctx).toBeGreaterThanOrEqual(1);
    } else {
      expect(z, `${ctx}: /readyz of the standby ${r.name}`).toMatchObject({ ready: true, role: 'standby' });
      expect(gauge('boarding_leader'), `${ctx}: /metrics of the standby ${r.name}`).toBe(0);
    }
  }
  // A graceful stop: the leader hands over, the other takes it and stops too; both exit 0.
  for (const r of set.replicas) r.signal('SIGTERM');
  for (const r of set.replicas)
    expect(await r.exited(), `${ctx}: replica ${r.name} stops on SIGTERM`).toEqual({ code: 0, signal: null });

  const c = await set.platform.counters();
  expect(c.rateLimited, `${ctx}: 429s`).toBe(0);
  expect(c.duplicateAcks, ctx).toEqual({});
  for (const id of set.released) expect(c.acks[id], `${ctx}: acks of ${id}`).toBe(1);

  const seal = await sealOpenBatches(set.configPath, set.replicas[0]?.env ?? {});
  expect(seal.code, `${ctx}: batches seal: ${seal.stderr}`).toBe(0);
  const core = coreRecords(set.coreDir);
  expect(core.packages, `${ctx}: one package per loan`).toEqual([...set.released].map(safeId).sort());
  expect([...core.firstBoardLines.keys()].sort(), `${ctx}: every loan in a sealed batch`).toEqual(
    [...set.released].sort(),
  );
  expect(
    [...core.firstBoardLines].filter(([, k]) => k !== 1),
    `${ctx}: loans with two first-board records`,
  ).toEqual([]);

  const windows = slidingWindowReport(await set.requests());
  for (const w of windows)
    expect(
      w.maxInWindow,
      `${ctx}: ${w.bucket} requests in one ${RATE.windowMs} ms sliding window (at ${w.at})`,
    ).toBeLessThanOrEqual(w.limit);
  return {
    loans: n,
    batches: core.batches,
    windows: windows.map((w) => ({ bucket: w.bucket, max: w.maxInWindow, limit: w.limit, total: w.total })),
    replays: c.idempotentReplays,
  };
}

describe.skipIf(skip !== null)('failover: two replicas on PostgreSQL', () => {
  it('a. SIGKILL of the leader at random moments: the standby takes over and boards the rest, once', async () => {
    if (!existsSync('dist/main.js'))
      throw new Error('dist/main.js missing: run `npm run test:e2e` (it builds first)');
    const random = rng(SEED);
    const KILLS = 3;
    const set = await startSet(90, 'kill');
    const kills: Array<{
      victim: string;
      afterAcks: number;
      delayMs: number;
      takeoverMs: number;
      epochs: [number, number];
    }> = [];
    for (let i = 0; i < KILLS; i++) {
      const { replica: victim, epoch } = await leaderOf(
        set,
        `kill ${i}: a leader (seed ${SEED}, logs in ${set.logDir})`,
      );
      const before = await set.acked();
      const afterAcks = 1 + Math.floor(random() * 4);
      const delayMs = Math.floor(random() * 400);
      await ackedAtLeast(
        set,
        before + afterAcks,
        `kill ${i}: leader ${victim.name} acknowledges ${afterAcks} (seed ${SEED}, logs in ${set.logDir})`,
      );
      // The random delay is the fault: it puts the kill anywhere in the next loans' steps.
      await sleep(delayMs);
      const killAt = Date.now();
      victim.signal('SIGKILL');
      expect((await victim.exited()).signal).toBe('SIGKILL');
      expect(await set.acked(), `kill ${i} landed with loans waiting (seed ${SEED})`).toBeLessThan(
        set.released.length,
      );
      const ackAt = await until(
        `kill ${i}: the standby's first acknowledgement (seed ${SEED}, logs in ${set.logDir})`,
        () => set.firstAckSince(killAt).then((t) => t ?? undefined),
        60_000,
        100,
      );
      const { replica: next, epoch: nextEpoch } = await leaderOf(set, `kill ${i}: the new leader`);
      expect(next).not.toBe(victim);
      expect(nextEpoch).toBeGreaterThan(epoch);
      kills.push({
        victim: victim.name,
        afterAcks,
        delayMs,
        takeoverMs: ackAt - killAt,
        epochs: [epoch, nextEpoch],
      });
      // The killed replica comes back, as its supervisor restarts it: now the standby.
      victim.start();
      await until(
        `replica ${victim.name} back as standby`,
        async () => ((await victim.readyz())?.role === 'standby' ? true : undefined),
        30_000,
        100,
      );
    }
    const takeovers = kills.map((k) => k.takeoverMs);
    for (const k of kills)
      expect(k.takeoverMs, `kill → first ack of the standby (seed ${SEED})`).toBeLessThanOrEqual(
        TAKEOVER_TARGET_MS,
      );
    const summary = await finishAndCheck(set, 'kill');
    console.log(
      JSON.stringify({
        scenario: 'a. SIGKILL',
        seed: SEED,
        lease: LEASE,
        kills,
        takeoverMs: { min: Math.min(...takeovers), median: median(takeovers), max: Math.max(...takeovers) },
        ...summary,
      }),
    );
  });

  it('b. SIGSTOP of the leader past its lease, then SIGCONT: it steps down and its late writes change nothing', async () => {
    const set = await startSet(60, 'stop');
    const { replica: paused, epoch } = await leaderOf(
      set,
      `stop: a leader (seed ${SEED}, logs in ${set.logDir})`,
    );
    await ackedAtLeast(set, (await set.acked()) + 3, `stop: leader ${paused.name} acknowledges 3`);
    const stopAt = Date.now();
    paused.signal('SIGSTOP');
    const { replica: next, epoch: nextEpoch } = await leaderOf(
      set,
      `stop: the standby takes over while ${paused.name} is stopped (logs in ${set.logDir})`,
      30_000,
    );
    expect(next).not.toBe(paused);
    expect(nextEpoch).toBeGreaterThan(epoch);
    // The new leader boards while the old one is still stopped. Not timed against a target: each
    // write transaction the stopped process had started or queued for the shared write lock holds
    // that lock in turn until the server's idle timeout ends it (see the bench's SIGSTOP figure).
    const takeoverAckAt = await until(
      `stop: the new leader acknowledges while ${paused.name} is stopped (logs in ${set.logDir})`,
      () => set.firstAckSince(stopAt).then((t) => t ?? undefined),
      120_000,
      100,
    );
    // Stopped well past its lease (twice the TTL), with the new leader boarding meanwhile.
    await sleep(Math.max(0, stopAt + 2 * LEASE.ttlMs - Date.now()));
    const lostBefore = paused.events.filter((e) => e.kind === 'lost').length;
    paused.signal('SIGCONT');
    await until(
      `stop: ${paused.name} steps down after SIGCONT (logs in ${set.logDir})`,
      async () => ((await paused.readyz())?.role === 'standby' ? true : undefined),
      30_000,
      100,
    );
    // Its log says so (read as it is written: wait for the line rather than race the pipe).
    await until(
      `stop: ${paused.name} logs 'leadership lost: stepping down'`,
      () => (paused.events.filter((e) => e.kind === 'lost').length > lostBefore ? true : undefined),
      10_000,
    );
    expect((await leaderOf(set, 'stop: still one leader')).replica).toBe(next);
    const summary = await finishAndCheck(set, 'stop');
    console.log(
      JSON.stringify({
        scenario: 'b. SIGSTOP',
        seed: SEED,
        lease: LEASE,
        stoppedMs: 2 * LEASE.ttlMs,
        stopToFirstAckMs: takeoverAckAt - stopAt,
        epochs: [epoch, nextEpoch],
        ...summary,
      }),
    );
  });

  it("c. the leader's database connections terminated mid-run: boarding goes on, nothing twice", async () => {
    const set = await startSet(60, 'terminate');
    const terminations: Array<{ leader: string; backends: number }> = [];
    for (let i = 0; i < 3; i++) {
      const { replica: leader } = await leaderOf(
        set,
        `terminate ${i}: a leader (seed ${SEED}, logs in ${set.logDir})`,
      );
      await ackedAtLeast(
        set,
        (await set.acked()) + 2,
        `terminate ${i}: leader ${leader.name} acknowledges 2`,
      );
      const killed = await pgServer.terminateBackendsOf(leader.pid!, set.dbUrl);
      terminations.push({ leader: leader.name, backends: killed.length });
    }
    expect(
      terminations.every((t) => t.backends > 0),
      JSON.stringify(terminations),
    ).toBe(true);
    const summary = await finishAndCheck(set, 'terminate');
    console.log(
      JSON.stringify({ scenario: 'c. pg_terminate_backend', seed: SEED, terminations, ...summary }),
    );
  });

  it('d. PostgreSQL restarted mid-run: the leader stops at its deadline, boarding resumes when the database returns', async () => {
    const set = await startSet(60, 'restart');
    const { replica: leader } = await leaderOf(
      set,
      `restart: a leader (seed ${SEED}, logs in ${set.logDir})`,
    );
    await ackedAtLeast(set, (await set.acked()) + 3, `restart: leader ${leader.name} acknowledges 3`);
    const downAt = Date.now();
    pgServer.stop();
    // Down for longer than the lease: the leader must stop trusting it and make no call after its deadline.
    await sleep(LEASE.ttlMs + 2000);
    const upAt = Date.now();
    pgServer.start();
    const acksWhileDown = (await set.requests(downAt + LEASE.ttlMs)).data.filter(
      (e) => e.at < upAt && e.route === 'POST /public/v1/loans/:id/boarding',
    );
    expect(acksWhileDown, 'acknowledgements after the trust deadline while the database was down').toEqual(
      [],
    );
    const resumedAt = await until(
      `restart: boarding resumes (logs in ${set.logDir})`,
      () => set.firstAckSince(upAt).then((t) => t ?? undefined),
      60_000,
      100,
    );
    const summary = await finishAndCheck(set, 'restart');
    console.log(
      JSON.stringify({
        scenario: 'd. PostgreSQL restart',
        seed: SEED,
        downMs: upAt - downAt,
        upToFirstAckMs: resumedAt - upAt,
        ...summary,
      }),
    );
  });
});
