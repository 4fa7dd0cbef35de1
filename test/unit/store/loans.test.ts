import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteLeaseBackend } from '../../../src/store/leadership/leases.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { IllegalTransitionError, LOAN_STATES, isAllowedTransition } from '../../../src/store/loan-states.js';
import { StaleStateError } from '../../../src/store/loans.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const T0 = 1_700_000_000_000;

describe.each(STORE_ENGINES)('on %s', (engine) => {
  const open = testStores(engine);
  const store = async () => createBoardingStore((await open()).db);

  describe.skipIf(engineSkipped(engine))('loan store', () => {
    it('records a transition and its event in one step', async () => {
      const s = await store();
      await s.loans.insert(
        { id: 'L1', state: 'queued', patch: { loanNumber: 'N1', releaseMarker: 'b1' }, reason: 'released' },
        T0,
      );
      const row = await s.loans.transition(
        'L1',
        { to: 'fetched', expectedFrom: 'queued', detail: { documents: 2 } },
        T0 + 1,
      );
      expect(row.state).toBe('fetched');
      expect(row.loanNumber).toBe('N1');
      const events = await s.loans.events('L1');
      expect(events.map((e) => [e.fromState, e.toState])).toEqual([
        [null, 'queued'],
        ['queued', 'fetched'],
      ]);
      expect(events[1]?.detail).toEqual({ documents: 2 });
    });

    it('throws on an illegal transition and changes nothing', async () => {
      const s = await store();
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      await s.loans.transition('L1', { to: 'acknowledged' }, T0); // queued → acknowledged: ack-only retry
      await expect(s.loans.transition('L1', { to: 'written' }, T0)).rejects.toThrow(IllegalTransitionError);
      expect((await s.loans.require('L1')).state).toBe('acknowledged');
      expect(await s.loans.events('L1')).toHaveLength(2);
    });

    it('refuses a transition from a state the caller did not expect (stale step)', async () => {
      const s = await store();
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      await s.loans.transition('L1', { to: 'skipped', kind: 'ops', actor: 'alice', reason: 'duplicate' }, T0);
      await expect(s.loans.transition('L1', { to: 'fetched', expectedFrom: 'queued' }, T0)).rejects.toThrow(
        StaleStateError,
      );
      expect((await s.loans.events('L1')).at(-1)).toMatchObject({
        kind: 'ops',
        actor: 'alice',
        reason: 'duplicate',
      });
    });

    it('rolls the state back when the event cannot be written (one transaction)', async () => {
      const s = await store();
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      // JSON cannot hold a BigInt: the event's insert fails inside the transition's transaction.
      // (A circular detail no longer fails: stored details are cut at a fixed depth.)
      await expect(s.loans.transition('L1', { to: 'fetched', detail: { cents: 1n } }, T0)).rejects.toThrow();
      expect((await s.loans.require('L1')).state).toBe('queued');
    });

    it('lists due loans: working states and retry_wait whose time has come', async () => {
      const s = await store();
      for (const id of ['A', 'B', 'C', 'D']) await s.loans.insert({ id, state: 'queued' }, T0);
      await s.loans.transition('B', { to: 'retry_wait', patch: { nextAttemptAt: T0 + 1000 } }, T0);
      await s.loans.transition('C', { to: 'quarantined', patch: { quarantineReason: 'mapping' } }, T0);
      await s.loans.transition('D', { to: 'retry_wait', patch: { nextAttemptAt: T0 + 5000 } }, T0);
      expect((await s.loans.due(T0)).map((r) => r.id)).toEqual(['A']);
      expect((await s.loans.due(T0 + 1000)).map((r) => r.id).sort()).toEqual(['A', 'B']);
      expect(await s.loans.nextDueAt()).toBe(T0 + 1000);
      expect(await s.loans.countByState()).toMatchObject({
        queued: 1,
        retry_wait: 2,
        quarantined: 1,
        acknowledged: 0,
      });
    });

    it('pages due loan ids in the order due() lists them (a pass never holds every due row)', async () => {
      const s = await store();
      // Released at various times, some not released (NULL sorts last), ties broken by created_at then id.
      const released = [
        null,
        '2026-01-03T00:00:00Z',
        '2026-01-01T00:00:00Z',
        null,
        '2026-01-01T00:00:00Z',
        '2026-01-02T00:00:00Z',
      ];
      for (let i = 0; i < 23; i++) {
        await s.loans.insert(
          {
            id: `L${String(i % 7)}-${i}`,
            state: 'queued',
            patch: { releasedAtIso: released[i % released.length] ?? null },
          },
          T0 + (i % 4),
        );
      }
      await s.loans.transition('L0-0', { to: 'quarantined', patch: { quarantineReason: 'mapping' } }, T0);
      await s.loans.transition('L1-1', { to: 'retry_wait', patch: { nextAttemptAt: T0 + 5000 } }, T0);
      const all = (await s.loans.due(T0)).map((r) => r.id);
      expect(all).toHaveLength(21);
      const paged: string[] = [];
      let after = null;
      for (;;) {
        const page = await s.loans.duePage(T0, after, 4);
        paged.push(...page.ids);
        if (page.next === null) break;
        after = page.next;
      }
      expect(paged).toEqual(all);
      expect((await s.loans.duePage(T0 + 5000, null, 100)).ids).toEqual(
        (await s.loans.due(T0 + 5000)).map((r) => r.id),
      );
    });

    it('keeps every defined state reachable and terminal states closed', () => {
      for (const s of LOAN_STATES) {
        expect(LOAN_STATES.some((from) => isAllowedTransition(from, s)) || s === 'queued').toBe(true);
      }
      expect(isAllowedTransition('acknowledged', 'written')).toBe(false);
      expect(isAllowedTransition('quarantined', 'fetched')).toBe(false);
      expect(isAllowedTransition('skipped', 'fetched')).toBe(false);
    });
  });

  describe.skipIf(engineSkipped(engine))('idempotency keys and checkpoints', () => {
    it('stores a key once and keeps its first creation time', async () => {
      const s = await store();
      expect((await s.keys.ensure('ack:L1:b1', 'ack', 'L1', T0)).createdAt).toBe(T0);
      expect((await s.keys.ensure('ack:L1:b1', 'ack', 'L1', T0 + 5)).createdAt).toBe(T0);
      await s.keys.complete('ack:L1:b1', 200, { ok: true }, T0 + 6);
      expect(await s.keys.forLoan('L1')).toEqual([
        {
          key: 'ack:L1:b1',
          loanId: 'L1',
          operation: 'ack',
          createdAt: T0,
          completedAt: T0 + 6,
          status: 200,
          response: { ok: true },
        },
      ]);
      await expect(s.keys.ensure('x'.repeat(256), 'ack', 'L1', T0)).rejects.toThrow(/255/);
    });

    it('saves, resumes and clears a queue checkpoint', async () => {
      const s = await store();
      expect(await s.checkpoints.get('q')).toBeNull();
      await s.checkpoints.save('q', null, T0);
      await s.checkpoints.save('q', 'c2', T0 + 10);
      expect(await s.checkpoints.get('q')).toEqual({
        name: 'q',
        cursor: 'c2',
        startedAt: T0,
        updatedAt: T0 + 10,
      });
      await s.checkpoints.clear('q');
      expect(await s.checkpoints.get('q')).toBeNull();
    });
  });

  describe.skipIf(engineSkipped(engine))('no full tax id reaches the state store', () => {
    it('redacts tax ids in error messages and event details, dashed or bare', async () => {
      const s = await store();
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      await s.loans.transition(
        'L1',
        {
          to: 'quarantined',
          detail: {
            status: 422,
            body: {
              errors: [{ field: 'taxId', value: '123456789' }],
              note: 'ssn 123-45-6789, ein 12-3456789',
            },
            centsAmount: 125000050,
          },
          patch: {
            quarantineReason: 'core_rejected',
            lastErrorMessage: 'documentKey 987654321 already exists (EIN 98-7654321)',
          },
        },
        T0,
      );
      const row = await s.loans.require('L1');
      expect(row.lastErrorMessage).toBe('documentKey [redacted-tin] already exists (EIN [redacted-tin])');
      const raw =
        JSON.stringify(await s.db.all('SELECT * FROM loan_events')) +
        JSON.stringify(await s.db.all('SELECT * FROM loans'));
      for (const tin of ['123456789', '123-45-6789', '12-3456789', '987654321', '98-7654321'])
        expect(raw).not.toContain(tin);
      // Numbers are data, not text: a 9-digit amount in cents stays.
      expect((await s.loans.events('L1')).at(-1)?.detail).toMatchObject({ centsAmount: 125000050 });
    });
  });

  describe.skipIf(engineSkipped(engine))('amend (what a re-board records)', () => {
    it('refuses when the loan was released again meanwhile, and leaves the newer release as it is', async () => {
      const s = await store();
      await s.loans.insert({ id: 'R1', state: 'queued', patch: { releaseMarker: 'rel-1' } }, T0);
      for (const to of ['fetched', 'mapped', 'written', 'acknowledged'] as const)
        await s.loans.transition('R1', { to, patch: { mappingVersion: 'v1' } }, T0 + 1);
      // The daemon boarded a new release while `loans reboard` wrote the old one to the core.
      await s.loans.update('R1', { releaseMarker: 'rel-2', mappingVersion: 'v2' }, T0 + 2);
      await expect(
        s.loans.amend(
          'R1',
          {
            expected: 'acknowledged',
            expectedReleaseMarker: 'rel-1',
            patch: { mappingVersion: 'v3' },
            kind: 'ops',
            reason: 'reboard',
            actor: 'ops',
          },
          T0 + 3,
        ),
      ).rejects.toThrow(/released again meanwhile/);
      expect(await s.loans.get('R1')).toMatchObject({ mappingVersion: 'v2', releaseMarker: 'rel-2' });
      const ok = await s.loans.amend(
        'R1',
        {
          expected: 'acknowledged',
          expectedReleaseMarker: 'rel-2',
          patch: { mappingVersion: 'v3' },
          kind: 'ops',
          reason: 'reboard',
          actor: 'ops',
        },
        T0 + 4,
      );
      expect(ok.mappingVersion).toBe('v3');
    });
  });
});

