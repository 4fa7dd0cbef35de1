import { describe, expect, it } from 'vitest';
import { recordInvalidItem, recordQueueItem } from '../../../src/boarding/intake.js';
import { retryLoan, skipLoan } from '../../../src/boarding/ops.js';
import { createLogger, silentLogger } from '../../../src/lib/logger.js';
import type { PlatformApi } from '../../../src/platform/api.js';
import { PlatformError } from '../../../src/platform/errors.js';
import { openDatabase } from '../../../src/store/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { fakeLoan } from '../../support/fake-platform.js';
import { fakePipeline } from '../../support/fake-pipeline.js';

const T0 = 1_700_000_000_000;

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ level: 'debug', destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) } });
  return { logger, lines, warnings: () => lines.filter((l) => l['level'] === 40), errors: () => lines.filter((l) => l['level'] === 50) };
}

describe('skipped loan re-released then retried (regression: acknowledged without writing the new release)', () => {
  it('writes the new release to the core before acknowledging it', async () => {
    const p = fakePipeline();
    p.platform.add(fakeLoan('L01'));
    // Release A is written, its ack refused for good: quarantined ack_rejected, core holds A.
    p.platform.faults = [{ op: 'ack', code: 'validation', status: 400 }];
    expect((await p.runner.run({ reason: 'A' })).quarantined).toEqual({ ack_rejected: 1 });
    expect(p.core.writes).toBe(1);
    await skipLoan(p.store.loans, 'L01', 'handled by hand', 'alice', p.clock.now());

    // The banker releases it again with new terms (release B): it stays skipped.
    const l = p.platform.loans.get('L01')!;
    l.item = { ...l.item, centsAmount: 2_500_000, boarding: { id: 'b-second', releasedAt: '2026-02-01T00:00:00Z', boarded: false } };
    await p.runner.run({ reason: 'B listed' });
    expect(await p.store.loans.require('L01')).toMatchObject({ state: 'skipped', releaseMarker: 'b-second' });
    expect(p.core.writes).toBe(1);

    await retryLoan(p.store.loans, 'L01', 'alice', p.clock.now());
    const s = await p.runner.run({ reason: 'retry' });
    expect(s).toMatchObject({ acknowledged: 1, ackOnly: 0 });
    expect(p.core.writes).toBe(2);
    expect(p.core.loans.get('L01')?.pkg.source.centsAmount).toBe(2_500_000);
    expect(p.platform.acks.get('L01')).toEqual(['ack:L01:b-second']);
    expect(await p.store.loans.require('L01')).toMatchObject({ state: 'acknowledged', writtenReleaseMarker: 'b-second' });
  });

  it('intake clears the old release write when a skipped loan is released again (state stays skipped)', async () => {
    const loans = createBoardingStore(openDatabase(':memory:')).loans;
    const item = fakeLoan('L1').item;
    await recordQueueItem(loans, item, T0, silentLogger(), new Set());
    await loans.update('L1', { writtenAt: T0, coreReference: 'CORE-1', writtenReleaseMarker: 'b-L1', coreWriteStartedAt: T0, attempts: 4 }, T0);
    await loans.transition('L1', { to: 'skipped', kind: 'ops', actor: 'x' }, T0);
    expect(await recordQueueItem(loans, { ...item, boarding: { id: 'b2' } }, T0 + 1, silentLogger(), new Set())).toBe('seen');
    expect(await loans.require('L1')).toMatchObject({ state: 'skipped', releaseMarker: 'b2', writtenAt: null, coreWriteStartedAt: null, attempts: 0 });
  });

  it('only acknowledges without writing when the core write was made for the current release marker', async () => {
    const p = fakePipeline();
    p.platform.add(fakeLoan('L01'));
    p.platform.faults = [{ op: 'ack', code: 'validation', status: 400 }];
    await p.runner.run({ reason: 'A' });
    // However the row came to carry a write for another release (older version, manual edit):
    // the current release is written, not merely acknowledged.
    await p.store.loans.update('L01', { releaseMarker: 'b-other' }, p.clock.now());
    const l = p.platform.loans.get('L01')!;
    l.item = { ...l.item, boarding: { id: 'b-other', releasedAt: '2026-02-01T00:00:00Z', boarded: false } };
    await retryLoan(p.store.loans, 'L01', 'ops', p.clock.now());
    const s = await p.runner.run({ reason: 'retry' });
    expect(s).toMatchObject({ acknowledged: 1, ackOnly: 0 });
    expect(p.core.writes).toBe(2);
    expect(p.platform.acks.get('L01')).toEqual(['ack:L01:b-other']);
  });
});

