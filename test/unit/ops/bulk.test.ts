import { describe, expect, it } from 'vitest';
import { applyLoanAction, CHUNK, planLoans, plannedLoans } from '../../../src/ops/bulk.js';
import { skipLoan } from '../../../src/ops/skip.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;

/** The one rule of retry and skip (ops/bulk.ts), which the CLI and the console's executor share. */
describe('bulk retry and skip', () => {
  const open = testStores('sqlite');
  const quarantined = async (n: number) => {
    const store = createBoardingStore((await open()).db);
    for (let i = 0; i < n; i++)
      await store.loans.insert(
        { id: `L${i}`, state: 'quarantined', patch: { quarantineReason: 'mapping' } },
        T0,
      );
    return store;
  };

  it('a loan skipped by someone else after the retry was planned is named, not retried (the CLI retried it)', async () => {
    const store = await quarantined(2);
    const plans = await planLoans(store, 'retry', ['L0', 'L1']);
    expect(plans.every((p) => p.ok)).toBe(true);
    // Between the plan (--dry-run, the confirmation) and the write, another operator skips L1.
    await skipLoan(store.loans, 'L1', 'duplicate of L0', 'ivan', T0 + 1);
    const res = await applyLoanAction(
      { store, now: () => T0 + 2 },
      { action: 'retry', loans: plannedLoans(plans), actor: 'olga' },
    );
    expect(res.done).toEqual([{ loanId: 'L0', ackOnly: false }]);
    expect(res.failed).toEqual([
      {
        loanId: 'L1',
        message: 'loan L1 is skipped now (quarantined when the request was made); not acted on',
      },
    ]);
    expect((await store.loans.get('L0'))?.state).toBe('queued');
    expect((await store.loans.get('L1'))?.state).toBe('skipped');
    const ops = (await store.loans.events('L1')).filter((e) => e.kind === 'ops');
    expect(ops.map((e) => e.actor)).toEqual(['ivan']);
  });

  it('changes loans one chunk per transaction; a stop between chunks leaves the rest untouched', async () => {
    const n = CHUNK + 50;
    const store = await quarantined(n);
    let transactions = 0;
    const counted = {
      loans: store.loans,
      write: <T>(fn: () => Promise<T>) => (transactions++, store.write(fn)),
    };
    const stop = new AbortController();
    const plans = await planLoans(
      store,
      'skip',
      [...Array(n).keys()].map((i) => `L${i}`),
    );
    const res = await applyLoanAction(
      { store: counted, now: () => T0 + 1 },
      {
        action: 'skip',
        loans: plannedLoans(plans),
        actor: 'olga',
        reason: 'withdrawn',
        signal: stop.signal,
        onProgress: (handled) => (handled === CHUNK ? stop.abort() : undefined),
      },
    );
    expect(res).toMatchObject({ stopped: true, failed: [] });
    expect(res.done).toHaveLength(CHUNK);
    expect(transactions).toBe(1);
    const counts = await store.loans.countByState();
    expect(counts.skipped).toBe(CHUNK);
    expect(counts.quarantined).toBe(50);
  });
});
