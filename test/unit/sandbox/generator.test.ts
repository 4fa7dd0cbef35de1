import { describe, expect, it } from 'vitest';
import { generateLoan } from '../../../src/sandbox/generator.js';
import { createRng } from '../../../src/sandbox/rng.js';
import { loanSchema } from '../../../src/contract/schemas.js';
import { publicLoan } from '../../../src/sandbox/serialize.js';

function batch(seed: number, n: number) {
  const rng = createRng(seed);
  return Array.from({ length: n }, (_, i) => generateLoan(rng, i, 'org'));
}

describe('data generator', () => {
  it('is deterministic for a seed and different for another', () => {
    const strip = (b: ReturnType<typeof batch>) => b.map((g) => ({ ...g, documents: g.documents.map((d) => ({ ...d, bytes: d.bytes.toString('base64') })) }));
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
});