describe('boarding lease trouble (regression: one failed lease release wedged the daemon forever)', () => {
  it('a lease release that throws does not leave the runner refusing every later cycle', async () => {
    const p = fakePipeline();
    p.platform.add(fakeLoan('L01'));
    const release = p.store.leases.release.bind(p.store.leases);
    let fail = true;
    p.store.leases.release = async (name, owner) => {
      if (fail) {
        fail = false;
        throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      }
      await release(name, owner);
    };
    const first = await p.runner.run({ reason: 'one' });
    expect(first.acknowledged).toBe(1);
    expect(p.runner.isRunning()).toBe(false);
    p.platform.add(fakeLoan('L02'));
    const second = await p.runner.run({ reason: 'two' });
    expect(second.acknowledged).toBe(1);
    expect(await p.store.leases.get('boarding')).toBeNull();
  });

  it('a heartbeat that throws is logged, not an uncaught exception, and the cycle carries on', async () => {
    const log = capture();
    const p = fakePipeline({ leaseTtlMs: 1000, logger: log.logger, concurrency: 1 });
    p.platform.add(fakeLoan('L01'));
    let beats = 0;
    const heartbeat = p.store.leases.heartbeat.bind(p.store.leases);
    p.store.leases.heartbeat = (name, owner, now) => {
      beats += 1;
      if (beats === 1) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      return heartbeat(name, owner, now);
    };
    const getEntities = p.platform.getEntities.bind(p.platform);
    p.platform.getEntities = async (id) => {
      // The heartbeat runs on the cycle's clock, every leaseTtlMs / 4 (here its 250 ms floor).
      while (beats < 2) await p.clock.advance(250);
      return getEntities(id);
    };
    const s = await p.runner.run({ reason: 'test' });
    expect(s).toMatchObject({ acknowledged: 1, leaseLost: false });
    expect(log.warnings().some((l) => /heartbeat failed/.test(String(l['msg'])))).toBe(true);
  });

  it('a process whose lease was taken over stops boarding: in-flight loan interrupted, no new loans taken', async () => {
    const log = capture();
    const p = fakePipeline({ leaseTtlMs: 1000, logger: log.logger, concurrency: 1 });
    p.platform.add(fakeLoan('L01'), fakeLoan('L02'), fakeLoan('L03'));
    const taken: string[] = [];
    // The fake ignores the signal; this one waits on it, as the real client's HTTP call does.
    (p.platform as { getEntities: PlatformApi['getEntities'] }).getEntities = async (id, opts) => {
      taken.push(id);
      // This process stalled past its lease: another one took it over.
      await p.store.leases.acquire('boarding', { owner: 'other', pid: 1, host: 'elsewhere' }, p.clock.now() + 600_000, 1000, () => true);
      // Its next heartbeat (on the cycle's clock) finds the lease gone.
      void p.clock.advance(250);
      const signal = opts?.signal;
      return new Promise<never>((_resolve, reject) => {
        const fail = (): void => reject(new PlatformError({ code: 'aborted', message: 'aborted' }));
        if (signal?.aborted) fail();
        else signal?.addEventListener('abort', fail, { once: true });
      });
    };
    const s = await p.runner.run({ reason: 'test' });
    expect(s).toMatchObject({ leaseLost: true, attempted: 1, interrupted: 1, acknowledged: 0 });
    expect(p.core.writes).toBe(0);
    // L01 resumes from its last persisted state (queued); L02 and L03 were never taken.
    expect((await p.store.loans.countByState()).queued).toBe(3);
    expect(taken).toEqual(['L01']);
    expect((await p.store.leases.get('boarding'))?.owner).toBe('other');
    expect(log.errors().some((l) => /lost the boarding lease/.test(String(l['msg'])))).toBe(true);
  });
});

