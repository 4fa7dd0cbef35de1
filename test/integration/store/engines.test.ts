/**
 * The store's repositories on both engines (issue 26): the same calls, the same answers, on an
 * in-memory SQLite database and on a fresh PostgreSQL database (a real server, test/support/pg.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createBoardingStore, type BoardingStore } from '../../../src/store/index.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { createInboxApplier } from '../../../src/store/inbox-apply.js';
import { FileBatchStore } from '../../../src/store/file-batches.js';
import { createLoanScan } from '../../../src/store/loan-scan.js';
import { createExternalRefStore } from '../../../src/store/identity/external-refs.js';
import { createLoanStats } from '../../../src/store/loan-stats.js';
import { createFundedTimeBackfill } from '../../../src/store/funded-time.js';
import { StaleStateError } from '../../../src/store/loans.js';
import { openLeadership } from '../../../src/store/leadership/leases.js';
import { FakeClock } from '../../support/fake-clock.js';
import { FencedOut } from '../../../src/store/sql.js';
import { PoolExhaustedError } from '../../../src/store/identity/numbers.js';
import { STORE_ENGINES, engineSkipped, openTestStore, type TestStore } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;

describe.each(STORE_ENGINES)('store on %s', (engine) => {
  const opened: TestStore[] = [];
  afterEach(async () => {
    while (opened.length > 0) await opened.pop()?.close();
  });
  const open = async (): Promise<{ t: TestStore; s: BoardingStore }> => {
    const t = await openTestStore(engine);
    opened.push(t);
    return { t, s: createBoardingStore(t.db) };
  };

  describe.skipIf(engineSkipped(engine))('repositories', () => {
    it('loans: a transition and its event in one transaction; stale and illegal steps change nothing', async () => {
      const { s } = await open();
      await s.loans.insert(
        {
          id: 'L1',
          state: 'queued',
          patch: { loanNumber: 'N1', releaseMarker: 'b1', centsAmount: 9_007_199_254_740_991 },
        },
        T0,
      );
      const row = await s.loans.transition(
        'L1',
        { to: 'fetched', expectedFrom: 'queued', detail: { documents: 2 } },
        T0 + 1,
      );
      expect(row).toMatchObject({
        id: 'L1',
        state: 'fetched',
        loanNumber: 'N1',
        centsAmount: 9_007_199_254_740_991,
        createdAt: T0,
        updatedAt: T0 + 1,
        reviewItems: 0,
      });
      await expect(
        s.loans.transition('L1', { to: 'mapped', expectedFrom: 'queued' }, T0 + 2),
      ).rejects.toThrow(StaleStateError);
      // The event's JSON cannot hold a BigInt: the whole transition rolls back.
      await expect(s.loans.transition('L1', { to: 'mapped', detail: { bad: 1n } }, T0 + 3)).rejects.toThrow();
      expect((await s.loans.require('L1')).state).toBe('fetched');
      const events = await s.loans.events('L1');
      expect(events.map((e) => [e.fromState, e.toState])).toEqual([
        [null, 'queued'],
        ['queued', 'fetched'],
      ]);
      expect(events[1]?.detail).toEqual({ documents: 2 });
      expect(typeof events[0]?.seq).toBe('number');
    });

    it('loans: due order, keyset pages, counts and the next retry', async () => {
      const { s } = await open();
      const released = ['2026-01-03T00:00:00Z', null, '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z', null];
      for (const [i, r] of released.entries())
        await s.loans.insert({ id: `L${i}`, state: 'queued', patch: { releasedAtIso: r } }, T0 + i);
      await s.loans.transition('L4', { to: 'retry_wait', patch: { nextAttemptAt: T0 + 10_000 } }, T0);
      const order = (await s.loans.due(T0 + 20_000)).map((r) => r.id);
      expect(order).toEqual(['L2', 'L3', 'L0', 'L1', 'L4']);
      expect((await s.loans.due(T0)).map((r) => r.id)).toEqual(['L2', 'L3', 'L0', 'L1']);
      const paged: string[] = [];
      let cursor = null;
      for (;;) {
        const p = await s.loans.duePage(T0 + 20_000, cursor, 2);
        paged.push(...p.ids);
        if (p.ids.length < 2) break;
        cursor = p.next;
      }
      expect(paged).toEqual(order);
      expect(await s.loans.dueCount(T0 + 20_000)).toBe(5);
      expect(await s.loans.nextDueAt()).toBe(T0 + 10_000);
      expect(await s.loans.countByState()).toMatchObject({ queued: 4, retry_wait: 1, acknowledged: 0 });
      expect((await s.loans.list({ state: 'retry_wait', enteredSince: T0 })).map((r) => r.id)).toEqual([
        'L4',
      ]);
      const stats = createLoanStats(s.db);
      expect(await stats.dueRetries(T0 + 20_000)).toBe(1);
      expect(await stats.oldestUnacknowledgedAt()).toBe(T0);
    });

    it('a unit of work commits together or not at all; a nested write joins it unless it asks for a savepoint', async () => {
      const { s } = await open();
      await expect(
        s.write(async () => {
          await s.loans.insert({ id: 'A', state: 'queued' }, T0);
          await s.keys.ensure('ack:A:1', 'ack', 'A', T0);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await s.loans.get('A')).toBeNull();
      expect(await s.keys.get('ack:A:1')).toBeNull();
      // Asked for, a savepoint rolls back alone and the outer unit commits the rest.
      await s.write(async () => {
        await s.loans.insert({ id: 'B', state: 'queued' }, T0);
        await expect(
          s.db.write(
            async () => {
              await s.loans.insert({ id: 'C', state: 'queued' }, T0);
              throw new Error('inner');
            },
            { savepoint: true },
          ),
        ).rejects.toThrow('inner');
      });
      expect(await s.loans.get('B')).not.toBeNull();
      expect(await s.loans.get('C')).toBeNull();
      // Joined (the default): a failure after a write spoils the whole unit even when its caller
      // catches it: half of it never commits.
      await expect(
        s.write(async () => {
          await s.loans.insert({ id: 'D', state: 'queued' }, T0);
          await s
            .write(async () => {
              await s.loans.insert({ id: 'E', state: 'queued' }, T0);
              throw new Error('joined');
            })
            .catch(() => undefined);
        }),
      ).rejects.toThrow('joined');
      expect(await s.loans.get('D')).toBeNull();
      expect(await s.loans.get('E')).toBeNull();
      // A joined write that fails before any statement leaves the unit intact.
      await s.write(async () => {
        await s.loans.insert({ id: 'F', state: 'queued' }, T0);
        await s.write(() => Promise.reject(new Error('early'))).catch(() => undefined);
      });
      expect(await s.loans.get('F')).not.toBeNull();
    });

    it('concurrent units of work do not interleave (read-then-write stays consistent)', async () => {
      const { s } = await open();
      await s.checkpoints.save('n', '0', T0);
      const bump = () =>
        s.write(async () => {
          const cur = Number((await s.checkpoints.get('n'))?.cursor ?? '0');
          await new Promise((r) => setTimeout(r, 1));
          await s.checkpoints.save('n', String(cur + 1), T0);
        });
      await Promise.all(Array.from({ length: 10 }, bump));
      expect((await s.checkpoints.get('n'))?.cursor).toBe('10');
    });

    it('idempotency keys: stored once, completed, found unfinished by prefix', async () => {
      const { s } = await open();
      const a = await s.keys.ensure('webhook-endpoint:create:fp:1', 'webhook-endpoint:create', null, T0);
      const b = await s.keys.ensure('webhook-endpoint:create:fp:1', 'webhook-endpoint:create', null, T0 + 5);
      expect(b.createdAt).toBe(a.createdAt);
      expect(await s.keys.unfinished('webhook-endpoint:create', 'webhook-endpoint:create:fp:')).toBe(
        'webhook-endpoint:create:fp:1',
      );
      await s.keys.complete('webhook-endpoint:create:fp:1', 200, { ok: true }, T0 + 6);
      expect(await s.keys.unfinished('webhook-endpoint:create', 'webhook-endpoint:create:fp:')).toBeNull();
      expect(await s.keys.get('webhook-endpoint:create:fp:1')).toMatchObject({
        status: 200,
        response: { ok: true },
        completedAt: T0 + 6,
      });
    });

    it("a fenced-out replica's transition changes nothing: the fence is in the UPDATE, and the whole step rolls back", async () => {
      const { s } = await open();
      const clock = new FakeClock({ start: Date.now() });
      const lead = (holder: string) =>
        openLeadership(s.db, {
          name: 'boarding',
          holder,
          clock,
          ttlMs: 60_000,
          renewEveryMs: 5_000,
          isAlive: () => true,
        });
      const a = await lead('host-a:1:a');
      const b = await lead('host-b:2:b');
      await a.tick();
      const seen: string[] = [];
      s.db.onStatement = (text) => seen.push(text);
      const fetched = await a.guard(s.db, async () => {
        const row = await s.loans.insert({ id: 'X', state: 'queued' }, T0);
        return s.loans.transition('X', { to: 'fetched', row, patch: { payloadHash: 'h1' } }, T0 + 1);
      });
      s.db.onStatement = undefined;
      expect(fetched).toMatchObject({ state: 'fetched', payloadHash: 'h1', updatedAt: T0 + 1 });
      expect(await s.loans.get('X')).toEqual(fetched);
      // SQLite checks the lease in the transition's own statement (no SELECT of the lease first);
      // PostgreSQL locks the lease row FOR SHARE when the transaction begins.
      const update = seen.find((t) => t.startsWith('UPDATE loans SET'));
      if (engine === 'sqlite')
        expect(update).toMatch(/AND state = \? AND EXISTS \(SELECT 1 FROM leases WHERE/);
      else expect(update).toMatch(/AND state = \?$/);
      const before = { row: await s.loans.get('X'), events: await s.loans.events('X') };
      if (engine === 'sqlite')
        await s.db.run(`UPDATE leases SET expires_at = expires_at - 120000 WHERE name = 'boarding'`);
      else
        await s.db.run(
          "UPDATE leader_lease SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'boarding'",
        );
      await b.tick();
      expect(b.term?.epoch).toBe(2);
      // a still trusts its term (its clock did not move): its step (a key, then the transition) is refused.
      await expect(
        a.guard(s.db, () =>
          s.write(async () => {
            await s.keys.store('ack:X:1', 'ack', 'X', T0 + 2);
            await s.loans.transition(
              'X',
              { to: 'mapped', row: fetched, patch: { mappingVersion: 'v1' } },
              T0 + 2,
            );
          }),
        ),
      ).rejects.toThrow(FencedOut);
      expect(a.role).toBe('standby');
      expect(await s.loans.get('X')).toEqual(before.row);
      expect(await s.loans.events('X')).toEqual(before.events);
      expect(await s.keys.get('ack:X:1')).toBeNull();
      // The leader's copy is stale once someone else moved the loan: the UPDATE changes nothing.
      await b.guard(s.db, () => s.loans.transition('X', { to: 'skipped', row: fetched }, T0 + 3));
      await expect(
        b.guard(s.db, () => s.loans.transition('X', { to: 'mapped', row: fetched }, T0 + 4)),
      ).rejects.toThrow(StaleStateError);
      expect((await s.loans.get('X'))?.state).toBe('skipped');
      await b.stop();
      await a.stop();
    });

    it('leadership: one leader; every acquisition a new epoch; a stale leader is fenced out with 0 rows changed and steps down', async () => {
      const { s } = await open();
      const clock = new FakeClock({ start: Date.now() });
      const lead = (holder: string) =>
        openLeadership(s.db, {
          name: 'boarding',
          holder,
          clock,
          ttlMs: 60_000,
          renewEveryMs: 5_000,
          isAlive: () => true,
        });
      const a = await lead('host-a:1:a');
      const b = await lead('host-b:2:b');
      await a.tick();
      expect(a.term?.epoch).toBe(1);
      await b.tick();
      expect(b.role).toBe('standby');
      expect(await b.read()).toMatchObject({ holder: 'host-a:1:a', epoch: 1 });
      await a.guard(s.db, () => s.loans.insert({ id: 'X', state: 'queued' }, T0));
      expect(await s.loans.get('X')).not.toBeNull();
      // a stalls: its lease expires on the database's clock, b takes over.
      if (engine === 'sqlite')
        await s.db.run(`UPDATE leases SET expires_at = expires_at - 120000 WHERE name = 'boarding'`);
      else
        await s.db.run(
          "UPDATE leader_lease SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'boarding'",
        );
      await b.tick();
      expect(b.term?.epoch).toBe(2);
      // a's own clock did not move, so it still trusts its term: the store refuses its write.
      expect(a.role).toBe('leader');
      await expect(a.guard(s.db, () => s.loans.insert({ id: 'Y', state: 'queued' }, T0))).rejects.toThrow(
        FencedOut,
      );
      expect(await s.loans.get('Y')).toBeNull();
      expect(a.role).toBe('standby');
      await b.guard(s.db, () => s.loans.insert({ id: 'Z', state: 'queued' }, T0));
      expect(await s.loans.get('Z')).not.toBeNull();
      // A graceful stop frees the lease at once: a takes it back in a new epoch.
      await b.stop();
      await a.tick();
      expect(a.term?.epoch).toBe(3);
      await a.stop();
    });

    it('numbers: one per key forever; a rolled-back allocation leaves nothing; an exhausted pool refuses', async () => {
      const t = await openTestStore(engine);
      opened.push(t);
      const pools = {
        account: {
          ranges: [{ from: '1', to: '3' }],
          prefix: '',
          width: 3,
          checkDigit: 'none' as const,
          warnAt: 0.5,
        },
        customer: {
          ranges: [{ from: '10', to: '99' }],
          prefix: '',
          width: 2,
          checkDigit: 'none' as const,
          warnAt: 0.9,
        },
      };
      const s = createBoardingStore(t.db, { numberPools: pools });
      const first = await s.numbers.allocate('account', 'L1', T0);
      expect(first).toEqual({ number: '001', fresh: true });
      expect(await s.numbers.allocate('account', 'L1', T0)).toEqual({ number: '001', fresh: false });
      await expect(
        s.write(async () => {
          await s.numbers.allocate('account', 'L2', T0);
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      expect(await s.numbers.get('account', 'L2')).toBeNull();
      expect((await s.numbers.allocate('account', 'L2', T0)).number).toBe('002');
      expect(await s.numbers.keyOf('account', '002')).toBe('L2');
      expect(await s.numbers.peek('account')).toBe('003');
      await s.numbers.allocate('account', 'L3', T0);
      await expect(s.numbers.allocate('account', 'L4', T0)).rejects.toThrow(PoolExhaustedError);
      expect(await s.numbers.usage('account')).toMatchObject({
        used: 3,
        capacity: 3,
        ratio: 1,
        allocated: 3,
      });
    });

    it('customers: claim, resolve, written, streamed resolutions', async () => {
      const { s } = await open();
      expect(await s.customers.checkKey('fp1', T0)).toBe('stored');
      expect(await s.customers.checkKey('fp1', T0)).toBe('same');
      expect(await s.customers.checkKey('fp2', T0)).toBe('different');
      expect(await s.customers.hasKey()).toBe(true);
      expect((await s.customers.claim('h1', '900', 'L1', T0)).status).toBe('claimed');
      expect((await s.customers.claim('h1', '901', 'L2', T0)).creatorLoanId).toBe('L1');
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      await s.loans.update('L1', { writtenAt: T0 + 1 }, T0 + 1);
      await s.customers.resolved(
        {
          loanId: 'L1',
          entityId: 'E1',
          cif: '900',
          tinHash: 'h1',
          matchedBy: 'created',
          existing: false,
          nameAgrees: null,
        },
        T0 + 1,
      );
      await s.customers.resolved(
        {
          loanId: 'L1',
          entityId: 'E2',
          cif: null,
          tinHash: 'h2',
          matchedBy: 'tin',
          existing: true,
          nameAgrees: false,
        },
        T0 + 2,
      );
      await s.customers.markWritten('L1', new Map(), T0 + 3);
      expect((await s.customers.byTin('h1'))?.status).toBe('written');
      await s.customers.setCif('h2', '777', T0 + 4);
      expect(
        (await s.customers.forLoan('L1')).map((r) => [r.entityId, r.cif, r.existing, r.nameAgrees]),
      ).toEqual([
        ['E1', '900', false, null],
        ['E2', '777', true, false],
      ]);
      expect((await s.customers.find('900')).map((x) => x.entityId)).toEqual(['E1']);
      const streamed = [];
      for await (const r of s.customers.resolvedBetween(T0, T0 + 10)) streamed.push(r.entityId);
      expect(streamed).toEqual(['E1', 'E2']);
    });

    it("an entity's loans resolved in the same millisecond come in the order they were resolved, also after updates", async () => {
      const { s } = await open();
      // 60 loans resolve one entity at the same instant; every other one without a CIF yet.
      const ids = Array.from({ length: 60 }, (_, i) => `L-${String(59 - i).padStart(2, '0')}`);
      for (const [i, loanId] of ids.entries()) {
        await s.customers.resolved(
          {
            loanId,
            entityId: 'E1',
            cif: i % 2 === 0 ? null : '900',
            tinHash: 'h1',
            matchedBy: i === 0 ? 'created' : 'tin',
            existing: i > 0,
            nameAgrees: null,
          },
          T0,
        );
      }
      // The core assigns the CIF: half the rows are updated (PostgreSQL writes new row versions).
      await s.customers.setCif('h1', '900', T0 + 1);
      const got = await s.customers.forEntity('E1');
      expect(got.map((r) => r.loanId)).toEqual(ids);
      expect(got.every((r) => r.cif === '900')).toBe(true);
    });

    it('webhook inbox: one row per delivery id, processed in event order by one pass, counted and pruned', async () => {
      const { s, t } = await open();
      const inbox = createWebhookInbox(t.db);
      const ev = (id: string, type: string, loanId: string | null, occurredAt: number) => ({
        webhookId: id,
        type,
        loanId,
        occurredAt,
        payload: { type, data: { loanId, fundedAt: new Date(occurredAt).toISOString() } },
      });
      expect(await inbox.insert(ev('w2', 'loan.funded', 'L1', T0 + 20), T0 + 30)).toBe(true);
      expect(await inbox.insert(ev('w1', 'loan.created', 'L1', T0 + 10), T0 + 31)).toBe(true);
      expect(await inbox.insert(ev('w1', 'loan.created', 'L1', T0 + 10), T0 + 32)).toBe(false);
      expect((await inbox.pending(10)).map((r) => r.webhookId)).toEqual(['w1', 'w2']);
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      const pass = await createInboxApplier(t.db, inbox).pass(10, T0 + 40);
      expect(pass.rows).toBe(2);
      expect(pass.outcomes.map((o) => o.outcome)).toEqual(['processed', 'processed']);
      expect((await s.loans.require('L1')).fundedAtIso).toBe(new Date(T0 + 20).toISOString());
      expect(await inbox.stats()).toEqual({ pending: 0, failed: 0, processed: 2, oldestPendingAt: null });
      expect(await inbox.fundedAt('L1')).toBe(T0 + 20);
      expect(await inbox.countOfType('loan.funded')).toBe(1);
      expect(await createFundedTimeBackfill(t.db, inbox).run(T0 + 50)).toBe(0);
      expect(await inbox.prune(T0 + 100, 1)).toBe(1);
      expect(await inbox.prune(T0 + 100)).toBe(1);
      expect(await inbox.capUnknownFunded(0)).toBe(0);
    });

    it('file batches: append, correction after a freeze, seal clears the lines, tie-out rows', async () => {
      const { s, t } = await open();
      const batches = new FileBatchStore(t.db);
      const input = (loanId: string, now: number, digest = 'd1') => ({
        loanId,
        principalCents: '123456789012345678901',
        now,
        layout: 'layout: 1',
        openBatch: () => ({ cutoffAt: T0 + 1000, day: '2026-11-25' }),
        render: () => ({
          digest,
          rowsJson: JSON.stringify({ loans: { lines: [`line ${loanId}`], amounts: {} } }),
          recordCount: 1,
        }),
      });
      expect(await batches.append(input('L1', T0))).toMatchObject({
        batchId: '2026-11-25-001',
        kind: 'new',
        outcome: 'appended',
      });
      expect(await batches.append(input('L1', T0 + 1))).toMatchObject({ outcome: 'unchanged' });
      expect(await batches.append(input('L2', T0 + 2))).toMatchObject({ outcome: 'appended' });
      expect(await batches.counts('2026-11-25-001')).toEqual({ loans: 2, corrections: 0, records: 2 });
      expect(await batches.principalOf('2026-11-25-001')).toBe('246913578024691357802');
      expect(await batches.freezeDue(T0 + 1000)).toBe('2026-11-25-001');
      const next = await batches.append({
        ...input('L1', T0 + 1001, 'd2'),
        openBatch: () => ({ cutoffAt: T0 + 5000, day: '2026-11-25' }),
      });
      expect(next).toMatchObject({ batchId: '2026-11-25-002', kind: 'correction' });
      const loans = [];
      for await (const l of batches.loansOf('2026-11-25-001')) loans.push(l.loanId);
      expect(loans).toEqual(['L1', 'L2']);
      expect((await batches.sealing()).map((b) => b.id)).toEqual(['2026-11-25-001']);
      expect(
        await batches.markSealed('2026-11-25-001', T0 + 2000, { principalCents: '246913578024691357802' }),
      ).toBe(true);
      expect(await batches.markSealed('2026-11-25-001', T0 + 2000, { principalCents: '0' })).toBe(false);
      expect(await batches.get('2026-11-25-001')).toMatchObject({
        status: 'sealed',
        principalCents: '246913578024691357802',
      });
      expect(await batches.hasLoan('L2')).toBe(true);
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      await s.loans.transition('L1', { to: 'acknowledged', patch: { centsAmount: 5 } }, T0);
      const tie = await batches.tieOut(T0 + 3000);
      expect(tie).toMatchObject({
        sealedBatches: 1,
        corrections: 0,
        acknowledgedCents: [{ cents: 5 }],
        notSealedPastCutoff: [],
      });
      expect(tie?.sealedCents).toHaveLength(2);
    });

    it('loan scan, daemon status and external refs', async () => {
      const { s, t } = await open();
      for (let i = 0; i < 3; i++) await s.loans.insert({ id: `S${i}`, state: 'queued' }, T0 + i);
      await s.loans.recordEvent(
        'S1',
        {
          kind: 'warning',
          reason: '1 review item(s)',
          detail: { warnings: [{ code: 'c', field: 'f', message: 'm', at: 'x:1:1' }] },
        },
        T0,
      );
      const scan = createLoanScan(t.db, null);
      expect(await scan.count()).toBe(3);
      const ids = [];
      for await (const r of scan.rows()) ids.push(r.id);
      expect(ids).toEqual(['S0', 'S1', 'S2']);
      expect(await scan.knows('S1')).toBe(true);
      expect(await scan.reviewItems('S1', 10)).toEqual([
        { code: 'c', field: 'f', message: 'm', at: 'x:1:1' },
      ]);
      await s.daemon.publish({
        owner: 'd1',
        pid: 7,
        host: 'h',
        startedAt: T0,
        updatedAt: T0,
        mappingVersion: 'v1',
        mappingDir: '/m',
        reloadError: null,
      });
      expect(await s.daemon.touch('d1', T0 + 1, { mappingVersion: 'v2' })).toBe(true);
      expect(await s.daemon.requestCycle('ops', T0 + 2)).toBe(1);
      expect(await s.daemon.get('d1')).toMatchObject({
        mappingVersion: 'v2',
        cycleRequestedBy: 'ops',
        cycleRequestedAt: T0 + 2,
      });
      await s.daemon.remove('d1');
      expect(await s.daemon.all()).toEqual([]);
      const refs = createExternalRefStore(t.db);
      await refs.remember('fineract', 'digest1', 'platform-id-1', 'loan', T0);
      await refs.remember('fineract', 'digest1', 'other', 'loan', T0);
      expect(await refs.platformIdOf('fineract', 'digest1')).toBe('platform-id-1');
      expect(await t.db.writeBlocker()).toBeNull();
    });
  });
});
