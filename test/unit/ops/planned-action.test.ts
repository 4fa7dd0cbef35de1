import { describe, expect, it } from 'vitest';
import { planTargets } from '../../../src/ops/action-targets.js';
import { applyPlanned, type PlannedAction } from '../../../src/ops/planned-action.js';
import { retryLoan } from '../../../src/ops/retry.js';
import { createConsoleStore } from '../../../src/store/console.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { named } from '../../../src/store/sql.js';
import { testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;

/** A plan made earlier (a console request) applied later (its approval): ops/planned-action.ts. */
describe('planned actions', () => {
  const open = testStores('sqlite');
  async function setup() {
    const { db } = await open();
    const store = createBoardingStore(db);
    await store.loans.insert({ id: 'Q1', state: 'quarantined', patch: { quarantineReason: 'mapping' } }, T0);
    await store.loans.insert({ id: 'Q2', state: 'quarantined', patch: { quarantineReason: 'mapping' } }, T0);
    await db.write(async () => {
      for (const id of ['A1', 'A2'])
        await db.run(
          ...named(
            `INSERT INTO loans (id, state, state_entered_at, created_at, updated_at)
             VALUES (@id, 'acknowledged', @at, @at, @at)`,
            { id, at: T0 },
          ),
        );
    });
    const targets = (action: PlannedAction['action'], loans: string[]) =>
      planTargets(
        {
          store,
          exceptions: createConsoleStore(db),
          batching: false,
          imagingEnabled: true,
          now: T0,
          timeZone: 'UTC',
        },
        { action, loans },
      );
    const planned = (action: PlannedAction['action'], loans: PlannedAction['loans']): PlannedAction => ({
      action,
      loans,
      batch: null,
      actor: 'olga (console, approved by ivan)',
      reason: 'duplicate boards',
      loanReason: 'duplicate boards (console request r-1)',
      origin: { request: { id: 'r-1', reason: 'duplicate boards', approvedBy: 'ivan' } },
      signal: new AbortController().signal,
    });
    return { db, store, targets, planned };
  }

  it('a skip applies to the loans still as planned; one retried meanwhile is named, not skipped', async () => {
    const { store, targets, planned } = await setup();
    const t = await targets('skip', ['Q1', 'Q2']);
    await retryLoan(store.loans, 'Q2', 'vera', T0 + 1);
    const res = await applyPlanned({ store, now: () => T0 + 2 }, planned('skip', t.loans));
    expect(res).toEqual({
      status: 'executed',
      done: 1,
      failed: [
        {
          loanId: 'Q2',
          message: 'loan Q2 is queued now (quarantined when the request was made); not acted on',
        },
      ],
      detail: null,
    });
    expect((await store.loans.get('Q1'))?.state).toBe('skipped');
    expect((await store.loans.get('Q2'))?.state).toBe('queued');
    const events = await store.loans.events('Q1');
    expect(events.at(-1)).toMatchObject({
      actor: 'olga (console, approved by ivan)',
      reason: 'duplicate boards',
    });
  });

  it('an imaging re-export re-checks each loan: one no longer acknowledged is named and not exported', async () => {
    const { db, store, targets, planned } = await setup();
    const t = await targets('imaging_reexport', ['A1', 'A2']);
    expect(t.refused).toEqual([]);
    // Between the request and its approval A2 is released again and queued.
    await db.run("UPDATE loans SET state = 'queued' WHERE id = 'A2'");
    const exported: string[] = [];
    const res = await applyPlanned(
      {
        store,
        now: () => T0 + 2,
        // The export itself (ops/imaging.ts reexportLoan over the daemon's exporter) is the integration test's.
        imagingReexport: (loanId, actor, reason) => {
          exported.push(`${loanId} by ${actor}: ${reason}`);
          return Promise.resolve({ batchId: '2026-11-25-0001', documents: ['d1', 'd2'] });
        },
      },
      planned('imaging_reexport', t.loans),
    );
    expect(exported).toEqual([
      'A1 by olga (console, approved by ivan): duplicate boards (console request r-1)',
    ]);
    expect(res).toEqual({
      status: 'executed',
      done: 1,
      failed: [
        {
          loanId: 'A2',
          message:
            'loan A2 is queued; only acknowledged loans can be re-exported to imaging (retry the others); not acted on',
        },
      ],
      detail: '2 document(s) re-exported into 2026-11-25-0001',
    });
  });
});