describe('acknowledged loan still listed (regression: ignored forever with only a debug log)', () => {
  it('counts it in the cycle summary, warns once per loan (rate-limited), and never boards it again', async () => {
    const log = capture();
    const p = fakePipeline({ logger: log.logger });
    p.platform.add(fakeLoan('L01'), fakeLoan('L02'));
    await p.runner.run({ reason: 'first' });
    expect(p.core.writes).toBe(2);
    // The platform keeps listing L01 with the same marker (lagging, or an indistinguishable re-release).
    p.platform.loans.get('L01')!.boarded = false;
    const s = await p.runner.run({ reason: 'second' });
    expect(s.walk).toMatchObject({ stillListedAfterAck: 1, stillListedChanged: 0 });
    const warned = log.warnings().filter((l) => /still listed/.test(String(l['msg'])));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ stillListedAfterAck: 1, sameItem: ['L01'] });

    // Next cycle: counted again, not warned again.
    expect((await p.runner.run({ reason: 'third' })).walk.stillListedAfterAck).toBe(1);
    expect(log.warnings().filter((l) => /still listed/.test(String(l['msg'])))).toHaveLength(1);

    // Its loan fields change under the same marker: surfaced as changed, still not boarded again.
    const l = p.platform.loans.get('L01')!;
    l.item = { ...l.item, centsAmount: 2_000_000 };
    await p.clock.advance(7 * 60 * 60 * 1000);
    const changed = await p.runner.run({ reason: 'changed' });
    expect(changed.walk).toMatchObject({ stillListedAfterAck: 1, stillListedChanged: 1 });
    expect(log.warnings().filter((l2) => /still listed/.test(String(l2['msg'])))).toHaveLength(2);
    expect(log.warnings().at(-1)).toMatchObject({ changedItem: ['L01'] });
    expect(p.core.writes).toBe(2);
    expect(p.platform.acks.get('L01')).toEqual(['ack:L01:b-L01']);
    expect((await p.store.loans.require('L01')).state).toBe('acknowledged');
  });

  it('a malformed item for an acknowledged loan is reported as not quarantined (it stays acknowledged)', async () => {
    const log = capture();
    const loans = createBoardingStore(openDatabase(':memory:')).loans;
    await recordQueueItem(loans, fakeLoan('L1').item, T0, log.logger, new Set());
    await loans.transition('L1', { to: 'acknowledged' }, T0);
    expect(await recordInvalidItem(loans, { id: 'L1', index: 0, problems: ['centsAmount: expected number'], raw: {} }, T0, log.logger)).toBe('ignored');
    expect((await loans.require('L1')).state).toBe('acknowledged');
    expect(log.warnings().some((l) => /NOT quarantined/.test(String(l['msg'])))).toBe(true);

    const p = fakePipeline({ logger: log.logger });
    p.platform.add(fakeLoan('L01'));
    await p.runner.run({ reason: 'first' });
    p.platform.invalid.push({ id: 'L01', index: 0, problems: ['centsAmount: expected number'], raw: {} });
    const s = await p.runner.run({ reason: 'second' });
    expect(s.walk).toMatchObject({ stillListedAfterAck: 1, stillListedChanged: 1 });
    expect((await p.store.loans.require('L01')).state).toBe('acknowledged');
    expect(log.warnings().at(-1)).toMatchObject({ invalidItem: ['L01'] });
  });
});
