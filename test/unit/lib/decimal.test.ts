import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatUnits, rescale } from '../../../src/lib/decimal.js';
import { compileLayout } from '../../../src/core/file/layout/layout.js';
import { renderRows, summaryLine } from '../../../src/core/file/layout/render.js';
import { centsToDecimal } from '../../../src/mapping/decimal.js';

/** Reads a decimal text back (independently of the code under test). */
const back = (s: string, decimals: number): bigint => {
  const neg = s.startsWith('-');
  const [i = '0', f = ''] = (neg ? s.slice(1) : s).split('.');
  expect(f.length).toBe(decimals);
  const v = BigInt(i + f);
  return neg ? -v : v;
};

describe('lib/decimal: the one formatting of exact decimals', () => {
  it('writes exactly `decimals` digits after the point, none for 0, never -0', () => {
    expect(formatUnits(125000050n, 2)).toBe('1250000.50');
    expect(formatUnits(5n, 2)).toBe('0.05');
    expect(formatUnits(-5n, 4)).toBe('-0.0005');
    expect(formatUnits(0n, 2)).toBe('0.00');
    expect(formatUnits(-0n, 2)).toBe('0.00');
    expect(formatUnits(42n, 0)).toBe('42');
    expect(formatUnits(-(2n ** 70n), 3)).toBe('-1180591620717411303.424');
  });

  it('round-trips every integer at every scale (property)', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }),
        fc.integer({ min: 0, max: 18 }),
        (v, d) => {
          expect(back(formatUnits(v, d), d)).toBe(v);
        },
      ),
    );
  });

  it('rescales up exactly and refuses to drop non-zero digits', () => {
    expect(rescale(725n, 2, 4)).toBe(72500n);
    expect(rescale(72500n, 4, 2)).toBe(725n);
    expect(rescale(72501n, 4, 2)).toBeUndefined();
    expect(rescale(-100n, 2, 0)).toBe(-1n);
  });

  it('the mapping helpers and the layout columns write the same text for the same amount', () => {
    const layout = compileLayout(`files:
  - name: l.csv
    record: loan
    format: csv
    columns:
      - { name: amount, field: amount, decimals: 2 }
      - { name: implied, field: amount, decimals: 2, implied: true }
    trailer:
      - { name: total, total: amount, decimals: 2 }
`).layout!;
    const file = layout.files[0]!;
    fc.assert(
      fc.property(fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }), (cents) => {
        const text = centsToDecimal(cents)!;
        const rows = renderRows(file, [{ type: 'loan', externalId: 'x', fields: { amount: text } }], {
          loanId: 'L',
          timeZone: 'America/Chicago',
          kind: 'new',
        });
        const [amount, implied] = rows.lines[0]!.split(',').map((c) => c.replace(/^'/, ''));
        expect(amount).toBe(text);
        expect(implied).toBe(text.replace('.', ''));
        const trailer = summaryLine(file, 'trailer', {
          batchId: 'b',
          timeZone: 'America/Chicago',
          batchDate: '2026-01-01',
          records: 1,
          loans: 1,
          totals: new Map([['amount@2', BigInt(rows.amounts['amount@2']!)]]),
        });
        expect(trailer?.replace(/^'/, '')).toBe(text);
      }),
      { numRuns: 200 },
    );
  });
});
