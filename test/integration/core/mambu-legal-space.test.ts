import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MambuCore } from '../../../src/core/mambu/mambu-core.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { loadMapper } from '../../../src/mapping-sets/loader.js';
import type { Mapper, MappingInput } from '../../../src/mapping/types.js';
import { startFakeMambu, type FakeMambu } from '../../support/fake-mambu.js';
import { makePackage } from '../../unit/core/support.js';

/**
 * Legal loans (test/unit/mapping/legal-space.test.ts covers the mapping alone) mapped by the mambu
 * set AND boarded into the strict fake Mambu, approved and disbursed: the fake refuses nothing, and
 * every loan is one loan account, one disbursement, whatever the schedule, the ids' shape or the
 * document names. An eighth of the 720-loan schedule grid (all of it: LEGAL_SPACE_MAMBU_GRID=1) and
 * random loans of any shape.
 */
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
const STEP = process.env['LEGAL_SPACE_MAMBU_GRID'] === '1' ? 1 : 8;
const RUNS = Number(process.env['LEGAL_SPACE_RUNS'] ?? 40);

let fake: FakeMambu;
let core: MambuCore;
let mapper: Mapper;

beforeAll(async () => {
  fake = await startFakeMambu();
  core = new MambuCore({
    baseUrl: fake.url,
    auth: { username: 'approver', password: 'approver-pass' },
    disburseAuth: { username: 'disburser', password: 'disburser-pass' },
    timeoutMs: 5_000,
    insecureTls: false,
    approve: true,
    disburse: true,
    taxIdField: { clients: '_taxInformation_Clients.taxId', groups: '_taxInformation_Groups.taxId' },
    loanRefField: '_boarding_Loans.platformLoanId',
    timeZone: 'America/Chicago',
    documents: { maxBytes: 50 * 1024 * 1024, refused: 'skip' },
    logger: silentLogger(),
    clock: systemClock,
  });
  mapper = await loadMapper(join(import.meta.dirname, '../../../mappings/mambu'), {
    timeZone: 'America/Chicago',
  });
});
afterAll(async () => {
  await core?.close();
  await fake?.close();
});

async function board(input: MappingInput): Promise<boolean> {
  const out = await mapper.map(input);
  if (!out.ok) return false;
  const docs = (input.documents ?? []).map((d) => ({
    id: (d as { id: string }).id,
    name: (d as { name?: string | null }).name ?? null,
    bytes: Buffer.from('%PDF-1.4'),
  }));
  await core.board(makePackage(input.loan.id, out.records, docs));
  return true;
}

