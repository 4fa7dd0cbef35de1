import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadMapper } from '../../../src/mapping-sets/loader.js';
import type { MappedRecord, Mapper, MappingInput } from '../../../src/mapping/types.js';

/**
 * The legal-space test (issue 13): loans anywhere in the space the platform's spec allows — every
 * enum value and unknown ones, integers up to 9007199254740991, date-times with any offset and
 * fractional seconds, null or absent optional fields, 0..n businesses and people in any role,
 * documents with any names, unknown extra fields — through BOTH shipped mapping sets. Every loan
 * boards (possibly with review items) unless it is in the documented contradictory list below;
 * money stays exact; schedules are consistent. `LEGAL_SPACE_RUNS` makes a larger run.
 */
const RUNS = Number(process.env['LEGAL_SPACE_RUNS'] ?? 400);
const SEED = Number(process.env['LEGAL_SPACE_SEED'] ?? 20261125);
const FREQUENCIES = [
  'weekly',
  'biweekly',
  'monthly',
  'quarterly',
  'semi-annual',
  'annual',
  'lump sum',
  'irregular payments',
];
const ROLES = [
  'borrower',
  'guarantor',
  'owner',
  'key principal',
  'co-borrower',
  'related',
  'co-signer',
  'beneficial owner',
];
const MAX = Number.MAX_SAFE_INTEGER;

const optional = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | null | undefined> =>
  fc.oneof({ weight: 3, arbitrary: a }, fc.constant(null), fc.constant(undefined));
const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
const dateTime = fc
  .record({
    ms: fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2090, 0, 1) }),
    offsetMin: fc.integer({ min: -12 * 60, max: 14 * 60 }).map((m) => m - (m % 15)),
    frac: fc.constantFrom('', '.5', '.123', '.123456'),
  })
  .map(({ ms, offsetMin, frac }) => {
    const local = new Date(ms + offsetMin * 60_000);
    const sign = offsetMin < 0 ? '-' : '+';
    const off =
      offsetMin === 0
        ? 'Z'
        : `${sign}${pad(Math.floor(Math.abs(offsetMin) / 60))}:${pad(Math.abs(offsetMin) % 60)}`;
    return `${local.getUTCFullYear()}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}T${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}${frac}${off}`;
  });
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('ACME, LLC', 'CAFÉ OLÉ LLC', '=cmd|calc', '../../etc/passwd', 'x'.repeat(300)),
);
// Ids of any shape (issue 23): UUIDs, and opaque ids up to ~190 characters with - _ . : (the
// UUID inside keeps two entities from sharing one by chance).
const anyId = fc.oneof(
  fc.uuid(),
  fc.tuple(fc.stringMatching(/^[A-Za-z0-9._:-]{0,150}$/), fc.uuid()).map(([s, u]) => `${s}:${u}`),
);
const IDENTITY = {
  generic: { accountNumber: '1000000008', customers: {} },
  fineract: { accountNumber: null, customers: {} },
  mambu: { accountNumber: null, customers: {} },
} as const;
type SetName = keyof typeof IDENTITY;
const digits9 = fc.integer({ min: 0, max: 999_999_999 }).map((n) => String(n).padStart(9, '0'));
const role = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...ROLES) }, fc.constant(undefined));
const extra = fc.dictionary(
  fc.string({ minLength: 1, maxLength: 8 }).map((k) => `x_${k}`),
  fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
  { maxKeys: 2 },
);

const business = fc
  .record({
    id: anyId,
    name: text,
    dba: optional(text),
    entityType: optional(fc.constantFrom('Limited Liability Company', 'C-Corp', 'Trust', 'Cooperative')),
    ein: digits9.map((d) => `${d.slice(0, 2)}-${d.slice(2)}`),
    state: optional(fc.constantFrom('TX', 'CA', 'NY')),
    naics: optional(fc.constantFrom('332710', '11', '999999', 'abc')),
    role,
    extra,
  })
  .map(({ extra: x, ...b }) => ({ ...x, ...b, einLast4: b.ein.slice(-4) }));
