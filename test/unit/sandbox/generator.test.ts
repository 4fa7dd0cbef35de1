import { describe, expect, it } from 'vitest';
import {
  amortizedMonthlyPayment,
  generateLoan,
  PRIME_BPS,
  type AmountProfile,
} from '../../../src/sandbox/generator.js';
import { createRng } from '../../../src/sandbox/rng.js';
import { loanSchema } from '../../../src/contract/schemas.js';
import { publicLoan } from '../../../src/sandbox/serialize.js';

function batch(seed: number, n: number, amounts: AmountProfile = 'extreme') {
  const rng = createRng(seed);
  return Array.from({ length: n }, (_, i) => generateLoan(rng, i, 'org', { amounts }));
}

describe('data generator', () => {
  it('is deterministic for a seed and different for another', () => {
    const strip = (b: ReturnType<typeof batch>) =>
      b.map((g) => ({
        ...g,
        documents: g.documents.map((d) => ({ ...d, bytes: d.bytes.toString('base64') })),
      }));
    expect(strip(batch(5, 20))).toEqual(strip(batch(5, 20)));
    expect(batch(6, 5).map((g) => g.loan.fields.id)).not.toEqual(batch(5, 5).map((g) => g.loan.fields.id));
  });

  it('covers every status, frequency, rate type and loan type, with schema-valid integer money', () => {
    const loans = batch(1, 25).map((g) => g.loan);
    const set = (f: (l: (typeof loans)[number]) => unknown) => new Set(loans.map(f));
    expect(set((l) => l.fields.status).size).toBe(6);
    expect(set((l) => l.fields.paymentFrequency).size).toBe(8);
    expect(set((l) => l.fields.rateType).size).toBe(2);
    expect(set((l) => l.fields.type).size).toBe(2);
    for (const l of loans) {
      expect(loanSchema.safeParse(publicLoan(l)).success).toBe(true);
      expect(Number.isSafeInteger(l.fields.centsAmount)).toBe(true);
      expect(l.people.length).toBeLessThanOrEqual(3);
      if (l.fields.type === 'business') expect(l.businesses.length).toBeGreaterThanOrEqual(1);
      expect(l.businesses.length).toBeLessThanOrEqual(3);
    }
    expect(loans.some((l) => (l.fields.centsAmount ?? 0) > 100_000_000_000)).toBe(true);
  });

  it('realistic (the default): amounts, rates, terms and payments of small-business and personal lending (regression: a $1.7 trillion demo)', () => {
    const rng = createRng(1);
    const loans = Array.from({ length: 2000 }, (_, i) => generateLoan(rng, i, 'org').loan);
    const bounds: Record<string, [number, number]> = {
      prod_personal: [1_000_00, 50_000_00],
      prod_loc: [10_000_00, 1_000_000_00],
      prod_equip: [10_000_00, 2_000_000_00],
      prod_sba7a: [50_000_00, 5_000_000_00],
      prod_cre: [250_000_00, 5_000_000_00],
    };
    let total = 0;
    for (const l of loans) {
      const f = l.fields;
      const cents = f.centsAmount as number;
      total += cents;
      expect(cents % 100, 'whole dollars').toBe(0);
      expect(cents).toBeGreaterThanOrEqual(1_000_00);
      expect(cents).toBeLessThanOrEqual(5_000_000_00);
      const b = f.product ? bounds[f.product.id] : undefined;
      if (b) {
        expect(cents).toBeGreaterThanOrEqual(b[0]);
        expect(cents).toBeLessThanOrEqual(b[1]);
      }
      if (f.type === 'personal') expect(cents).toBeLessThanOrEqual(50_000_00);
      expect(f.monthsTerm).toBeGreaterThanOrEqual(6);
      expect(f.monthsTerm).toBeLessThanOrEqual(300);
      // Rates in percent a borrower sees: 1.5 %–24 %; variable = prime + spread.
      expect(f.bpsRate).toBeGreaterThanOrEqual(575);
      expect(f.bpsRate).toBeLessThanOrEqual(2_399);
      if (f.rateType === 'variable') expect(l.rateParts).toMatchObject({ bpsPrimeRate: PRIME_BPS });
      // The payment amortises the amount at the rate over the term (after interest-only months).
      const io = f.monthsInterestOnly ?? 0;
      expect(io).toBeLessThanOrEqual(f.monthsTerm as number);
      if (f.paymentFrequency === 'lump sum' || f.paymentFrequency === 'irregular payments')
        expect(f.centsMonthlyPayment).toBe(0);
      else {
        expect(f.centsMonthlyPayment).toBe(
          amortizedMonthlyPayment(cents, f.bpsRate as number, (f.monthsTerm as number) - io),
        );
        if (io < (f.monthsTerm as number))
          expect((f.centsMonthlyPayment as number) * ((f.monthsTerm as number) - io)).toBeGreaterThanOrEqual(
            cents,
          );
      }
    }
    // Log-normal-ish: most loans are small, the median well below the mean.
    const sorted = loans.map((l) => l.fields.centsAmount as number).sort((a, b) => a - b);
    const median = sorted[sorted.length >> 1] as number;
    expect(median).toBeLessThan(total / loans.length);
    expect(median).toBeLessThan(1_000_000_00);
    // The demo's 25 loans are worth millions, not trillions.
    const demo = batchTotal(1, 25, 'realistic');
    expect(demo).toBeLessThan(100_000_000_00);
    expect(demo).toBeGreaterThan(100_000_00);
  });

  it('extreme keeps the wide data (amounts past $1B with odd cents, odd terms) and the same ids, names and statuses as realistic', () => {
    const extreme = batch(1, 48, 'extreme').map((g) => g.loan);
    const realistic = batch(1, 48, 'realistic').map((g) => g.loan);
    expect(extreme.some((l) => (l.fields.centsAmount as number) > 1_000_000_000_00)).toBe(true);
    expect(extreme.some((l) => (l.fields.centsAmount as number) % 100 !== 0)).toBe(true);
    expect(extreme.some((l) => [1, 7, 13, 5, 27, 480, 2, 11].includes(l.fields.monthsTerm as number))).toBe(
      true,
    );
    expect(
      realistic.map((l) => [
        l.fields.id,
        l.fields.status,
        l.fields.loanNumber,
        l.businesses.map((b) => b.name),
      ]),
    ).toEqual(
      extreme.map((l) => [
        l.fields.id,
        l.fields.status,
        l.fields.loanNumber,
        l.businesses.map((b) => b.name),
      ]),
    );
  });
});

function batchTotal(seed: number, n: number, amounts: AmountProfile): number {
  return batch(seed, n, amounts).reduce((s, g) => s + (g.loan.fields.centsAmount as number), 0);
}
