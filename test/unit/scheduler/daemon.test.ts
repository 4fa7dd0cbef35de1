import { once } from 'node:events';
import { EventEmitter } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import type { CycleSummary } from '../../../src/pipeline/cycle.js';
import type { BoardingPackage } from '../../../src/core/port.js';
import { createDaemon } from '../../../src/scheduler/daemon.js';
import { ConfigError } from '../../../src/lib/errors.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { PlatformError } from '../../../src/platform/errors.js';
import { fakeLoan } from '../../support/fake-platform.js';
import { fakePipeline } from '../../support/fake-pipeline.js';

const NEVER_CRON = '0 0 1 1 *';

function setup(loans = 3, shutdownTimeoutMs = 5000) {
  const p = fakePipeline();
  for (let i = 1; i <= loans; i++) p.platform.add(fakeLoan(`L${i}`));
  const cycles = new EventEmitter();
  const summaries: CycleSummary[] = [];
  const order: string[] = [];
  const daemon = createDaemon({
    runner: p.runner,
    logger: silentLogger(),
    clock: p.clock,
    drainSchedule: NEVER_CRON,
    shutdownTimeoutMs,
    services: [
      { name: 'a', start: () => void order.push('start a'), stop: () => void order.push('stop a') },
      { name: 'b', start: () => void order.push('start b'), stop: () => void order.push('stop b') },
    ],
    onCycle: (s) => {
      summaries.push(s);
      cycles.emit('cycle', s);
    },
  });
  return { p, daemon, cycles, summaries, order };
}

/** A core whose writes wait until released, so a test can act while a cycle is in flight. */
function gateCore(p: ReturnType<typeof fakePipeline>) {
  const entered = new EventEmitter();
  let open!: () => void;
  const gate = new Promise<void>((r) => {
    open = r;
  });
  const board = p.core.board.bind(p.core);
  p.core.board = async (pkg: BoardingPackage, opts?: { signal?: AbortSignal }) => {
    entered.emit('entered', pkg.loanId);
    await Promise.race([
      gate,
      new Promise((_, reject) =>
        opts?.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
      ),
    ]);
    return board(pkg);
  };
  return { entered, open };
}

describe('daemon', () => {
  it('runs a cycle on start and stops services in reverse order', async () => {
    const { p, daemon, cycles, order } = setup();
    const first = once(cycles, 'cycle');
    await daemon.start();
    const [s] = (await first) as [CycleSummary];
    expect(s.reason).toBe('startup');
    expect(s.acknowledged).toBe(3);
    await daemon.stop();
    expect(order).toEqual(['start a', 'start b', 'stop b', 'stop a']);
    expect(await daemon.done).toEqual({ kind: 'stopped' });
    expect((await p.store.loans.countByState()).acknowledged).toBe(3);
  });

  it('never overlaps cycles: triggers during a cycle collapse into one follow-up', async () => {
    const { p, daemon, cycles, summaries } = setup(2);
    const { entered, open } = gateCore(p);
    const inCore = once(entered, 'entered');
    await daemon.start();
    await inCore;
    for (let i = 0; i < 5; i++) daemon.triggerCycle(`webhook ${i}`);
    p.platform.add(fakeLoan('L9'));
    const two = new Promise<void>((r) => cycles.on('cycle', () => summaries.length === 2 && r()));
    open();
    await two;
    await daemon.idle();
    expect(summaries.map((s) => s.reason)).toEqual(['startup', 'webhook 0']);
    expect((await p.store.loans.countByState()).acknowledged).toBe(3);
    await daemon.stop();
  });

  it('on stop, lets steps in flight finish within the timeout', async () => {
    const { p, daemon } = setup(1);
    const { entered, open } = gateCore(p);
    const inCore = once(entered, 'entered');
    await daemon.start();
    await inCore;
    const stopped = daemon.stop();
    open();
    await stopped;
    expect((await p.store.loans.require('L1')).state).toBe('acknowledged');
  });

  it('on stop, aborts steps still in flight after the timeout; the loan resumes from its persisted state', async () => {
    const { p, daemon } = setup(1, 50);
    const { entered, open } = gateCore(p);
    const inCore = once(entered, 'entered');
    await daemon.start();
    await inCore;
    // The shutdown timeout runs on the daemon's clock: move it until the stop has completed.
    let stopped = false;
    const stopping = daemon.stop().then(() => {
      stopped = true;
    });
    while (!stopped) await p.clock.advance(50);
    await stopping;
    expect((await p.store.loans.require('L1')).state).toBe('mapped');
    expect((await p.store.loans.events('L1')).at(-1)?.reason).toBe('interrupted by shutdown');
    open();
    const again = await p.restart().run({ reason: 'restart' });
    expect(again.acknowledged).toBe(1);
    expect(p.core.writes).toBe(1);
  });

  it('stops with a fatal exit when the platform refuses the key', async () => {
    const { p, daemon } = setup(1);
    p.platform.faults = [{ op: 'entities', code: 'auth.invalid_key', status: 401 }];
    await daemon.start();
    expect(await daemon.done).toMatchObject({ kind: 'fatal', code: 'auth.invalid_key' });
    await daemon.stop();
    expect(new PlatformError({ code: 'auth.invalid_key', message: 'x' }).fatal).toBe(true);
  });

  it('a core outage stops the pass and does not spin cycles for the loans it left queued (cron picks them up)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { p, daemon, cycles, summaries } = setup(8);
      p.core.faults = [{ kind: 'unavailable', times: 1000 }];
      const first = once(cycles, 'cycle');
      await daemon.start();
      const [s] = (await first) as [CycleSummary];
      expect(s.coreOutage).toMatchObject({ failures: 3 });
      expect(s.attempted).toBeLessThan(8);
      expect(s.states.queued).toBeGreaterThan(0);
      // Without the guard the retry timer would start a cycle every second for the queued loans.
      await vi.advanceTimersByTimeAsync(10_000);
      expect(summaries).toHaveLength(1);
      await daemon.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('undoes its start when a service cannot start', async () => {
    const p = fakePipeline();
    const stopped: string[] = [];
    const daemon = createDaemon({
      runner: p.runner,
      logger: silentLogger(),
      clock: p.clock,
      drainSchedule: NEVER_CRON,
      shutdownTimeoutMs: 100,
      services: [
        { name: 'ok', start: () => undefined, stop: () => void stopped.push('ok') },
        {
          name: 'port taken',
          start: () => {
            throw new Error('EADDRINUSE');
          },
          stop: () => void stopped.push('never started'),
        },
      ],
    });
    await expect(daemon.start()).rejects.toThrow('EADDRINUSE');
    expect(stopped).toEqual(['ok']);
    expect(await daemon.done).toEqual({ kind: 'stopped' });
  });

  it('refuses a bad cron expression naming the config key', () => {
    const p = fakePipeline();
    expect(() =>
      createDaemon({
        runner: p.runner,
        logger: silentLogger(),
        clock: p.clock,
        drainSchedule: 'every minute',
        shutdownTimeoutMs: 1,
      }),
    ).toThrow(ConfigError);
    expect(() =>
      createDaemon({
        runner: p.runner,
        logger: silentLogger(),
        clock: p.clock,
        drainSchedule: 'every minute',
        shutdownTimeoutMs: 1,
      }),
    ).toThrow(/schedule\.drain/);
  });
});
