import { afterEach, describe, expect, it } from 'vitest';
import { retryLoan } from '../../../src/ops/retry.js';
import { consoleSchema } from '../../../src/config/schema.js';
import { createConsoleService } from '../../../src/console/service.js';
import { PREVIEWS_PER_MINUTE } from '../../../src/ops/preview-throttle.js';
import { createConsoleExecutor } from '../../../src/console/executor.js';
import type { ConsoleUser } from '../../../src/console/contract.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { createConsoleStore } from '../../../src/store/console.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { openStore } from '../../../src/store/open.js';
import type { StoreDb } from '../../../src/store/sql.js';
import { FakeClock } from '../../support/fake-clock.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';
import { pgTarget } from '../../support/pg.js';

const olga: ConsoleUser = { name: 'olga', roles: ['operator'] };
const ivan: ConsoleUser = { name: 'ivan', roles: ['approver'] };

async function setupOn(
  db: StoreDb,
  consoleConfig: Record<string, unknown> = {},
  loans = 4,
  withExecutor = true,
) {
  const store = createBoardingStore(db);
  const clock = new FakeClock();
  for (let i = 0; i < loans; i++)
    await store.loans.insert(
      { id: `L${i}`, state: 'quarantined', patch: { quarantineReason: i % 2 ? 'mapping' : 'core_rejected' } },
      clock.now(),
    );
  const consoleStore = createConsoleStore(db);
  const cycles: string[] = [];
  const executor = createConsoleExecutor({
    store,
    consoleStore,
    clock,
    logger: silentLogger(),
    requestCycle: (r) => cycles.push(r),
  });
  const config = {
    console: consoleSchema.parse({ approveWaitMs: 0, ...consoleConfig }),
    bank: { timeZone: 'UTC' },
    reports: { dir: '/nonexistent' },
  };
  const service = createConsoleService({
    store,
    consoleStore,
    config,
    clock,
    logger: silentLogger(),
    ...(withExecutor ? { executor } : {}),
  });
  return { db, store, clock, consoleStore, executor, service, cycles, config };
}