const person = fc
  .record({
    id: anyId,
    firstName: text,
    lastName: text,
    ssn: digits9.map((d) => `${d.slice(0, 3)}-${d.slice(3, 5)}-${d.slice(5)}`),
    role,
  })
  .map((p) => ({ ...p, ssnLast4: p.ssn.slice(-4) }));
const document = fc.record({
  id: anyId,
  name: optional(text),
  type: optional(fc.constantFrom('application/pdf', 'text/csv', 'image/png', 'application/x-unknown')),
  size: optional(fc.integer({ min: 0, max: MAX })),
  category: optional(fc.constantFrom('financials', 'legal', 'identity', 'weird')),
  uploadedAt: optional(dateTime),
  period: optional(fc.constantFrom('2024', 'Q1 2025')),
});

const loanArb = fc
  .record({
    id: anyId,
    loanNumber: optional(text),
    type: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom('business', 'personal') },
      fc.constant('agricultural'),
    ),
    centsAmount: fc.oneof(fc.integer({ min: 1, max: 10_000_000_000 }), fc.integer({ min: 1, max: MAX })),
    centsMonthlyPayment: optional(fc.integer({ min: 0, max: MAX })),
    monthsTerm: fc.oneof(fc.constantFrom(1, 7, 13, 360, 480), fc.integer({ min: 1, max: 600 })),
    ioKind: fc.constantFrom('none', 'some', 'some', 'whole', 'beyond', 'null'),
    ioPick: fc.integer({ min: 0, max: 600 }),
    paymentFrequency: fc.oneof(
      { weight: 9, arbitrary: fc.constantFrom(...FREQUENCIES) },
      fc.constant('fortnightly'),
    ),
    rateType: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom('fixed', 'variable') },
      fc.constant('floating'),
    ),
    bpsRate: fc.integer({ min: 0, max: 100_000 }),
    purpose: optional(text),
    applicationDate: optional(dateTime),
    closeDate: optional(dateTime),
    maturityDate: optional(dateTime),
    firstPaymentDate: optional(dateTime),
    product: optional(
      fc.record({ id: fc.constantFrom('prod_sba7a', 'prod_cre', 'prod_unknown'), name: optional(text) }),
    ),
    createdAt: dateTime,
    extra,
  })
  .map(({ ioKind, ioPick, extra: x, ...l }) => {
    const io =
      ioKind === 'none'
        ? 0
        : ioKind === 'null'
          ? null
          : ioKind === 'whole'
            ? l.monthsTerm
            : ioKind === 'beyond'
              ? l.monthsTerm + 1 + (ioPick % 12)
              : ioPick % l.monthsTerm;
    return {
      ...x,
      ...l,
      monthsInterestOnly: io,
      boarding: { id: 'brd_1', boarded: false, releasedAt: '2025-03-15T12:00:00Z' },
    };
  });

const inputArb = fc.record({
  loan: loanArb,
  // The platform lists each entity once (distinct ids); the same id twice is not legal data.
  businesses: fc.uniqueArray(business, { maxLength: 3, selector: (b) => b.id }),
  people: fc.uniqueArray(person, { maxLength: 3, selector: (p) => p.id }),
  documents: fc.uniqueArray(document, { maxLength: 3, selector: (d) => d.id }),
});

type Loan = Record<string, unknown> & {
  monthsTerm: number;
  monthsInterestOnly: number | null;
  centsAmount: number;
  type: string;
};
type Entity = { id: string; role?: string | undefined };

