import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MambuDecimal, mambuJson } from '../../../src/core/mambu/http.js';
import {
  derivedMambuId,
  isMambuId,
  mambuDocumentName,
  mambuIdempotencyKey,
  mambuRef,
  UUID_V4,
} from '../../../src/core/mambu/ids.js';

describe('Mambu ids the connector supplies', () => {
  it('any platform id (any length, any character) gives a stable id within Mambu’s rule; kinds never share one', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (platformId) => {
        const ids = (['client', 'group', 'loan'] as const).map((k) => derivedMambuId(k, platformId));
        for (const id of ids) expect(isMambuId(id)).toBe(true);
        expect(ids.map((i) => i[0])).toEqual(['C', 'G', 'L']);
        expect(derivedMambuId('loan', platformId)).toBe(ids[2]);
        expect(new Set(ids.map((i) => i.slice(1))).size).toBe(3);
      }),
    );
    expect(derivedMambuId('loan', 'ln_1')).not.toBe(derivedMambuId('loan', 'ln_2'));
    expect(derivedMambuId('loan', 'ln_1')).toHaveLength(20);
  });

  it('Idempotency-Keys are v4 UUIDs, the same for the same write, another for another write', () => {
    const k = mambuIdempotencyKey('loan', ['ln_1', 'v1']);
    expect(k).toMatch(UUID_V4);
    expect(mambuIdempotencyKey('loan', ['ln_1', 'v1'])).toBe(k);
    expect(mambuIdempotencyKey('loan', ['ln_1', 'v2'])).not.toBe(k);
    expect(mambuIdempotencyKey('approve', ['ln_1', 'v1'])).not.toBe(k);
    // Parts are delimited: ["a", "bc"] is not ["ab", "c"].
    expect(mambuIdempotencyKey('x', ['a', 'bc'])).not.toBe(mambuIdempotencyKey('x', ['ab', 'c']));
  });

  it('the loan reference: the platform id up to 255 characters, a digest beyond (and for one that looks like a digest)', () => {
    expect(mambuRef('ln_1')).toBe('ln_1');
    expect(mambuRef('x'.repeat(255))).toBe('x'.repeat(255));
    expect(mambuRef('x'.repeat(256))).toMatch(/^sha256:[A-Za-z0-9_-]{43}$/);
    expect(mambuRef('sha256:abc')).not.toBe('sha256:abc');
  });

  it('document names: the characters Mambu refuses become _, at most 256, never empty', () => {
    expect(mambuDocumentName('a/b<c>|d:e&f?g*h[i]j#k\\l"m\'n.pdf', 'x')).toBe(
      'a_b_c__d_e_f_g_h_i_j_k_l_m_n.pdf',
    );
    expect(mambuDocumentName('y'.repeat(300), 'x')).toHaveLength(256);
    expect(mambuDocumentName('   ', 'document ln:1')).toBe('document ln_1');
    expect(mambuDocumentName('', '')).toBe('document');
  });

  it('decimals go out as JSON numbers digit for digit (regression guard: never through a float)', () => {
    expect(
      mambuJson({
        loanAmount: new MambuDecimal('90071992547409.91'),
        interestSettings: { interestRate: new MambuDecimal('7.25') },
      }),
    ).toBe('{"loanAmount":90071992547409.91,"interestSettings":{"interestRate":7.25}}');
    // Through a float the cents would change: the platform's maximum does not survive a double.
    expect(String(Number('90071992547409.91'))).not.toBe('90071992547409.91');
    expect(() => new MambuDecimal('1e3')).toThrow(/not a decimal/);
  });
});

describe('a Mambu loan in platform units (reconciliation)', () => {
  it('one installment of a known period is not called a lump sum (regression: an annual 12-month loan showed as a field_mismatch "core lump sum")', async () => {
    const { canonicalFromMambuLoan } = await import('../../../src/core/mambu/units.js');
    const loan = (n: number, count: number, unit: string) => ({
      loanAmount: 1250000.5,
      interestSettings: { interestRate: 7.25 },
      scheduleSettings: { repaymentInstallments: n, repaymentPeriodCount: count, repaymentPeriodUnit: unit },
      disbursementDetails: { firstRepaymentDate: '2026-03-14T00:00:00-05:00' },
    });
    expect(canonicalFromMambuLoan(loan(1, 1, 'YEARS')).paymentFrequency).toBeNull();
    expect(canonicalFromMambuLoan(loan(1, 12, 'MONTHS')).paymentFrequency).toBe('lump sum');
    expect(canonicalFromMambuLoan(loan(60, 1, 'MONTHS'))).toEqual({
      centsAmount: 125000050,
      bpsRate: 725,
      firstPaymentDate: '2026-03-14',
      paymentFrequency: 'monthly',
    });
    expect(canonicalFromMambuLoan(loan(26, 2, 'WEEKS')).paymentFrequency).toBe('biweekly');
  });
});
