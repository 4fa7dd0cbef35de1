import { describe, expect, it } from 'vitest';
import { generateLoan } from '../../../src/sandbox/generator.js';
import { createIdFactory, MAX_GENERATED_ID_LENGTH, type IdShapes } from '../../../src/sandbox/ids.js';
import { createRng } from '../../../src/sandbox/rng.js';
import { cli } from '../../support/mappings-cli.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SHORT = /^(ln|biz|per|doc|req)_[0-9a-z]{8,12}$/;
const LONG = /^urn:lender:[a-z]+:[A-Za-z0-9._:-]+$/;

function idsOf(seed: number, shapes: IdShapes, n = 60): string[] {
  const rng = createRng(seed);
  const ids = createIdFactory(seed, shapes);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const { loan, documents } = generateLoan(rng, i, 'org', { ids });
    out.push(loan.fields.id, ...loan.businesses.map((b) => b.id), ...loan.people.map((p) => p.id), ...documents.map((d) => d.id));
    for (const d of documents) if (d.requirement) out.push(d.requirement.id);
  }
  return out;
}

describe('sandbox id shapes (--id-shapes)', () => {
  it('mixed gives short ids, UUIDs and opaque ids up to 64 characters with - _ . and :, all unique', () => {
    const ids = idsOf(1, 'mixed');
    expect(ids.filter((i) => SHORT.test(i)).length).toBeGreaterThan(20);
    expect(ids.filter((i) => UUID.test(i)).length).toBeGreaterThan(20);
    const long = ids.filter((i) => LONG.test(i));
    expect(long.length).toBeGreaterThan(20);
    expect(long.some((i) => i.length === MAX_GENERATED_ID_LENGTH)).toBe(true);
    for (const sep of ['-', '_', '.']) expect(long.some((i) => i.slice('urn:lender:'.length).includes(sep)), sep).toBe(true);
    expect(Math.max(...ids.map((i) => i.length))).toBe(MAX_GENERATED_ID_LENGTH);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('short, uuid and long give only that shape', () => {
    expect(idsOf(2, 'short').every((i) => SHORT.test(i))).toBe(true);
    expect(idsOf(2, 'uuid').every((i) => UUID.test(i))).toBe(true);
    expect(idsOf(2, 'long').every((i) => LONG.test(i) && i.length <= MAX_GENERATED_ID_LENGTH)).toBe(true);
  });

  it("the shape does not change a seed's other data (amounts, names, dates)", () => {
    const data = (shapes: IdShapes) => {
      const rng = createRng(9);
      const ids = createIdFactory(9, shapes);
      return Array.from({ length: 20 }, (_, i) => {
        const { loan } = generateLoan(rng, i, 'org', { ids });
        return [loan.fields.centsAmount, loan.fields.closeDate, loan.businesses.map((b) => b.name), loan.people.map((p) => p.ssn)];
      });
    };
    expect(data('mixed')).toEqual(data('short'));
    expect(data('uuid')).toEqual(data('long'));
  });

  it('the sandbox command refuses an unknown shape with the flag named', async () => {
    const r = await cli(['sandbox', '--id-shapes', 'guid']);
    expect(String(r.error)).toMatch(/--id-shapes: expected one of mixed, short, uuid, long, got "guid"/);
  });
});
