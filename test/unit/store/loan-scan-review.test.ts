import { describe, expect, it } from 'vitest';
import { createBoardingStore } from '../../../src/store/index.js';
import { createLoanScan, reviewItemsFromDetail } from '../../../src/store/loan-scan.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';

const T0 = 1_700_000_000_000;

describe.each(STORE_ENGINES)('review items for the reconciliation report on %s', (engine) => {
  const open = testStores(engine);

  it.skipIf(engineSkipped(engine))(
    "reads the loan's latest list of review items (a reboard's replaces the board's), bounded and redacted",
    async () => {
      const { db } = await open();
      const s = createBoardingStore(db);
      await s.loans.insert({ id: 'L1', state: 'queued' }, T0);
      const items = (n: number, tag: string) =>
        Array.from({ length: n }, (_, i) => ({
          code: 'approximated',
          field: `loan.f${i}`,
          message: `${tag} ${i}`,
          at: `loan.yaml:${i + 1}:3`,
        }));
      await s.loans.recordEvent(
        'L1',
        {
          kind: 'warning',
          reason: '3 review item(s)',
          detail: { mappingVersion: 'v1', warnings: items(3, 'board') },
        },
        T0,
      );
      const scan = createLoanScan(db, null);
      expect((await scan.reviewItems('L1', 10)).map((r) => r.message)).toEqual([
        'board 0',
        'board 1',
        'board 2',
      ]);
      await s.loans.recordEvent(
        'L1',
        {
          kind: 'ops',
          reason: 'reboard: fix',
          detail: {
            mappingVersion: 'v2',
            warnings: [...items(11, 'reboard'), { code: 'defaulted', field: 'x', message: 'tin 123456789' }],
          },
        },
        T0 + 1,
      );
      const got = await scan.reviewItems('L1', 12);
      expect(got).toHaveLength(12);
      expect(got[0]).toEqual({
        code: 'approximated',
        field: 'loan.f0',
        message: 'reboard 0',
        at: 'loan.yaml:1:3',
      });
      expect(got[11]).toEqual({ code: 'defaulted', field: 'x', message: 'tin [redacted-tin]', at: null });
      expect(await scan.reviewItems('L1', 2)).toHaveLength(2);
      expect(await scan.reviewItems('nobody', 10)).toEqual([]);
    },
  );
});

describe('review items read from an event detail', () => {
  it('leaves out what it cannot read instead of failing the report', () => {
    expect(reviewItemsFromDetail(null, 10)).toEqual([]);
    expect(reviewItemsFromDetail('not json', 10)).toEqual([]);
    expect(reviewItemsFromDetail('{"warnings":"many"}', 10)).toEqual([]);
    expect(reviewItemsFromDetail('{"warnings":[null,{"code":7}]}', 10)).toEqual([
      { code: '', field: '', message: '', at: null },
      { code: '7', field: '', message: '', at: null },
    ]);
  });
});