describe('the legal space boarded into the fake Mambu', () => {
  it('the schedule grid: every loan boards, approved and disbursed, 0 refused, the repeat borrower one group', async () => {
    const base = {
      type: 'business',
      centsAmount: 125000050,
      bpsRate: 725,
      closeDate: '2025-03-14T15:00:00Z',
      firstPaymentDate: '2025-04-14T15:00:00Z',
      createdAt: '2025-02-01T14:00:00Z',
      boarding: { id: 'b', releasedAt: '2025-03-15T12:00:00Z' },
    };
    const entities = {
      businesses: [{ id: 'B', name: 'Acme', ein: '12-3456789', einLast4: '6789', role: 'borrower' }],
      people: [
        {
          id: 'P',
          firstName: 'Ann',
          lastName: 'Lee',
          ssn: '123-45-6780',
          ssnLast4: '6780',
          role: 'guarantor',
        },
      ],
    };
    const before = fake.loans.length;
    let i = 0;
    let boarded = 0;
    for (const paymentFrequency of FREQUENCIES)
      for (const monthsTerm of [1, 7, 13, 360, 480])
        for (const io of [0, 1, 2, 3, 5, 6, 7, 12, monthsTerm])
          for (const rateType of ['fixed', 'variable']) {
            if (i++ % STEP !== 0) continue;
            const loan = {
              ...base,
              id: `L${i}`,
              paymentFrequency,
              monthsTerm,
              monthsInterestOnly: Math.min(io, monthsTerm),
              rateType,
            };
            expect(
              await board({
                loan,
                entities,
                documents: [],
                identity: { accountNumber: null, customers: {} },
              }),
              `${paymentFrequency} ${monthsTerm}m io ${io}`,
            ).toBe(true);
            boarded += 1;
          }
    expect(fake.refused()).toEqual([]);
    expect(fake.contractViolations).toEqual([]);
    expect(fake.loans.length - before).toBe(boarded);
    expect(fake.loans.every((l) => l.accountState === 'ACTIVE')).toBe(true);
    expect(fake.groups.filter((g) => g.body['groupName'] === 'Acme')).toHaveLength(1);
    expect(fake.clients.filter((c) => c.body['firstName'] === 'Ann')).toHaveLength(1);
  }, 60_000);

  it('random legal loans (ids of any shape, hostile names, any dates): boarded once each, 0 refused', async () => {
    const anyId = fc.oneof(
      fc.uuid(),
      fc.tuple(fc.stringMatching(/^[A-Za-z0-9._:/ -]{0,150}$/), fc.uuid()).map(([s, u]) => `${s}:${u}`),
    );
    const text = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.constantFrom('ACME, LLC', 'A/B <C> | D: & E? *F* [G] #H \\ "I" \'J\'', 'x'.repeat(300)),
    );
    const digits9 = fc.integer({ min: 0, max: 999_999_999 }).map((n) => String(n).padStart(9, '0'));
    const iso = fc
      .integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2090, 0, 1) })
      .map((ms) => new Date(ms).toISOString());
    const input = fc.record({
      id: anyId,
      personal: fc.boolean(),
      centsAmount: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      monthsTerm: fc.integer({ min: 1, max: 480 }),
      io: fc.integer({ min: 0, max: 480 }),
      paymentFrequency: fc.constantFrom(...FREQUENCIES, 'fortnightly'),
      bpsRate: fc.integer({ min: 0, max: 100_000 }),
      closeDate: fc.option(iso, { nil: undefined }),
      firstPaymentDate: fc.option(iso, { nil: undefined }),
      bizId: anyId,
      bizName: text,
      ein: digits9,
      perId: anyId,
      first: text,
      last: text,
      ssn: digits9,
      docs: fc.uniqueArray(fc.record({ id: anyId, name: fc.option(text, { nil: null }) }), {
        maxLength: 2,
        selector: (d) => d.id,
      }),
    });
    const before = { loans: fake.loans.length, disbursements: fake.transactions.length };
    const ids = new Set<string>();
    await fc.assert(
      fc.asyncProperty(input, async (x) => {
        if (ids.has(x.id)) return;
        const loan = {
          id: x.id,
          type: x.personal ? 'personal' : 'business',
          centsAmount: x.centsAmount,
          monthsTerm: x.monthsTerm,
          monthsInterestOnly: x.io % (x.monthsTerm + 1),
          paymentFrequency: x.paymentFrequency,
          rateType: 'fixed',
          bpsRate: x.bpsRate,
          createdAt: '2025-02-01T14:00:00Z',
          boarding: { id: 'b', releasedAt: '2025-03-15T12:00:00Z' },
          ...(x.closeDate ? { closeDate: x.closeDate } : {}),
          ...(x.firstPaymentDate ? { firstPaymentDate: x.firstPaymentDate } : {}),
        };
        const entities = {
          businesses: x.personal
            ? []
            : [
                {
                  id: `b:${x.bizId}`,
                  name: x.bizName,
                  ein: `${x.ein.slice(0, 2)}-${x.ein.slice(2)}`,
                  einLast4: x.ein.slice(-4),
                  role: 'borrower',
                },
              ],
          people: [
            {
              id: `p:${x.perId}`,
              firstName: x.first,
              lastName: x.last,
              ssn: x.ssn,
              ssnLast4: x.ssn.slice(-4),
              role: x.personal ? 'borrower' : 'guarantor',
            },
          ],
        };
        const documents = x.docs.map((d) => ({
          id: `d:${x.id}:${d.id}`,
          name: d.name,
          type: 'application/pdf',
        }));
        expect(
          await board({ loan, entities, documents, identity: { accountNumber: null, customers: {} } }),
        ).toBe(true);
        ids.add(x.id);
      }),
      { numRuns: RUNS, seed: 3535 },
    );
    expect(fake.refused()).toEqual([]);
    expect(fake.contractViolations).toEqual([]);
    expect(fake.loans.length - before.loans).toBe(ids.size);
    expect(fake.transactions.length - before.disbursements).toBe(ids.size);
    expect(new Set(fake.loans.map((l) => l.id)).size).toBe(fake.loans.length);
  }, 60_000);
});
