import { describe, expect, it } from 'vitest';
import { retryLoan } from '../../../src/ops/retry.js';
import { skipLoan } from '../../../src/ops/skip.js';
import { PlatformError } from '../../../src/platform/errors.js';
import { fakeLoan } from '../../support/fake-platform.js';
import { issue } from '../../support/fake-mapper.js';
import { sqliteLeaseBackend } from '../../../src/store/leadership/leases.js';
import { fakePipeline } from '../../support/fake-pipeline.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

function withLoans(n: number, opts: Parameters<typeof fakePipeline>[0] = {}) {
  const p = fakePipeline(opts);
  for (let i = 1; i <= n; i++) p.platform.add(fakeLoan(`L${String(i).padStart(2, '0')}`));
  return p;
}

describe('boarding cycle', () => {
  it('walks every page, boards each loan once with a derived idempotency key, and a second cycle writes nothing', async () => {
    const p = withLoans(7);
    const s = await p.runner.run({ reason: 'test' });
    expect(s.walk).toMatchObject({ pages: 4, items: 7, complete: true });
    expect(s.acknowledged).toBe(7);
    expect(p.core.writes).toBe(7);
    for (const [id, keys] of p.platform.acks) expect(keys).toEqual([`ack:${id}:b-${id}`]);
    expect((await p.store.loans.countByState()).acknowledged).toBe(7);
    // No redundant GET of the loan: the queue item carries it.
    expect(p.platform.calls['getLoan']).toBeUndefined();
    expect(await p.store.checkpoints.get('boarding-queue')).toBeNull();

    const again = await p.runner.run({ reason: 'again' });
    expect(again.attempted).toBe(0);
    expect(p.platform.calls['ack']).toBe(7);
    expect(p.core.writes).toBe(7);
  });

  it('quarantines an unmappable loan with a readable reason, boards the rest, and boards it after retry once fixed', async () => {
    const p = withLoans(3);
    p.mapper.fail = (input) =>
      input.loan.id === 'L02'
        ? [issue('mapping', 'paymentFrequency "irregular payments" has no core code')]
        : null;
    const s = await p.runner.run({ reason: 'test' });
    expect(s.acknowledged).toBe(2);
    expect(s.quarantined).toEqual({ mapping: 1 });
    const q = await p.store.loans.require('L02');
    expect(q.state).toBe('quarantined');
    expect(q.quarantineReason).toBe('mapping');
    expect(q.lastErrorMessage).toBe(
      'loan.yaml:3:5 loan.principal: paymentFrequency "irregular payments" has no core code',
    );

    // Quarantined loans are not picked up again by later cycles.
    expect((await p.runner.run({ reason: 'again' })).attempted).toBe(0);

    p.mapper.fail = () => null;
    await retryLoan(p.store.loans, 'L02', 'alice', p.clock.now());
    const after = await p.runner.run({ reason: 'after retry' });
    expect(after.acknowledged).toBe(1);
    expect((await p.store.loans.require('L02')).state).toBe('acknowledged');
    expect((await p.store.loans.events('L02')).some((e) => e.kind === 'ops' && e.actor === 'alice')).toBe(
      true,
    );
  });

  it('maps tin_incomplete issues to their own quarantine reason', async () => {
    const p = withLoans(1);
    p.mapper.fail = () => [issue('tin_incomplete', 'full EIN required, only last 4 known')];
    await p.runner.run({ reason: 'test' });
    expect((await p.store.loans.require('L01')).quarantineReason).toBe('tin_incomplete');
  });

  it('retries an ack whose connection dropped after commit with the same key, never re-writing the core', async () => {
    const p = withLoans(2);
    p.platform.faults = [{ op: 'ack', loanId: 'L01', code: 'network', afterCommit: true }];
    const s = await p.runner.run({ reason: 'test' });
    expect(s.retryWait).toBe(1);
    const row = await p.store.loans.require('L01');
    expect(row.state).toBe('retry_wait');
    expect(row.writtenAt).not.toBeNull();
    expect(row.nextAttemptAt).toBe(p.clock.now() + 1000);

    await p.clock.advance(1000);
    const again = await p.runner.run({ reason: 'retry' });
    expect(again).toMatchObject({ acknowledged: 1, ackOnly: 1 });
    expect(p.core.writes).toBe(2);
    expect(p.platform.acks.get('L01')).toEqual(['ack:L01:b-L01']);
    expect(p.platform.calls['ack']).toBe(3);
  });

  it('records an ack the platform answers "already boarded" as acknowledged (a late replay of our own ack)', async () => {
    const p = withLoans(1);
    p.platform.acknowledgeBoarding = () =>
      Promise.reject(
        new PlatformError({
          code: 'conflict',
          status: 409,
          serverCode: 'loan.already_boarded',
          message: 'already boarded',
        }),
      );
    const s = await p.runner.run({ reason: 'test' });
    expect(s.acknowledged).toBe(1);
    expect((await p.store.keys.forLoan('L01'))[0]?.status).toBe(409);
  });

  it('quarantines an ack the platform refuses for good (ack_rejected), keeping the core write', async () => {
    const p = withLoans(1);
    p.platform.faults = [{ op: 'ack', code: 'validation', status: 400 }];
    const s = await p.runner.run({ reason: 'test' });
    expect(s.quarantined).toEqual({ ack_rejected: 1 });
    await retryLoan(p.store.loans, 'L01', 'ops', p.clock.now());
    const again = await p.runner.run({ reason: 'retry' });
    expect(again).toMatchObject({ acknowledged: 1, ackOnly: 1 });
    expect(p.core.writes).toBe(1);
  });

  it('after an ambiguous core timeout, checks the core before writing again', async () => {
    const p = withLoans(1);
    p.core.faults = [{ kind: 'ambiguous', afterCommit: true }];
    await p.runner.run({ reason: 'test' });
    expect(await p.store.loans.require('L01')).toMatchObject({
      state: 'retry_wait',
      lastErrorCode: 'core.ambiguous',
    });
    await p.clock.advance(1000);
    const s = await p.runner.run({ reason: 'retry' });
    expect(s.acknowledged).toBe(1);
    expect(p.core.writes).toBe(1);
    expect(p.core.findCalls).toBe(1);
    // The check came before any fetch: no second entities/documents read.
    expect(p.platform.calls['entities']).toBe(1);
  });

  it('after an ambiguous timeout, a core that cannot confirm the whole write is boarded again to complete it (regression: Fineract guarantors/documents skipped)', async () => {
    const p = withLoans(1);
    p.core.faults = [{ kind: 'ambiguous', afterCommit: true }];
    p.core.reportsPartial = true;
    await p.runner.run({ reason: 'test' });
    await p.clock.advance(1000);
    const s = await p.runner.run({ reason: 'retry' });
    expect(s.acknowledged).toBe(1);
    expect(p.core.findCalls).toBe(1);
    expect(p.core.writes).toBe(2);
    expect(p.core.loans.size).toBe(1);
    expect((await p.store.loans.require('L01')).state).toBe('acknowledged');
  });

  it('after a crash mid-write writes again (idempotent), completing a write the crash cut short', async () => {
    const p = withLoans(1);
    // The process died after the core committed but before "written" was recorded.
    p.core.faults = [{ kind: 'ambiguous', afterCommit: true }];
    const board = p.core.board.bind(p.core);
    p.core.board = async (pkg) => {
      await board(pkg).catch(() => undefined);
      throw new Error('SIGKILL');
    };
    await p.runner.run({ reason: 'crash', abort: AbortSignal.abort() });
    expect((await p.store.loans.require('L01')).state).toBe('mapped');
    p.core.board = board;
    const s = await p.restart().run({ reason: 'restart' });
    expect(s.acknowledged).toBe(1);
    expect(p.core.findCalls).toBe(0);
    expect(p.core.writes).toBe(2);
    expect(p.core.loans.size).toBe(1);
  });

  it('writes again after an ambiguous timeout that did not commit', async () => {
    const p = withLoans(1);
    p.core.faults = [{ kind: 'ambiguous' }];
    await p.runner.run({ reason: 'test' });
    await p.clock.advance(1000);
    await p.runner.run({ reason: 'retry' });
    expect(p.core.writes).toBe(1);
    expect((await p.store.loans.require('L01')).state).toBe('acknowledged');
  });

  it('stops the cycle when the core refuses our credentials, quarantining nothing (regression: a core 401 was retried until every loan was quarantined)', async () => {
    const p = withLoans(3);
    p.core.faults = [{ kind: 'credentials', times: 100 }];
    const s = await p.runner.run({ reason: 'test' });
    expect(s.fatal).toMatchObject({ code: 'core.fatal' });
    expect(s.quarantined).toEqual({});
    expect(await p.store.loans.list({ state: 'quarantined' })).toEqual([]);
    expect(await p.store.loans.list({ state: 'retry_wait' })).toEqual([]);
    expect(p.core.writes).toBe(0);
  });

  it('quarantines core rejections with the core message', async () => {
    const p = withLoans(2);
    p.core.faults = [{ loanId: 'L02', kind: 'rejected' }];
    const s = await p.runner.run({ reason: 'test' });
    expect(s.quarantined).toEqual({ core_rejected: 1 });
    expect((await p.store.loans.require('L02')).lastErrorMessage).toContain('productId unknown');
  });

  it('backs off exponentially and quarantines after maxAttempts of transient failures', async () => {
    const p = withLoans(1, { maxAttempts: 3 });
    p.platform.faults = [{ op: 'entities', code: 'server', status: 503, times: 99 }];
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      await p.runner.run({ reason: 'test' });
      const r = await p.store.loans.require('L01');
      if (r.nextAttemptAt !== null) {
        delays.push(r.nextAttemptAt - p.clock.now());
        p.clock.set(r.nextAttemptAt);
      }
    }
    expect(delays).toEqual([1000, 2000]);
    expect(await p.store.loans.require('L01')).toMatchObject({
      state: 'quarantined',
      quarantineReason: 'retries_exhausted',
      attempts: 3,
    });
  });

  it('settles short retries inside one cycle when asked (sync --once)', async () => {
    const p = withLoans(2);
    p.platform.faults = [{ op: 'entities', loanId: 'L02', code: 'network' }];
    const s = await p.runner.run({ reason: 'sync', settleMs: 5000 });
    expect(s.acknowledged).toBe(2);
    expect(s.passes).toBe(2);
  });

  it('resumes an interrupted walk from its checkpoint and restarts when the cursor is refused', async () => {
    const p = withLoans(6);
    // The first page is read and recorded, then the connection drops.
    let reads = 0;
    const orig = p.platform.boardingQueue.bind(p.platform);
    p.platform.boardingQueue = async function* (opts) {
      for await (const page of orig(opts)) {
        reads += 1;
        yield page;
        if (reads === 1) throw new PlatformError({ code: 'network', message: 'reset' });
      }
    };
    const s = await p.runner.run({ reason: 'interrupted' });
    expect(s.walk.complete).toBe(false);
    expect(s.acknowledged).toBe(2); // the loans of the page that was recorded
    expect((await p.store.checkpoints.get('boarding-queue'))?.cursor).toBe('L02');

    const r = p.restart();
    p.platform.boardingQueue = orig;
    const s2 = await r.run({ reason: 'resume' });
    expect(s2.walk).toMatchObject({ resumed: true, complete: true, items: 4 });
    expect(s2.acknowledged).toBe(4);

    await p.store.checkpoints.save('boarding-queue', 'expired', p.clock.now());
    p.platform.add(fakeLoan('L99'));
    const s3 = await r.run({ reason: 'expired cursor' });
    expect(s3.walk.complete).toBe(true);
    expect(s3.acknowledged).toBe(1);
  });

  it('boards loans recorded before a crash from their stored queue item (no extra GET)', async () => {
    const p = withLoans(3);
    // A previous process recorded the page and crashed mid-loan (state fetched / mapped).
    await p.runner.run({ reason: 'first', stop: AbortSignal.abort() });
    expect((await p.store.loans.countByState()).queued).toBe(2);
    const s = await p.restart().run({ reason: 'restart' });
    expect(s.acknowledged).toBe(3);
    expect(p.platform.calls['getLoan']).toBeUndefined();
  });

  it('stops the cycle on a fatal platform error', async () => {
    const p = withLoans(4, { concurrency: 1 });
    p.platform.faults = [{ op: 'entities', loanId: 'L02', code: 'auth.invalid_key', status: 401 }];
    const s = await p.runner.run({ reason: 'test' });
    expect(s.fatal).toMatchObject({ code: 'auth.invalid_key' });
    expect(s.acknowledged).toBe(1);
    expect(s.attempted).toBe(2);
  });

  it('stops acknowledging when writes are stopped after strikes', async () => {
    const p = withLoans(2);
    p.platform.trafficStopped = true;
    const s = await p.runner.run({ reason: 'test' });
    expect(s.trafficStopped).toBe(true);
    expect(s.attempted).toBe(0);
    expect((await p.store.loans.countByState()).queued).toBe(2);
  });

  it('quarantines a malformed queue item that has an id', async () => {
    const p = withLoans(1);
    p.platform.invalid.push({ id: 'BAD1', index: 1, problems: ['centsAmount: expected number'], raw: {} });
    const s = await p.runner.run({ reason: 'test' });
    expect(s.acknowledged).toBe(1);
    expect(await p.store.loans.require('BAD1')).toMatchObject({
      state: 'quarantined',
      quarantineReason: 'validation',
    });
    expect((await p.store.loans.require('BAD1')).lastErrorMessage).toContain('centsAmount: expected number');
  });

  it('boards a loan released again (new marker) with a new key', async () => {
    const p = withLoans(1);
    await p.runner.run({ reason: 'first' });
    const l = p.platform.loans.get('L01')!;
    l.boarded = false;
    l.item.boarding = { id: 'b-second', releasedAt: '2026-02-01T00:00:00Z', boarded: false };
    const s = await p.runner.run({ reason: 'second' });
    expect(s.walk.reReleased).toBe(1);
    expect(p.platform.acks.get('L01')).toEqual(['ack:L01:b-L01', 'ack:L01:b-second']);
  });

  it('does nothing while another process leads (holds the boarding lease); boards once it is released, in a new epoch', async () => {
    const p = withLoans(2);
    const leases = sqliteLeaseBackend(sqliteStore(p.db));
    expect(await leases.acquire('boarding', 'elsewhere:4242:x', 60_000)).toEqual({ epoch: 1 });
    const s = await p.runner.run({ reason: 'test' });
    expect(s.busy).toEqual({ host: 'elsewhere', pid: 4242, holder: 'elsewhere:4242:x', epoch: 1 });
    expect(s.attempted).toBe(0);
    expect(p.platform.calls['queue']).toBeUndefined();
    await leases.release({ name: 'boarding', holder: 'elsewhere:4242:x', epoch: 1 });
    expect((await p.runner.run({ reason: 'test' })).acknowledged).toBe(2);
    expect(await leases.read('boarding')).toMatchObject({ epoch: 2 });
  });

  it('leaves a loan an operator skipped while its attempt was failing', async () => {
    const p = withLoans(1);
    const getEntities = p.platform.getEntities.bind(p.platform);
    p.platform.getEntities = async (id: string) => {
      await skipLoan(p.store.loans, id, 'wrong loan', 'ops', p.clock.now());
      await getEntities(id);
      throw new PlatformError({ code: 'server', status: 503, message: 'blip' });
    };
    const s = await p.runner.run({ reason: 'test' });
    expect(s.stale).toBe(1);
    expect((await p.store.loans.require('L01')).state).toBe('skipped');
  });

  it('skips skipped loans and audits who skipped', async () => {
    const p = withLoans(2);
    await p.runner.run({ reason: 'first', stop: AbortSignal.abort() });
    await skipLoan(p.store.loans, 'L01', 'paid off before boarding', 'bob', p.clock.now());
    const s = await p.runner.run({ reason: 'test' });
    expect(s.acknowledged).toBe(1);
    expect((await p.store.loans.require('L01')).state).toBe('skipped');
    await expect(skipLoan(p.store.loans, 'L02', 'x', 'bob', p.clock.now())).rejects.toThrow(/acknowledged/);
    await expect(retryLoan(p.store.loans, 'NOPE', 'bob', p.clock.now())).rejects.toThrow(/no loan NOPE/);
  });
  it('counts the loans per state once per cycle (regression: each cycle counted twice, an index scan of 36 ms at 100,000 loans)', async () => {
    const p = withLoans(3);
    let counts = 0;
    const count = p.store.loans.countByState.bind(p.store.loans);
    p.store.loans.countByState = () => {
      counts += 1;
      return count();
    };
    const first = await p.runner.run({ reason: 'test' });
    expect(first.states.acknowledged).toBe(3);
    expect(counts).toBe(1);
    p.platform.add(fakeLoan('L04'));
    const second = await p.runner.run({ reason: 'again' });
    expect(second.states).toMatchObject({ acknowledged: 4, queued: 0 });
    expect(counts).toBe(2);
    // An idle cycle: still one count, and the summary carries what it found.
    const idle = await p.runner.run({ reason: 'idle' });
    expect(idle.attempted).toBe(0);
    expect(idle.states.acknowledged).toBe(4);
    expect(counts).toBe(3);
  });
});