// The SQLite lease backend's own rules (the local takeover of a dead pid); the fenced lease on both
// engines is in test/integration/store/engines.test.ts.
describe('leases (SQLite)', () => {
  const here = hostname();

  it('gives the lease to one holder at a time, a new epoch each time, and back after release', async () => {
    const db = openDatabase(':memory:');
    const leases = sqliteLeaseBackend(sqliteStore(db), () => true);
    expect(await leases.acquire('boarding', 'h:1:a', 60_000)).toEqual({ epoch: 1 });
    expect(await leases.acquire('boarding', 'h:2:b', 60_000)).toBeNull();
    expect(await leases.renew({ name: 'boarding', holder: 'h:1:a', epoch: 1 }, 60_000)).toBe(true);
    expect(await leases.renew({ name: 'boarding', holder: 'h:2:b', epoch: 1 }, 60_000)).toBe(false);
    expect(await leases.release({ name: 'boarding', holder: 'h:1:a', epoch: 1 })).toBe(true);
    expect(await leases.read('boarding')).toMatchObject({ holder: null, epoch: 1 });
    expect(await leases.acquire('boarding', 'h:2:b', 60_000)).toEqual({ epoch: 2 });
    // The old holder's epoch is gone for good: it cannot renew its way back.
    expect(await leases.renew({ name: 'boarding', holder: 'h:1:a', epoch: 1 }, 60_000)).toBe(false);
  });

  it('takes over from a holder whose lease expired, or whose process on this host is gone; never from a live one elsewhere', async () => {
    const db = openDatabase(':memory:');
    expect(await sqliteLeaseBackend(sqliteStore(db)).acquire('boarding', 'x:1:a', 60_000)).toEqual({
      epoch: 1,
    });
    // On another host, only the expiry counts.
    expect(
      await sqliteLeaseBackend(sqliteStore(db), () => false).acquire('boarding', 'y:2:b', 60_000),
    ).toBeNull();
    db.prepare("UPDATE leases SET expires_at = expires_at - 61000 WHERE name = 'boarding'").run();
    expect(await sqliteLeaseBackend(sqliteStore(db)).acquire('boarding', 'y:2:b', 60_000)).toEqual({
      epoch: 2,
    });
    // A SIGKILLed process on this host: its pid is gone, its unexpired lease is free.
    db.prepare('UPDATE leases SET host = ?, pid = 999999 WHERE name = ?').run(here, 'boarding');
    expect(
      await sqliteLeaseBackend(sqliteStore(db), (pid) => pid !== 999999).acquire(
        'boarding',
        `${here}:3:c`,
        60_000,
      ),
    ).toEqual({ epoch: 3 });
  });
});
