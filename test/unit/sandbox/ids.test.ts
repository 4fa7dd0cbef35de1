import { describe, expect, it } from 'vitest';
import { generateLoan } from '../../../src/sandbox/generator.js';
import {
  createIdFactory,
  MAX_GENERATED_ID_LENGTH,
  MAX_LONG_ID_LENGTH,
  MAX_WILD_ID_LENGTH,
  type IdShapes,
} from '../../../src/sandbox/ids.js';
import { createRng } from '../../../src/sandbox/rng.js';
import { cli } from '../../support/mappings-cli.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SHORT = /^(ln|biz|per|doc|req)_[0-9a-z]{8,12}$/;
const LONG = /^urn:lender:[a-z]+:[A-Za-z0-9._:-]+$/;
const isLong = (i: string): boolean => LONG.test(i) && i.length <= MAX_LONG_ID_LENGTH;
const isXlong = (i: string): boolean => LONG.test(i) && i.length > 100 && i.length <= MAX_GENERATED_ID_LENGTH;
// A wild id: at most 100 characters, with a slash, a space, a percent sign and a non-ASCII letter.
const isWild = (i: string): boolean =>
  i.length <= MAX_WILD_ID_LENGTH &&
  i.includes('/') &&
  i.includes(' ') &&
  i.includes('%') &&
  /[\u0080-\uffff]/.test(i);

function idsOf(seed: number, shapes: IdShapes, n = 60): string[] {
  const rng = createRng(seed);
  const ids = createIdFactory(seed, shapes);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const { loan, documents } = generateLoan(rng, i, 'org', { ids });
    out.push(
      loan.fields.id,
      ...loan.businesses.map((b) => b.id),
      ...loan.people.map((p) => p.id),
      ...documents.map((d) => d.id),
    );
    for (const d of documents) if (d.requirement) out.push(d.requirement.id);
  }
  return out;
}

describe('sandbox id shapes (--id-shapes)', () => {
  it('mixed gives short ids, UUIDs, opaque ids up to 64 characters, ids of 101–160 characters and ids with / % ? # spaces and non-ASCII, all unique', () => {
    const ids = idsOf(1, 'mixed', 120);
    expect(ids.filter((i) => SHORT.test(i)).length).toBeGreaterThan(20);
    expect(ids.filter((i) => UUID.test(i)).length).toBeGreaterThan(20);
    const long = ids.filter(isLong);
    expect(long.length).toBeGreaterThan(20);
    expect(long.some((i) => i.length === MAX_LONG_ID_LENGTH)).toBe(true);
    for (const sep of ['-', '_', '.'])
      expect(
        long.some((i) => i.slice('urn:lender:'.length).includes(sep)),
        sep,
      ).toBe(true);
    const xlong = ids.filter(isXlong);
    expect(xlong.length).toBeGreaterThan(10);
    expect(xlong.some((i) => i.length === MAX_GENERATED_ID_LENGTH)).toBe(true);
    const wild = ids.filter(isWild);
    expect(wild.length).toBeGreaterThan(10);
    for (const c of ['?', '#', '+', '&'])
      expect(
        wild.some((i) => i.includes(c)),
        c,
      ).toBe(true);
    expect(
      wild.some((i) => /[\u{10000}-\u{10FFFF}]/u.test(i)),
      'a character outside the BMP',
    ).toBe(true);
    expect(ids.every((i) => SHORT.test(i) || UUID.test(i) || isLong(i) || isXlong(i) || isWild(i))).toBe(
      true,
    );
    expect(Math.max(...ids.map((i) => i.length))).toBe(MAX_GENERATED_ID_LENGTH);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('mixed keeps the short, uuid and long ids earlier versions drew for a seed (odd ones replace some, shift none)', () => {
    const ids = createIdFactory(3, 'mixed');
    const got = Array.from({ length: 12 }, (_, i) => ids.make('ln', `ln_short${i}`));
    // Seed 3's first twelve loan ids before xlong and wild existed (short, uuid, long only).
    const earlier = [
      'urn:lender:loan:A:SeqHfSyVK:1w0oDi.Y',
      'urn:lender:loan:sOb8wEi:Zq_th.I0CY-EskP7F2vA_DacKFPZ-Fzes7hJxtn0',
      'urn:lender:loan:cvJRgO-fpTU_pd_5f_15LADLeUHOrHB6.Vj.FMm',
      'ln_short3',
      '32643cb2-2463-4fb5-8264-89a56e0f34b6',
      'ln_short5',
      'eaad2b4d-56d4-438f-a68b-a5a79b5bd60d',
      'ln_short7',
      'urn:lender:loan:g7JJnfvdTE-EL.L-F5a9mVl-OjKoKmentyhsWF_2HpHzg-hz',
      'ln_short9',
      'cf0d55a2-e0a7-4f09-b02d-33ea3362b458',
      'ln_short11',
    ];
    const replaced = got.map((id, i) => (id === earlier[i] ? null : i)).filter((i) => i !== null);
    expect(replaced).toEqual([2, 5, 9]);
    for (const i of replaced) expect(isXlong(got[i]!) || isWild(got[i]!), got[i]).toBe(true);
  });

  it('short, uuid, long, xlong and wild give only that shape', () => {
    expect(idsOf(2, 'short').every((i) => SHORT.test(i))).toBe(true);
    expect(idsOf(2, 'uuid').every((i) => UUID.test(i))).toBe(true);
    expect(idsOf(2, 'long').every(isLong)).toBe(true);
    expect(idsOf(2, 'xlong').every(isXlong)).toBe(true);
    const wild = idsOf(2, 'wild');
    expect(wild.every(isWild)).toBe(true);
    expect(new Set(wild).size).toBe(wild.length);
    // Well-formed UTF-16 (a cut never splits a surrogate pair): the id survives UTF-8 and back.
    for (const i of wild) expect(Buffer.from(i, 'utf8').toString('utf8')).toBe(i);
  });

  it("the shape does not change a seed's other data (amounts, names, dates)", () => {
    const data = (shapes: IdShapes) => {
      const rng = createRng(9);
      const ids = createIdFactory(9, shapes);
      return Array.from({ length: 20 }, (_, i) => {
        const { loan } = generateLoan(rng, i, 'org', { ids });
        return [
          loan.fields.centsAmount,
          loan.fields.closeDate,
          loan.businesses.map((b) => b.name),
          loan.people.map((p) => p.ssn),
        ];
      });
    };
    expect(data('mixed')).toEqual(data('short'));
    expect(data('uuid')).toEqual(data('long'));
  });

  it('the sandbox command refuses an unknown shape with the flag named', async () => {
    const r = await cli(['sandbox', '--id-shapes', 'guid']);
    expect(String(r.error)).toMatch(
      /--id-shapes: expected one of mixed, short, uuid, long, xlong, wild, got "guid"/,
    );
  });
});