describe.each(STORE_ENGINES)('on %s', (engine) => {
  const open = testStores(engine);
  const setup = async (consoleConfig: Record<string, unknown> = {}, loans = 4, withExecutor = true) => {
    const t = await open();
    return { ...(await setupOn(t.db, consoleConfig, loans, withExecutor)), url: t.url };
  };
  const handles: StoreDb[] = [];
  afterEach(async () => {
    while (handles.length > 0) await handles.pop()?.close();
  });

  describe.skipIf(engineSkipped(engine))('console requests', () => {
    it('console.fourEyes.exemptRetries: a retry executes at once, approved by the system; a skip still waits', async () => {
      const { service, executor, store, cycles } = await setup({ fourEyes: { exemptRetries: true } });
      const r = await service.createRequest(olga, { action: 'retry', loans: ['L0'], reason: 'core fixed' });
      // The service kicked the executor and waited for it: executed by the time it answers.
      expect(r).toMatchObject({
        status: 'executed',
        decidedBy: 'system',
        decisionNote: 'console.fourEyes.exemptRetries',
      });
      await executor.runApproved();
      expect((await service.request(r.id))?.status).toBe('executed');
      expect((await store.loans.get('L0'))?.state).toBe('queued');
      expect(cycles).toEqual([`console request ${r.id}`]);
      const skip = await service.createRequest(olga, { action: 'skip', loans: ['L1'], reason: 'paid off' });
      expect(skip.status).toBe('pending');
      await executor.runApproved();
      expect((await store.loans.get('L1'))?.state).toBe('quarantined');
    });

    it('a request covering a loan that a request still to run covers is refused with a link to it (the later one ended red "failed")', async () => {
      const { service } = await setup();
      const first = await service.createRequest(olga, {
        action: 'retry',
        filter: { reason: 'mapping' },
        reason: 'mapping fixed',
      });
      await expect(
        service.createRequest(
          { name: 'otto', roles: ['operator'] },
          { action: 'skip', loans: ['L3'], reason: 'withdrawn' },
        ),
      ).rejects.toMatchObject({
        status: 409,
        field: 'loans',
        link: `/console/requests/${first.id}`,
        message: expect.stringContaining(`request ${first.id} is still to run and already covers loan L3`),
      });
      // A loan it does not cover is fine; once the first is withdrawn, its loans are free again.
      expect(
        (await service.createRequest(olga, { action: 'skip', loans: ['L0'], reason: 'paid off' })).status,
      ).toBe('pending');
      await service.withdraw(olga, first.id, 'wrong filter');
      expect(
        (await service.createRequest(olga, { action: 'skip', loans: ['L3'], reason: 'withdrawn' })).status,
      ).toBe('pending');
    });

    it('a maker withdraws their own pending request (audited); nobody else can, and a decided request cannot be', async () => {
      const { service, consoleStore } = await setup();
      const r = await service.createRequest(olga, { action: 'skip', loans: ['L1'], reason: 'paid off' });
      await expect(service.withdraw(ivan, r.id)).rejects.toMatchObject({ status: 403 });
      const w = await service.withdraw(olga, r.id, 'asked the wrong loan');
      expect(w).toMatchObject({
        status: 'withdrawn',
        decidedBy: 'olga',
        decisionNote: 'asked the wrong loan',
      });
      await expect(service.withdraw(olga, r.id)).rejects.toMatchObject({ status: 409 });
      await expect(service.approve(ivan, r.id)).rejects.toMatchObject({ status: 409 });
      const lines = await consoleStore.audit({ requestId: r.id }, null, 10);
      expect(lines.map((l) => [l.kind, l.actor, l.reason])).toEqual([
        ['withdraw', 'olga', 'asked the wrong loan'],
        ['request', 'olga', 'paid off'],
      ]);
    });

    it('a request by filter covers the loans matched when it was made; a loan that moved meanwhile is named in the result, not acted on', async () => {
      const { service, executor, store, clock } = await setup();
      const r = await service.createRequest(olga, {
        action: 'skip',
        filter: { reason: 'mapping' },
        reason: 'withdrawn',
      });
      expect(r.previewCount).toBe(2);
      expect(r.loans).toEqual(['L1', 'L3']);
      // After the request: another loan is quarantined for the same reason, and L1 is retried from the CLI.
      await store.loans.insert(
        { id: 'L9', state: 'quarantined', patch: { quarantineReason: 'mapping' } },
        clock.now(),
      );
      await retryLoan(store.loans, 'L1', 'cli-user', clock.now());
      await service.approve(ivan, r.id);
      await executor.runApproved();
      const done = await service.request(r.id);
      expect(done?.status).toBe('executed');
      expect(done?.result?.done).toBe(1);
      expect(done?.result?.failed).toEqual([
        {
          loanId: 'L1',
          message: 'loan L1 is queued now (quarantined when the request was made); not acted on',
        },
      ]);
      expect((await store.loans.get('L3'))?.state).toBe('skipped');
      expect((await store.loans.get('L9'))?.state).toBe('quarantined');
    });

    it('two executors on one database run a request once (PostgreSQL: two replicas, each with its own pool)', async () => {
      const { db, store, clock, service, consoleStore, url } = await setup({}, 30, false);
      const r = await service.createRequest(olga, {
        action: 'retry',
        filter: { reason: 'core_rejected' },
        reason: 'core back',
      });
      await service.approve(ivan, r.id);
      let otherDb = db;
      if (url !== null) {
        otherDb = await openStore(pgTarget(url, { poolSize: 2, connectTimeoutMs: 5000 }));
        handles.push(otherDb);
      }
      const second = createConsoleExecutor({
        store: createBoardingStore(otherDb),
        consoleStore: createConsoleStore(otherDb),
        clock,
        logger: silentLogger(),
      });
      const first = createConsoleExecutor({ store, consoleStore, clock, logger: silentLogger() });
      const ran = await Promise.all([first.runApproved(), second.runApproved()]);
      expect(ran.reduce((a, b) => a + b, 0)).toBe(1);
      expect(await db.get("SELECT COUNT(*) AS n FROM loan_events WHERE kind = 'ops'")).toEqual({ n: 15 });
      expect((await service.request(r.id))?.result).toMatchObject({ done: 15, failed: [] });
    });

    it('only an approver who is not the maker decides; a decided request is not decided again', async () => {
      const { service } = await setup();
      const both: ConsoleUser = { name: 'ana', roles: ['operator', 'approver'] };
      const r = await service.createRequest(both, { action: 'retry', loans: ['L0', 'L2'], reason: 'x' });
      await expect(service.approve(both, r.id)).rejects.toMatchObject({ status: 403 });
      await expect(service.reject(both, r.id, 'no')).rejects.toMatchObject({ status: 403 });
      await expect(service.approve(olga, r.id)).rejects.toMatchObject({ status: 403 });
      await expect(service.approve(ivan, 'r-unknown')).rejects.toMatchObject({ status: 404 });
      await expect(
        service.createRequest(ivan, { action: 'retry', loans: ['L0'], reason: 'x' }),
      ).rejects.toMatchObject({ status: 403 });
      await expect(
        service.createRequest(olga, { action: 'retry', loans: ['nope'], reason: 'x' }),
      ).rejects.toMatchObject({ status: 409 });
      await expect(
        service.createRequest(olga, { action: 'retry', loans: ['L0'], filter: {}, reason: 'x' }),
      ).rejects.toMatchObject({ status: 400, field: 'loans' });
      await expect(
        service.createRequest(olga, { action: 'retry', filter: { reason: 'bogus' as never }, reason: 'x' }),
      ).rejects.toMatchObject({ status: 400, field: 'filter.reason' });
      await expect(
        service.createRequest(olga, { action: 'retry', filter: { reason: 'review' }, reason: 'x' }),
      ).rejects.toMatchObject({ status: 400 });
      const rejected = await service.reject(ivan, r.id, 'wrong loans');
      expect(rejected.status).toBe('rejected');
      await expect(service.approve(ivan, r.id)).rejects.toMatchObject({ status: 409 });
    });
  });

  describe.skipIf(engineSkipped(engine))('console executor after a crash', () => {
    it('takes over a request claimed by a process on this host that is gone, at once', async () => {
      const { db, store, clock, service, consoleStore } = await setup({}, 2, false);
      const r = await service.createRequest(olga, {
        action: 'retry',
        loans: ['L0', 'L1'],
        reason: 'core back',
      });
      await service.approve(ivan, r.id);
      // A claim by a process that no longer exists (pid beyond any real one), as a kill -9 leaves it.
      await db.run('UPDATE console_requests SET claimed_by = ?, claimed_at = ? WHERE id = ?', [
        `${(await import('node:os')).hostname()}:2147483646:dead`,
        clock.now(),
        r.id,
      ]);
      // A live claimant (this process) is respected until the claim is stale.
      const live = createConsoleExecutor({ store, consoleStore, clock, logger: silentLogger() });
      expect(await live.runApproved()).toBe(1);
      expect((await service.request(r.id))?.result).toMatchObject({ done: 2, failed: [] });

      const r2 = await service.createRequest(olga, { action: 'skip', loans: ['L0'], reason: 'x' });
      await service.approve(ivan, r2.id);
      await db.run('UPDATE console_requests SET claimed_by = ?, claimed_at = ? WHERE id = ?', [
        `${(await import('node:os')).hostname()}:${process.pid}:other`,
        clock.now(),
        r2.id,
      ]);
      expect(await live.runApproved()).toBe(0);
      await clock.advance(31 * 60_000);
      expect(await live.runApproved()).toBe(1);
    });
  });

  describe.skipIf(engineSkipped(engine))('re-board preview', () => {
    it('runs one at a time (each reads the platform): a second one meanwhile gets 409', async () => {
      const { db } = await open();
      const store = createBoardingStore(db);
      const clock = new FakeClock();
      await store.loans.insert({ id: 'A', state: 'queued' }, clock.now());
      let release: () => void = () => undefined;
      let started: () => void = () => undefined;
      const previewStarted = new Promise<void>((resolve) => (started = resolve));
      const service = createConsoleService({
        store,
        consoleStore: createConsoleStore(db),
        config: {
          console: consoleSchema.parse({}),
          bank: { timeZone: 'UTC' },
          reports: { dir: '/nonexistent' },
        },
        clock,
        logger: silentLogger(),
        reboardPreview: (loanId) =>
          new Promise((resolve) => {
            release = () => resolve({ loanId, outcome: 'not_acknowledged', state: 'queued' });
            started();
          }),
      });
      const first = service.reboardDiff(olga, 'A');
      // The first call looks the loan up before its preview starts: the second must come after that
      // (on PostgreSQL under load the second's look-up could otherwise finish first).
      await previewStarted;
      await expect(service.reboardDiff(olga, 'A')).rejects.toMatchObject({ status: 409 });
      release();
      expect(await first).toMatchObject({ outcome: 'not_acknowledged' });
      await expect(service.reboardDiff(olga, 'nope')).rejects.toMatchObject({ status: 404 });
    });

    it('a re-board check needs the operator role and is limited per user (a viewer spent the platform read budget through previews)', async () => {
      const { db } = await open();
      const store = createBoardingStore(db);
      const clock = new FakeClock();
      await store.loans.insert({ id: 'A', state: 'queued' }, clock.now());
      let reads = 0;
      const service = createConsoleService({
        store,
        consoleStore: createConsoleStore(db),
        config: {
          console: consoleSchema.parse({}),
          bank: { timeZone: 'UTC' },
          reports: { dir: '/nonexistent' },
        },
        clock,
        logger: silentLogger(),
        reboardPreview: (loanId) => {
          reads++;
          return Promise.resolve({ loanId, outcome: 'not_acknowledged', state: 'queued' });
        },
      });
      await expect(service.reboardDiff({ name: 'vera', roles: ['viewer'] }, 'A')).rejects.toMatchObject({
        status: 403,
      });
      expect(reads).toBe(0);
      for (let i = 0; i < PREVIEWS_PER_MINUTE; i++) await service.reboardDiff(olga, 'A');
      await expect(service.reboardDiff(olga, 'A')).rejects.toMatchObject({ status: 429 });
      expect(reads).toBe(PREVIEWS_PER_MINUTE);
      // Another operator has their own allowance; olga's returns after a minute.
      await service.reboardDiff({ name: 'otto', roles: ['operator'] }, 'A');
      await clock.advance(60_001);
      await service.reboardDiff(olga, 'A');
      expect(reads).toBe(PREVIEWS_PER_MINUTE + 2);
    });
  });
});