/** The documented contradictory list (docs/mapping-guide.md, "Conventions"): these quarantine. */
function contradiction(loan: Loan, entities: Entity[], set: SetName): string | null {
  if (entities.length === 0) return 'no entity';
  const withRole = entities.filter((e) => e.role !== undefined);
  if (withRole.length > 0 && !withRole.some((e) => e.role === 'borrower')) return 'no borrower among roles';
  if ((loan.monthsInterestOnly ?? 0) > loan.monthsTerm) return 'interest-only beyond the term';
  if (set === 'fineract' && loan.centsAmount >= 1e15) return "principal beyond Fineract's DECIMAL(19,6)";
  const released = (loan['boarding'] as { releasedAt?: unknown } | undefined)?.releasedAt;
  if (
    set === 'fineract' &&
    (loan['closeDate'] === null || loan['closeDate'] === undefined) &&
    typeof released !== 'string'
  ) {
    return 'Fineract needs a disbursement date (closeDate, else the release date)';
  }
  return null;
}

const records = (rs: MappedRecord[], type: string): MappedRecord[] => rs.filter((r) => r.type === type);
const PERIOD_MONTHS: Record<string, number> = {
  weekly: 12 / 52,
  biweekly: 24 / 52,
  monthly: 1,
  quarterly: 3,
  'semi-annual': 6,
  annual: 12,
};

