import { describe, expect, it } from 'vitest';
import { planTargets, type TargetsInput } from '../../../src/ops/action-targets.js';
import { applyLoanAction } from '../../../src/ops/bulk.js';
import { RefusedError } from '../../../src/ops/refusal.js';
import { skipLoan } from '../../../src/ops/skip.js';
import { createConsoleStore } from '../../../src/store/console.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { named } from '../../../src/store/sql.js';
import { testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;

/** What an action acts on (ops/action-targets.ts): the console's requests plan by it, the apply re-checks. */
describe('action targets', () => {
  const open = testStores('sqlite');
  async function setup(o: { imaging?: boolean; batching?: boolean } = {}) {
    const { db } = await open();
    const store = createBoardingStore(db);
    await store.loans.insert({ id: 'Q1', state: 'quarantined', patch: { quarantineReason: 'mapping' } }, T0);
    await store.loans.insert(
      { id: 'Q2', state: 'quarantined', patch: { quarantineReason: 'core_rejected' } },
      T0,
    );
    // Boarded loans as the pipeline leaves them (one with review items).
    await db.write(async () => {
      for (const [id, review] of [
        ['A1', 2],
        ['A2', 0],
      ] as const)
        await db.run(
          ...named(
            `INSERT INTO loans (id, state, review_items, state_entered_at, created_at, updated_at)
             VALUES (@id, 'acknowledged', @review, @at, @at, @at)`,
            { id, review, at: T0 },
          ),
        );
    });
    const deps = {
      store,
      exceptions: createConsoleStore(db),
      batching: o.batching ?? false,
      imagingEnabled: o.imaging ?? false,
      now: T0,
      timeZone: 'UTC',
    };
    const plan = (input: TargetsInput) => planTargets(deps, input);
    const refusalOf = async (input: TargetsInput) => {
      const err = await plan(input).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RefusedError);
      return (err as RefusedError).refusal;
    };
    return { store, plan, refusalOf };
  }

  it('plans named loans with the state each was planned in, and refuses the ineligible with why', async () => {
    const { plan } = await setup({ imaging: true });
    expect(await plan({ action: 'retry', loans: ['Q1', 'A1', 'Q1', 'nope'] })).toEqual({
      loans: [
        { id: 'Q1', fromState: 'quarantined' },
        { id: 'A1', fromState: 'acknowledged' },
        { id: 'nope', fromState: null },
      ],
      filter: null,
      refused: [
        {
          loanId: 'A1',
          why: 'loan A1 is acknowledged; only quarantined, retry_wait or skipped loans can be retried',
        },
        { loanId: 'nope', why: 'no loan nope in the state database (see `loans list`)' },
      ],
    });
    expect((await plan({ action: 'reboard', loans: ['Q1', 'A2'] })).refused).toEqual([
      {
        loanId: 'Q1',
        why: 'loan Q1 is quarantined; only acknowledged loans can be re-boarded (retry the others)',
      },
    ]);
    expect((await plan({ action: 'imaging_reexport', loans: ['Q2'] })).refused).toEqual([
      {
        loanId: 'Q2',
        why: 'loan Q2 is quarantined; only acknowledged loans can be re-exported to imaging (retry the others)',
      },
    ]);
  });

  it('selects by filter: retry and skip take quarantined exceptions, a re-board acknowledged ones with review items', async () => {
    const { plan, refusalOf } = await setup();
    expect(await plan({ action: 'skip', filter: { reason: 'mapping' } })).toEqual({
      loans: [{ id: 'Q1', fromState: 'quarantined' }],
      filter: { reason: 'mapping' },
      refused: [],
    });
    expect((await plan({ action: 'reboard', filter: {} })).loans).toEqual([
      { id: 'A1', fromState: 'acknowledged' },
    ]);
    expect(await refusalOf({ action: 'reboard', filter: { state: 'quarantined' } })).toMatchObject({
      kind: 'invalid',
      field: 'filter.state',
    });
    expect(await refusalOf({ action: 'retry', filter: { minAgeDays: -1 } })).toMatchObject({
      kind: 'invalid',
      field: 'filter.minAgeDays',
      message: 'filter.minAgeDays: expected a whole number of business days ≥ 0',
    });
  });

  it('refuses what this process cannot do, and malformed targets, naming the field', async () => {
    const { refusalOf } = await setup();
    expect(await refusalOf({ action: 'seal' })).toMatchObject({ kind: 'invalid', field: 'action' });
    expect(await refusalOf({ action: 'strike_clear', loans: ['Q1'] })).toEqual({
      ok: false,
      kind: 'invalid',
      message: 'strike_clear takes no loans or filter',
      field: 'loans',
    });
    expect(await refusalOf({ action: 'imaging_reexport', loans: ['A1'] })).toMatchObject({
      message: 'action: imaging_reexport needs the imaging export (imaging.enabled)',
    });
    expect(await refusalOf({ action: 'retry', loans: [] })).toMatchObject({ field: 'loans' });
    expect(await refusalOf({ action: 'retry', loans: ['Q1'], filter: {} })).toMatchObject({
      message: 'retry: give "loans" (a list of ids) or "filter" (one of them)',
    });
  });

  it('the apply acts only on loans still in the state they were planned in', async () => {
    const { store, plan } = await setup();
    const t = await plan({ action: 'retry', filter: { state: 'quarantined' } });
    expect(t.loans.map((l) => l.id)).toEqual(['Q1', 'Q2']);
    // Between the plan (the request) and its apply (the approval), someone skips Q2.
    await skipLoan(store.loans, 'Q2', 'duplicate', 'ivan', T0 + 1);
    const res = await applyLoanAction(
      { store, now: () => T0 + 2 },
      { action: 'retry', loans: t.loans, actor: 'olga' },
    );
    expect(res.done.map((d) => d.loanId)).toEqual(['Q1']);
    expect(res.failed).toEqual([
      {
        loanId: 'Q2',
        message: 'loan Q2 is skipped now (quarantined when the request was made); not acted on',
      },
    ]);
    expect((await store.loans.get('Q1'))?.state).toBe('queued');
    expect((await store.loans.get('Q2'))?.state).toBe('skipped');
  });
});
