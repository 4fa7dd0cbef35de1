/**
 * Mapping throughput: loans mapped per second on one core with the generic set. The need is about
 * 25 loans a minute (the platform's rate budget), so this only watches for a large regression.
 * Each loan is a realistic business loan (2 businesses, 2 people, 3 documents → 12 records).
 * Loans are mapped one after another (the engine is CPU-bound; the pipeline's concurrency does
 * not add cores). Prints figures; never fails on timing.
 */
import { join } from 'node:path';
import { loadMapper } from '../src/mapping-sets/loader.js';
import type { MappingInput } from '../src/mapping/types.js';

const dir = join(import.meta.dirname, '../mappings', process.env['MAPPING_SET'] ?? 'generic');
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

function loanInput(i: number): MappingInput {
  const frequency = FREQUENCIES[i % FREQUENCIES.length] ?? 'monthly';
  return {
    loan: {
      id: `loan_${i}`,
      loanNumber: `LN-${100000 + i}`,
      status: 'funded',
      type: 'business',
      centsAmount: 125_000_050 + i,
      centsMonthlyPayment: 2_489_012,
      monthsTerm: frequency === 'lump sum' ? 18 : 60,
      monthsInterestOnly: i % 3 === 0 ? 12 : 0,
      paymentFrequency: frequency,
      rateType: i % 2 === 0 ? 'fixed' : 'variable',
      bpsRate: 725 + (i % 50),
      purpose: 'Working capital',
      applicationDate: '2025-02-03T15:30:00Z',
      closeDate: '2025-03-14T03:30:00Z',
      maturityDate: '2030-03-14T17:00:00-05:00',
      firstPaymentDate: '2025-04-14T09:00:00-05:00',
      product: { id: i % 4 === 0 ? 'prod_sba7a' : 'prod_cre', name: 'x' },
      stage: { id: 'stg', name: 'Closed' },
      createdAt: '2025-02-01T14:00:00Z',
      updatedAt: '2025-03-15T12:00:00Z',
      boarding: { id: `brd_${i}`, boarded: false },
    },
    entities: {
      businesses: [
        {
          id: `biz_${i}_a`,
          name: 'Acme Widgets LLC',
          dba: 'Acme',
          entityType: 'Limited Liability Company',
          einLast4: '6789',
          ein: '12-3456789',
          state: 'TX',
          naics: '332710',
          role: 'borrower',
        },
        {
          id: `biz_${i}_b`,
          name: 'Acme Holdings Inc',
          entityType: 'C-Corp',
          einLast4: '1111',
          ein: '98-7651111',
          state: 'DE',
          naics: '551112',
          role: 'guarantor',
        },
      ],
      people: [
        {
          id: `per_${i}_a`,
          firstName: 'Jane',
          lastName: 'Doe',
          ssnLast4: '4321',
          ssn: '123-45-4321',
          role: 'guarantor',
        },
        {
          id: `per_${i}_b`,
          firstName: 'John',
          lastName: 'Roe',
          ssnLast4: '8765',
          ssn: '234-56-8765',
          role: 'owner',
        },
      ],
    },
    // As the pipeline gives it: the bank's account number (the generic set requires one) and no
    // existing customers. Without it every loan was an issue and the bench timed the failure path.
    identity: { accountNumber: String(4_100_000_000 + i), customers: {} },
    documents: [0, 1, 2].map((d) => ({
      id: `doc_${i}_${d}`,
      name: `Document ${d}.pdf`,
      type: 'application/pdf',
      size: 40_000 + d,
      category: ['financials', 'legal', 'other'][d] ?? 'other',
      uploadedAt: '2025-02-10T23:30:00Z',
      period: d === 0 ? '2024' : null,
      requirement:
        d === 0 ? { id: 'req', name: 'Business Tax Returns', status: 'APPROVED', period: '2024' } : null,
    })),
  };
}

const mapper = await loadMapper(dir, { timeZone: 'America/Chicago' });
const inputs = Array.from({ length: 500 }, (_, i) => loanInput(i));

// warm-up (JIT, Intl caches)
for (const x of inputs) await mapper.map(x);

let loans = 0;
let records = 0;
let issues = 0;
const durationMs = Number(process.env['BENCH_MS'] ?? 3000);
const start = performance.now();
const cpuStart = process.cpuUsage();
while (performance.now() - start < durationMs) {
  for (const x of inputs) {
    const out = await mapper.map(x);
    loans += 1;
    if (out.ok) records += out.records.length;
    else issues += 1;
  }
}
const elapsed = (performance.now() - start) / 1000;
const cpu = process.cpuUsage(cpuStart);
// CPU seconds of this process: the figure for "one core" even when other work shares the machine
const cpuSeconds = (cpu.user + cpu.system) / 1e6;
process.stdout.write(
  `mapping throughput (${mapper.name} set ${mapper.version}): ${(loans / cpuSeconds).toFixed(0)} loans per CPU-second on one core ` +
    `(${(records / cpuSeconds).toFixed(0)} records/s; the platform budget allows ~25 loans a minute); wall clock ${(loans / elapsed).toFixed(0)} loans/s ` +
    `(${loans} loans in ${elapsed.toFixed(2)} s, ${cpuSeconds.toFixed(2)} CPU s; ${issues} with issues)\n`,
);