async function check(
  mapper: Mapper,
  set: SetName,
  sample: fc.Arbitrary<{ loan: Loan; businesses: Entity[]; people: Entity[]; documents: unknown[] }>,
): Promise<void> {
  await fc.assert(
    fc.asyncProperty(sample, async ({ loan, businesses, people, documents }) => {
      const input = {
        loan,
        entities: { businesses, people },
        documents,
        identity: IDENTITY[set],
      } as unknown as MappingInput;
      const outcome = await mapper.map(input);
      const why = contradiction(loan, [...businesses, ...people], set);
      if (why !== null) {
        expect(outcome.ok, `${set}: ${why} must quarantine`).toBe(false);
        return;
      }
      expect(
        outcome.ok,
        `${set}: ${outcome.ok ? '' : outcome.issues.map((i) => `${i.target}.${i.field}: ${i.message}`).join('; ')}`,
      ).toBe(true);
      if (!outcome.ok) return;
      const [l] = records(outcome.records, 'loan');
      expect(l).toBeDefined();
      const f = l!.fields;
      const principal = String(f[set === 'mambu' ? 'loanAmount' : 'principal']);
      // Money exact: the decimal string is the cents, digit for digit.
      expect(BigInt(principal.replace('.', ''))).toBe(BigInt(loan.centsAmount));
      const freq = String(loan['paymentFrequency']);
      const months = PERIOD_MONTHS[FREQUENCIES.includes(freq) ? freq : 'monthly'] ?? 1;
      if (set === 'generic') {
        const n = f['numberOfPayments'] as number;
        const io = f['interestOnlyPeriods'] as number;
        if (freq !== 'lump sum') {
          // payments × period covers the term within one period
          expect(n * months).toBeGreaterThanOrEqual(loan.monthsTerm - 1e-9);
          expect(n * months).toBeLessThan(loan.monthsTerm + months + 1e-9);
          // interest-only periods ≥ the promised months (capped at every payment: a balloon)
          expect(io <= n).toBe(true);
          if (io < n) expect(io * months).toBeGreaterThanOrEqual((loan.monthsInterestOnly ?? 0) - 1e-9);
        } else expect(n).toBe(1);
      } else if (set === 'mambu') {
        const sch = f['scheduleSettings'] as {
          repaymentInstallments: number;
          repaymentPeriodCount: number;
          repaymentPeriodUnit: string;
          gracePeriod: number;
          gracePeriodType: string;
        };
        const n = sch.repaymentInstallments;
        // Mambu: grace below the installments, a grace type only with grace, and a first repayment after disbursement.
        expect(sch.gracePeriod).toBeLessThan(Math.max(n, 1));
        expect(sch.gracePeriodType === 'NONE').toBe(sch.gracePeriod === 0);
        expect(['DAYS', 'WEEKS', 'MONTHS', 'YEARS']).toContain(sch.repaymentPeriodUnit);
        const d = f['disbursementDetails'] as {
          expectedDisbursementDate: string;
          firstRepaymentDate?: string;
        };
        if (d.firstRepaymentDate !== undefined)
          expect(d.firstRepaymentDate > d.expectedDisbursementDate).toBe(true);
        if (freq !== 'lump sum') expect(n * months).toBeGreaterThanOrEqual(loan.monthsTerm - 1e-9);
        // Mambu ids: only the caller-supplied ones (none here: the adapter derives them), no custom field value empty.
        for (const r of outcome.records)
          for (const [k, v] of Object.entries(r.fields))
            if (k.startsWith('_'))
              expect(Object.values(v as object).every((x) => x !== '' && x !== null)).toBe(true);
        for (const doc of records(outcome.records, 'document'))
          expect(String(doc.fields['name'])).toMatch(/^[^/<>|:&?*[\]#\\"']{1,256}$/);
      } else {
        const n = f['numberOfRepayments'] as number;
        const grace = (f['graceOnPrincipalPayment'] as number | undefined) ?? 0;
        expect(f['loanTermFrequency']).toBe((f['repaymentEvery'] as number) * n);
        expect(f['loanTermFrequencyType']).toBe(f['repaymentFrequencyType']);
        expect(grace).toBeLessThan(Math.max(n, 1));
        if (freq !== 'lump sum') expect(n * months).toBeGreaterThanOrEqual(loan.monthsTerm - 1e-9);
      }
    }),
    { numRuns: RUNS, seed: SEED },
  );
}

describe('the legal space: every loan the spec allows boards with every shipped set (issue 13; mambu: issue 35)', () => {
  for (const set of ['generic', 'fineract', 'mambu'] as const) {
    it(`${set}: boards (possibly with review items) unless contradictory; money exact; schedules consistent`, async () => {
      const mapper = await loadMapper(join(import.meta.dirname, `../../../mappings/${set}`), {
        timeZone: 'America/Chicago',
      });
      await check(mapper, set, inputArb);
    }, 120_000);
  }

  it('the 720-loan schedule grid (8 frequencies × 5 terms × 9 interest-only lengths × 2 rate types) boards in every set', async () => {
    const base = {
      id: 'L',
      type: 'business',
      centsAmount: 125000050,
      bpsRate: 725,
      closeDate: '2025-03-14T15:00:00Z',
      createdAt: '2025-02-01T14:00:00Z',
      boarding: { id: 'b', releasedAt: '2025-03-15T12:00:00Z' },
    };
    const entities = {
      businesses: [{ id: 'B', name: 'Acme', ein: '12-3456789', einLast4: '6789', role: 'borrower' }],
      people: [],
    };
    for (const set of ['generic', 'fineract', 'mambu'] as const) {
      const mapper = await loadMapper(join(import.meta.dirname, `../../../mappings/${set}`), {});
      let boarded = 0;
      for (const paymentFrequency of FREQUENCIES)
        for (const monthsTerm of [1, 7, 13, 360, 480])
          for (const io of [0, 1, 2, 3, 5, 6, 7, 12, monthsTerm])
            for (const rateType of ['fixed', 'variable']) {
              const monthsInterestOnly = Math.min(io, monthsTerm);
              const out = await mapper.map({
                loan: { ...base, paymentFrequency, monthsTerm, monthsInterestOnly, rateType },
                entities,
                documents: [],
                identity: IDENTITY[set],
              });
              if (out.ok) boarded += 1;
              else
                throw new Error(
                  `${set} ${paymentFrequency} ${monthsTerm}m io ${monthsInterestOnly} ${rateType}: ${out.issues.map((i) => i.message).join('; ')}`,
                );
            }
      expect(boarded, set).toBe(720);
    }
  }, 120_000);
});
