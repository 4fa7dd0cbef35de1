import { describe, expect, it } from 'vitest';
import { recordInvalidItem, recordQueueItem } from '../../../src/pipeline/intake.js';
import { retryLoan } from '../../../src/ops/retry.js';
import { skipLoan } from '../../../src/ops/skip.js';
import { createLogger, silentLogger } from '../../../src/lib/logger.js';
import type { PlatformApi } from '../../../src/platform/api.js';
import { PlatformError } from '../../../src/platform/errors.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { fakeLoan } from '../../support/fake-platform.js';
import { fakePipeline } from '../../support/fake-pipeline.js';
import { FakeClock } from '../../support/fake-clock.js';
import { Leadership } from '../../../src/store/leadership/leadership.js';
import { sqliteLeaseBackend } from '../../../src/store/leadership/leases.js';
import { FencedOut } from '../../../src/store/sql.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const T0 = 1_700_000_000_000;

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({
    level: 'debug',
    destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  });
  return {
    logger,
    lines,
    warnings: () => lines.filter((l) => l['level'] === 40),
    errors: () => lines.filter((l) => l['level'] === 50),
  };
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
    l.item = {
      ...l.item,
      centsAmount: 2_500_000,
      boarding: { id: 'b-second', releasedAt: '2026-02-01T00:00:00Z', boarded: false },
    };
    await p.runner.run({ reason: 'B listed' });
    expect(await p.store.loans.require('L01')).toMatchObject({ state: 'skipped', releaseMarker: 'b-second' });
    expect(p.core.writes).toBe(1);

    await retryLoan(p.store.loans, 'L01', 'alice', p.clock.now());
    const s = await p.runner.run({ reason: 'retry' });
    expect(s).toMatchObject({ acknowledged: 1, ackOnly: 0 });
    expect(p.core.writes).toBe(2);
    expect(p.core.loans.get('L01')?.pkg.source.centsAmount).toBe(2_500_000);
    expect(p.platform.acks.get('L01')).toEqual(['ack:L01:b-second']);
    expect(await p.store.loans.require('L01')).toMatchObject({
      state: 'acknowledged',
      writtenReleaseMarker: 'b-second',
    });
  });

  it('intake clears the old release write when a skipped loan is released again (state stays skipped)', async () => {
    const loans = createBoardingStore(sqliteStore(openDatabase(':memory:'))).loans;
    const item = fakeLoan('L1').item;
    await recordQueueItem(loans, item, T0, silentLogger(), new Set());
    await loans.update(
      'L1',
      {
        writtenAt: T0,
        coreReference: 'CORE-1',
        writtenReleaseMarker: 'b-L1',
        coreWriteStartedAt: T0,
        attempts: 4,
      },
      T0,
    );
    await loans.transition('L1', { to: 'skipped', kind: 'ops', actor: 'x' }, T0);
    expect(
      await recordQueueItem(loans, { ...item, boarding: { id: 'b2' } }, T0 + 1, silentLogger(), new Set()),
    ).toBe('seen');
    expect(await loans.require('L1')).toMatchObject({
      state: 'skipped',
      releaseMarker: 'b2',
      writtenAt: null,
      coreWriteStartedAt: null,
      attempts: 0,
    });
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

describe('leadership trouble (regressions: a failed lease release wedged the daemon; a stalled process kept boarding)', () => {
  it('a database error before the cycle starts does not leave the runner refusing every later cycle', async () => {
    const p = fakePipeline();
    p.platform.add(fakeLoan('L01'));
    // The lease's statements before the cycle starts fail: the take-over attempt (leadership logs
    // it and goes on) and the read of who leads, which the cycle cannot do without.
    const prepare = p.db.prepare.bind(p.db);
    let failures = 2;
    p.db.prepare = (text: string) => {
      if (failures > 0 && text.includes('FROM leases')) {
        failures -= 1;
        throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      }
      return prepare(text);
    };
    await expect(p.runner.run({ reason: 'one' })).rejects.toThrow('database is locked');
    expect(p.runner.isRunning()).toBe(false);
    const second = await p.runner.run({ reason: 'two' });
    expect(second.acknowledged).toBe(1);
  });

  it('a renew that fails keeps the term until the trust deadline, logged, never an uncaught exception', async () => {
    const log = capture();
    const db = openDatabase(':memory:');
    const real = sqliteLeaseBackend(sqliteStore(db));
    let failRenew = true;
    const backend = {
      ...real,
      renew: (t: Parameters<typeof real.renew>[0], ttl: number) =>
        failRenew ? Promise.reject(new Error('database is locked')) : real.renew(t, ttl),
    };
    const clock = new FakeClock();
    const l = new Leadership(backend, {
      name: 'boarding',
      holder: 'h:1:a',
      clock,
      logger: log.logger,
      ttlMs: 15_000,
      renewEveryMs: 5_000,
    });
    await l.tick();
    expect(l.role).toBe('leader');
    await clock.advance(5_000);
    await l.tick();
    expect(l.role).toBe('leader');
    expect(log.warnings().some((w) => /leadership: database call failed/.test(String(w['msg'])))).toBe(true);
    failRenew = false;
    await l.tick();
    expect(l.trustLeftMs()).toBe(13_000);
    db.close();
  });

  it('a process resumed after a pause past its trust deadline makes no core write, even before its deadline timer fires (regression: I/O callbacks run before overdue timers)', async () => {
    const p = fakePipeline({ leaseTtlMs: 4_000, concurrency: 1 });
    p.platform.add(fakeLoan('L01'));
    const getEntities = p.platform.getEntities.bind(p.platform);
    p.platform.getEntities = async (id: string) => {
      const out = await getEntities(id);
      // SIGSTOP … SIGCONT: the clock jumped past the trust deadline; no timer has run yet.
      p.clock.set(p.clock.now() + 10_000);
      return out;
    };
    const s = await p.runner.run({ reason: 'test' });
    expect(s).toMatchObject({ leaseLost: true, acknowledged: 0 });
    expect(p.core.writes).toBe(0);
    expect(p.platform.acks.size).toBe(0);
  });

  it('a process whose lease was taken over stops boarding: in-flight loan interrupted, no new loans taken, its writes fenced out', async () => {
    const log = capture();
    const p = fakePipeline({ logger: log.logger, concurrency: 1 });
    p.platform.add(fakeLoan('L01'), fakeLoan('L02'), fakeLoan('L03'));
    const taken: string[] = [];
    let epochs: number[] = [];
    // The fake ignores the signal; this one waits on it, as the real client's HTTP call does.
    (p.platform as { getEntities: PlatformApi['getEntities'] }).getEntities = async (id, opts) => {
      taken.push(id);
      // This process stalled past its lease: another one took it over (its lease expired on the database's clock).
      p.db
        .prepare(
          "UPDATE leases SET owner = 'elsewhere:1:x', epoch = epoch + 1, expires_at = expires_at + 60000 WHERE name = 'boarding'",
        )
        .run();
      epochs = (p.db.prepare('SELECT epoch FROM leases').all() as Array<{ epoch: number }>).map(
        (r) => r.epoch,
      );
      // A write the stale process still tries changes nothing.
      await expect(
        p.store.loans.recordEvent(id, { kind: 'attempt', reason: 'late' }, p.clock.now()),
      ).rejects.toBeInstanceOf(FencedOut);
      const signal = opts?.signal;
      return new Promise<never>((_resolve, reject) => {
        const fail = (): void => reject(new PlatformError({ code: 'aborted', message: 'aborted' }));
        if (signal?.aborted) fail();
        else signal?.addEventListener('abort', fail, { once: true });
      });
    };
    const s = await p.runner.run({ reason: 'test' });
    expect(s).toMatchObject({ leaseLost: true, acknowledged: 0 });
    expect(p.core.writes).toBe(0);
    // Every loan resumes from its last persisted state (queued) under the next leader.
    expect((await p.store.loans.countByState()).queued).toBe(3);
    expect(taken).toEqual(['L01']);
    expect(epochs).toEqual([2]);
    expect(p.db.prepare('SELECT owner FROM leases').get()).toEqual({ owner: 'elsewhere:1:x' });
    expect(log.errors().some((l) => /stopped leading mid-cycle/.test(String(l['msg'])))).toBe(true);
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
    const loans = createBoardingStore(sqliteStore(openDatabase(':memory:'))).loans;
    await recordQueueItem(loans, fakeLoan('L1').item, T0, log.logger, new Set());
    await loans.transition('L1', { to: 'acknowledged' }, T0);
    expect(
      await recordInvalidItem(
        loans,
        { id: 'L1', index: 0, problems: ['centsAmount: expected number'], raw: {} },
        T0,
        log.logger,
      ),
    ).toBe('ignored');
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
