import type { Rng } from './rng.js';
import type { IdFactory } from './ids.js';
import { formatWithOffset } from './time.js';
import { minimalPdf, textFile } from './documents-content.js';
import {
  ENTITY_TYPES,
  LOAN_STATUSES,
  PAYMENT_FREQUENCIES,
  type BusinessRecord,
  type DocumentRecord,
  type LoanRecord,
  type LoanStatus,
  type PersonRecord,
  type ProductRecord,
  type RequirementRecord,
} from './model.js';

/** Generated history starts here so the data does not depend on when the sandbox starts. */
export const GENERATION_EPOCH_MS = Date.UTC(2025, 0, 6, 14, 0, 0);
const DAY = 86_400_000;

export const PRODUCTS: ProductRecord[] = [
  {
    id: 'prod_sba7a',
    name: 'SBA 7(a) Term Loan',
    type: 'business',
    rateType: 'variable',
    active: true,
    createdAt: '2023-02-01T09:00:00Z',
  },
  {
    id: 'prod_cre',
    name: 'Commercial Real Estate',
    type: 'business',
    rateType: 'fixed',
    active: true,
    createdAt: '2023-02-01T09:00:00Z',
  },
  {
    id: 'prod_loc',
    name: 'Business Line of Credit',
    type: 'business',
    rateType: 'variable',
    active: true,
    createdAt: '2023-05-12T15:30:00-04:00',
  },
  {
    id: 'prod_equip',
    name: 'Equipment Finance',
    type: 'business',
    rateType: 'fixed',
    active: true,
    createdAt: '2023-06-01T09:00:00Z',
  },
  {
    id: 'prod_personal',
    name: 'Personal Installment Loan',
    type: 'personal',
    rateType: 'fixed',
    active: true,
    createdAt: '2024-01-15T12:00:00+01:00',
  },
  {
    id: 'prod_bridge',
    name: 'Bridge Loan (retired)',
    type: 'business',
    rateType: 'fixed',
    active: false,
    createdAt: '2022-11-30T23:59:59-08:00',
  },
];

const STAGES = [
  { id: 'stg_intake', name: 'Intake' },
  { id: 'stg_underwriting', name: 'Underwriting' },
  { id: 'stg_approval', name: 'Credit Approval' },
  { id: 'stg_closing', name: 'Closing' },
  { id: 'stg_servicing', name: 'Servicing' },
];
const OFFSETS = [0, 0, -300, -240, -480, 60, 330, 0, -360];
const STATES = ['CA', 'NY', 'TX', 'FL', 'IL', 'WA', 'MA', 'CO', 'GA', 'OH', 'PR', 'DC'];
const FIRST = [
  'Ana',
  'José',
  'Li',
  'Mary-Kate',
  'Oluwaseun',
  'Zoë',
  "D'Arcy",
  'Ngọc',
  'John',
  'Priya',
  'Søren',
  'Fatima',
];
const LAST = [
  'García',
  'Smith',
  "O'Neil",
  'Nguyen',
  'van der Berg',
  'Okafor',
  'Müller',
  'Kowalski',
  'Chen',
  'Patel',
  'Lee-Wong',
];
const BIZ = [
  'Acme Bakery',
  'Blue River Logistics',
  'Café Olé',
  'Northwind Traders',
  'Smith & Sons Plumbing',
  'Ünique Designs',
  'Tri-State Dental Group',
  'Harbor View Holdings',
  'Green Leaf Organics',
  'Quantum Widgets',
];
const SUFFIX: Record<string, string> = {
  'C-Corp': 'Inc.',
  'S-Corp': 'Corp.',
  'General Partnership': 'Partners',
  'Limited Liability Company': 'LLC',
  'Limited Liability Partnership': 'LLP',
  'Sole Proprietorship': '',
  Trust: 'Family Trust',
};
const PURPOSES = [
  'Working capital',
  'Equipment purchase',
  'Real estate acquisition',
  'Refinance',
  'Inventory',
  'Expansion',
  'Debt consolidation',
];
const NAICS = ['722511', '484121', '541110', '236220', '311811', '62121', '4541', '81'];
const ODD_NAMES = [
  'Tax Return 2024.pdf',
  'Bilanz – Übersicht ✓ 2024.pdf',
  '../../etc/passwd.txt',
  `${'very long file name '.repeat(12).trim()}.pdf`,
  'résumé (final) [v2].pdf',
  'bank statement  jan.pdf',
  '契約書.pdf',
  'no-extension',
  'notes.txt',
  'rent roll.csv',
];

function pickStatus(rng: Rng, index: number): LoanStatus {
  // The first six loans cover every status; then mostly funded/active, as real queues look.
  if (index < LOAN_STATUSES.length) return LOAN_STATUSES[(index + 5) % LOAN_STATUSES.length] as LoanStatus;
  return rng.pick<LoanStatus>([
    'funded',
    'funded',
    'funded',
    'active',
    'active',
    'application',
    'draft',
    'denied',
    'withdrawn',
  ]);
}

function tin(rng: Rng): string {
  return String(rng.int(10, 99)) + String(rng.int(1_000_000, 9_999_999));
}

function requirementFor(rng: Rng, ids: IdFactory, docIndex: number): RequirementRecord | null {
  const kind = docIndex % 3;
  if (kind === 0)
    return {
      id: ids.make('req', rng.id('req', 8)),
      name: 'Business Tax Returns',
      module: 'underwriting',
      periods: ['2023', '2024'],
    };
  if (kind === 1)
    return {
      id: ids.make('req', rng.id('req', 8)),
      name: 'Signed Application',
      module: 'closing',
      periods: [],
    };
  return rng.chance(0.5)
    ? null
    : {
        id: ids.make('req', rng.id('req', 8)),
        name: 'Bank Statements',
        module: 'underwriting',
        periods: ['2025-Q1'],
      };
}

/** Today's short prefixed ids only (the generator's own default; the sandbox passes its --id-shapes factory). */
export const SHORT_IDS: IdFactory = { make: (_kind, short) => short };

export interface GeneratedLoan {
  loan: LoanRecord;
  documents: DocumentRecord[];
}

/**
 * How loan amounts, rates and terms are drawn:
 * - `realistic` (default): small-business and personal lending. Per product, a log-normal amount
 *   between the product's bounds (personal $1k–$50k, lines of credit $10k–$1M, equipment
 *   $10k–$2M, SBA 7(a) $50k–$5M, commercial real estate $250k–$5M), the product's rate type and a
 *   rate in its usual range (variable = prime 7.50 % + spread), a usual term for the product, and
 *   a level monthly payment that amortises the amount at that rate over the term (after any
 *   interest-only months).
 * - `extreme`: the wide data tests rely on: every 7th loan between $10M and $900B, amounts with odd
 *   cents, a third of the terms odd for their payment frequency (1, 7, 13 … months weekly,
 *   quarterly …), interest-only months that are not whole periods.
 * Both draw the same random numbers in the same order, so a seed's ids, names, statuses and
 * documents are the same whichever profile is used.
 */
export const AMOUNT_PROFILES = ['realistic', 'extreme'] as const;
export type AmountProfile = (typeof AMOUNT_PROFILES)[number];

interface LendingProfile {
  minCents: number;
  maxCents: number;
  medianCents: number;
  /** Spread of the log-normal amount (log scale). */
  sigma: number;
  terms: readonly number[];
  rateType: 'fixed' | 'variable';
  /** Fixed rate, or spread over prime for a variable rate, in bps: [low, high]. */
  bps: readonly [number, number];
  /** Whole-term interest-only (a revolving line) is usual for this product. */
  interestOnlyLine?: boolean;
}

const K = 100_000; // $1,000 in cents
const LENDING: Record<string, LendingProfile> = {
  prod_personal: {
    minCents: 1 * K,
    maxCents: 50 * K,
    medianCents: 12 * K,
    sigma: 0.7,
    terms: [12, 24, 36, 36, 48, 60],
    rateType: 'fixed',
    bps: [699, 2399],
  },
  prod_loc: {
    minCents: 10 * K,
    maxCents: 1_000 * K,
    medianCents: 75 * K,
    sigma: 0.9,
    terms: [12, 12, 24, 36],
    rateType: 'variable',
    bps: [150, 550],
    interestOnlyLine: true,
  },
  prod_equip: {
    minCents: 10 * K,
    maxCents: 2_000 * K,
    medianCents: 120 * K,
    sigma: 0.8,
    terms: [36, 48, 60, 60, 72, 84],
    rateType: 'fixed',
    bps: [599, 1199],
  },
  // SBA 7(a): up to $5M, variable at prime plus a capped spread, 10 years (25 with real estate).
  prod_sba7a: {
    minCents: 50 * K,
    maxCents: 5_000 * K,
    medianCents: 400 * K,
    sigma: 0.9,
    terms: [84, 120, 120, 120, 300],
    rateType: 'variable',
    bps: [225, 475],
  },
  prod_cre: {
    minCents: 250 * K,
    maxCents: 5_000 * K,
    medianCents: 1_200 * K,
    sigma: 0.7,
    terms: [60, 120, 120, 180, 240, 300],
    rateType: 'fixed',
    bps: [575, 850],
  },
  prod_bridge: {
    minCents: 100 * K,
    maxCents: 5_000 * K,
    medianCents: 600 * K,
    sigma: 0.8,
    terms: [6, 12, 12, 18, 24],
    rateType: 'fixed',
    bps: [800, 1300],
  },
};
/** A business loan of no known product. */
const OTHER_BUSINESS: LendingProfile = {
  minCents: 10 * K,
  maxCents: 5_000 * K,
  medianCents: 250 * K,
  sigma: 1.0,
  terms: [12, 24, 36, 60],
  rateType: 'fixed',
  bps: [650, 1200],
};
const LUMP_SUM_TERMS = [6, 12, 12, 18, 24];
export const PRIME_BPS = 750;

/**
 * Level monthly payment (cents) that amortises `cents` at `bps` a year over `months`; interest
 * only when months ≤ 0.
 */
export function amortizedMonthlyPayment(cents: number, bps: number, months: number): number {
  const r = bps / 10_000 / 12;
  if (months <= 0) return Math.round(cents * r);
  if (r === 0) return Math.ceil(cents / months);
  return Math.round((cents * r) / (1 - (1 + r) ** -months));
}

/** A uniform in (0, 1) from an integer drawn uniformly in [min, max]. */
const uniformOf = (v: number, min: number, max: number): number => (v - min + 0.5) / (max - min + 1);
const pickBy = <T>(items: readonly T[], u: number): T =>
  items[Math.min(items.length - 1, Math.floor(u * items.length))] as T;

/** One realistic loan with entities and documents; `index` gives variety and awkward cases. */
export function generateLoan(
  rng: Rng,
  index: number,
  orgId: string,
  opts: { status?: LoanStatus; createdAtMs?: number; ids?: IdFactory; amounts?: AmountProfile } = {},
): GeneratedLoan {
  // The draws' order is the seed's promise (generator-golden.test.ts): the parts below are called
  // in the order the values were always drawn.
  const ids = opts.ids ?? SHORT_IDS;
  const id = ids.make('ln', rng.id('ln', 10));
  const status = opts.status ?? pickStatus(rng, index);
  const offset = rng.pick(OFFSETS);
  const createdAtMs = opts.createdAtMs ?? GENERATION_EPOCH_MS + index * 3_600_000 + rng.int(0, 3_599_000);
  const terms = drawTerms(rng, index, (opts.amounts ?? 'realistic') === 'realistic');
  const awkward = index % 11 === 10;
  const loan = loanRecord(rng, index, orgId, { id, status, offset, createdAtMs, terms });
  if (awkward) dropOptionalFields(loan);
  // (After the awkward loans lost their optional fields: a payment without interest-only months.)
  if (terms.realistic) levelPayment(loan, terms);
  loan.businesses = drawBusinesses(rng, ids, terms.personal, awkward);
  loan.people = drawPeople(rng, ids, terms.personal, awkward);
  const documents = drawDocuments(rng, ids, index, loan, { offset, createdAtMs });
  loan.documentIds = documents.map((d) => d.id);
  return { loan, documents };
}

/** The money and the schedule: product, frequency, amount, term and rate. */
interface LoanTerms {
  realistic: boolean;
  personal: boolean;
  product: ProductRecord | undefined;
  lending: LendingProfile;
  frequency: string;
  rateType: string;
  centsAmount: number;
  monthsTerm: number;
  bpsFixedRate: number;
  bpsSpreadRate: number;
  bpsPrimeRate: number;
  bpsRate: number;
  /** Lump sum and irregular payments: no level payment. */
  noSchedule: boolean;
}

function drawTerms(rng: Rng, index: number, realistic: boolean): LoanTerms {
  const personal = index % 5 === 3;
  const product = personal ? PRODUCTS[4] : rng.pick(PRODUCTS.filter((p) => p.type === 'business'));
  const frequency = PAYMENT_FREQUENCIES[index % PAYMENT_FREQUENCIES.length] as string;
  let rateType = index % 2 === 0 ? 'fixed' : 'variable';
  // Extreme: mostly ordinary amounts; every 7th loan is very large to catch overflow and float mistakes.
  const huge = index % 7 === 6;
  const [wholeMin, wholeMax] = huge ? [1_000_000_000, 900_000_000_000] : [5_000, 5_000_000];
  const whole = rng.int(wholeMin, wholeMax);
  const oddCents = rng.int(0, 99);
  let centsAmount = whole * 100 + oddCents;
  // Any whole number of months is a legal term with any frequency (domain-notes):
  // a third of each frequency's loans get one that need not be a whole number of its periods
  // (1, 7, 13 … months weekly, quarterly …).
  // Derived from the index, not the generator, so a seed's other values stay as they were.
  const usualTerm =
    frequency === 'lump sum' ? rng.pick([6, 12, 18]) : rng.pick([12, 24, 36, 60, 84, 120, 300]);
  let monthsTerm =
    frequency !== 'lump sum' && Math.floor(index / 8) % 3 === 1
      ? ([1, 7, 13, 5, 27, 480, 2, 11][Math.floor(index / 24) % 8] as number)
      : usualTerm;
  let bpsFixedRate = rng.int(350, 1_450);
  let bpsSpreadRate = rng.int(100, 650);
  const bpsPrimeRate = PRIME_BPS;
  const lending = LENDING[product?.id ?? ''] ?? OTHER_BUSINESS;
  if (realistic) {
    // The same draws, read as uniforms: a log-normal amount (Box–Muller), the product's term,
    // rate type and rate range.
    const u1 = uniformOf(whole, wholeMin, wholeMax);
    const u2 = uniformOf(oddCents, 0, 99);
    const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    const raw = lending.medianCents * Math.exp(lending.sigma * z);
    // Whole dollars; business loans to the $100.
    const step = personal ? 100 : 10_000;
    centsAmount = Math.min(lending.maxCents, Math.max(lending.minCents, Math.round(raw / step) * step));
    monthsTerm = pickBy(frequency === 'lump sum' ? LUMP_SUM_TERMS : lending.terms, (u1 * 7_919) % 1);
    rateType = lending.rateType;
    const [lo, hi] = lending.bps;
    bpsFixedRate = lo + Math.floor(uniformOf(bpsFixedRate, 350, 1_450) * (hi - lo + 1));
    bpsSpreadRate = lo + Math.floor(uniformOf(bpsSpreadRate, 100, 650) * (hi - lo + 1));
  }
  const bpsRate = rateType === 'fixed' ? bpsFixedRate : bpsSpreadRate + bpsPrimeRate;
  const noSchedule = frequency === 'lump sum' || frequency === 'irregular payments';
  return {
    realistic,
    personal,
    product,
    lending,
    frequency,
    rateType,
    centsAmount,
    monthsTerm,
    bpsFixedRate,
    bpsSpreadRate,
    bpsPrimeRate,
    bpsRate,
    noSchedule,
  };
}

/** The loan's own fields and dates (entities and documents are drawn after it). */
function loanRecord(
  rng: Rng,
  index: number,
  orgId: string,
  at: { id: string; status: LoanStatus; offset: number; createdAtMs: number; terms: LoanTerms },
): LoanRecord {
  const { id, status, offset, createdAtMs, terms } = at;
  const { personal, product, frequency, rateType, centsAmount, monthsTerm, bpsRate } = terms;
  const applicationMs = createdAtMs + rng.int(0, 3) * DAY;
  const closeMs = applicationMs + rng.int(20, 90) * DAY;
  const firstPaymentMs = closeMs + 30 * DAY;
  const maturityMs = closeMs + monthsTerm * 30 * DAY;
  // Integer math only: an approximate level payment, rounded to whole cents.
  const centsMonthlyPayment = terms.noSchedule
    ? 0
    : Math.floor(centsAmount / monthsTerm) + Math.floor((centsAmount * bpsRate) / 120_000);
  return {
    orgId,
    createdAtMs,
    archivedAt: null,
    rateParts:
      rateType === 'fixed'
        ? { bpsFixedRate: terms.bpsFixedRate }
        : { bpsSpreadRate: terms.bpsSpreadRate, bpsPrimeRate: terms.bpsPrimeRate },
    boarding: null,
    businesses: [],
    people: [],
    documentIds: [],
    hasOpenTasks: rng.chance(0.3),
    hasMessages: rng.chance(0.4),
    malformed: null,
    fields: {
      id,
      loanNumber: `LN-${String(10_000 + index).padStart(6, '0')}`,
      status,
      type: personal ? 'personal' : 'business',
      centsAmount,
      centsMonthlyPayment,
      monthsTerm,
      // Interest-only months that are not whole periods (3 months biweekly…), and now and then
      // for the whole term (a balloon); never longer than the term (that would be contradictory).
      monthsInterestOnly:
        index % 9 === 4 ? monthsTerm : Math.min(rng.pick([0, 0, 0, 3, 6, 12, 1, 5, 7]), monthsTerm),
      paymentFrequency: frequency,
      rateType,
      bpsRate,
      purpose: rng.pick(PURPOSES),
      purposeNarrative: `Generated loan ${index}: ${rng.pick(PURPOSES).toLowerCase()} for ${rng.pick(BIZ)}.`,
      applicationDate: formatWithOffset(applicationMs, offset),
      closeDate: formatWithOffset(closeMs, offset),
      maturityDate: formatWithOffset(maturityMs, offset),
      firstPaymentDate: formatWithOffset(firstPaymentMs, offset),
      product: product ? { id: product.id, name: product.name } : null,
      stage: rng.pick(STAGES),
      createdAt: formatWithOffset(createdAtMs, offset),
      updatedAt: formatWithOffset(createdAtMs + rng.int(0, 20) * DAY, offset),
    },
  };
}

/** Consumers must cope with absent optional fields and a null product (every 11th loan). */
function dropOptionalFields(loan: LoanRecord): void {
  loan.fields.product = null;
  delete loan.fields.purposeNarrative;
  delete loan.fields.monthsInterestOnly;
  delete loan.fields.closeDate;
  delete loan.fields.firstPaymentDate;
  delete loan.fields.maturityDate;
  loan.fields.stage = null;
}

/** Realistic amounts: the level payment that amortises the loan (after its interest-only months). */
function levelPayment(loan: LoanRecord, terms: LoanTerms): void {
  const { centsAmount, bpsRate, monthsTerm, noSchedule } = terms;
  if (loan.fields.monthsInterestOnly !== undefined) {
    // Interest-only months in whole months the schedule can express; the whole term only for a
    // revolving line; then the level payment over the amortising months.
    const drawn = loan.fields.monthsInterestOnly;
    const io =
      drawn >= monthsTerm
        ? terms.lending.interestOnlyLine
          ? monthsTerm
          : 0
        : [1, 5, 7].includes(drawn)
          ? 0
          : drawn;
    loan.fields.monthsInterestOnly = io;
    loan.fields.centsMonthlyPayment = noSchedule
      ? 0
      : amortizedMonthlyPayment(centsAmount, bpsRate, monthsTerm - io);
  } else {
    loan.fields.centsMonthlyPayment = noSchedule
      ? 0
      : amortizedMonthlyPayment(centsAmount, bpsRate, monthsTerm);
  }
}

function drawBusinesses(rng: Rng, ids: IdFactory, personal: boolean, awkward: boolean): BusinessRecord[] {
  const businesses: BusinessRecord[] = [];
  const nBusinesses = personal ? 0 : rng.int(1, 3);
  for (let b = 0; b < nBusinesses; b += 1) {
    const entityType = rng.pick(ENTITY_TYPES);
    const base = rng.pick(BIZ);
    const biz: BusinessRecord = {
      id: ids.make('biz', rng.id('biz', 10)),
      name: `${base} ${SUFFIX[entityType] ?? ''}`.trim(),
      ein: tin(rng),
      role: b === 0 ? 'borrower' : rng.pick(['guarantor', 'co-borrower']),
      entityType,
      state: rng.pick(STATES),
      naics: rng.pick(NAICS),
    };
    if (rng.chance(0.4)) biz.dba = `${base} (${rng.pick(STATES)})`;
    if (awkward) {
      delete biz.state;
      delete biz.entityType;
    }
    businesses.push(biz);
  }
  return businesses;
}

function drawPeople(rng: Rng, ids: IdFactory, personal: boolean, awkward: boolean): PersonRecord[] {
  const people: PersonRecord[] = [];
  const nPeople = personal ? rng.int(1, 3) : rng.int(0, 3);
  for (let p = 0; p < nPeople; p += 1) {
    const person: PersonRecord = {
      id: ids.make('per', rng.id('per', 10)),
      firstName: rng.pick(FIRST),
      lastName: rng.pick(LAST),
      ssn: String(rng.int(100, 899)) + String(rng.int(10, 99)) + String(rng.int(1000, 9999)),
      role: personal && p === 0 ? 'borrower' : rng.pick(['guarantor', 'owner', 'key principal']),
      dateOfBirth: `${rng.int(1950, 2000)}-0${rng.int(1, 9)}-1${rng.int(0, 9)}`,
    };
    if (!awkward) {
      const local = person.firstName.toLowerCase().replace(/[^a-z]/g, '');
      person.email = `${local}.${rng.int(1, 999)}@example.com`;
    }
    people.push(person);
  }
  return people;
}

const DOCUMENT_NAMES = [
  'Tax Return.pdf',
  'Articles of Organization.pdf',
  'Bank Statements.pdf',
  'Signed Term Sheet.pdf',
  'notes.txt',
  'rent roll.csv',
  ...ODD_NAMES,
];

function documentType(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.pdf')
    ? 'application/pdf'
    : lower.endsWith('.csv')
      ? 'text/csv'
      : lower.endsWith('.txt')
        ? 'text/plain'
        : 'application/octet-stream';
}

function drawDocuments(
  rng: Rng,
  ids: IdFactory,
  index: number,
  loan: LoanRecord,
  at: { offset: number; createdAtMs: number },
): DocumentRecord[] {
  const id = loan.fields.id;
  const documents: DocumentRecord[] = [];
  const nDocs = rng.int(0, 4);
  for (let d = 0; d < nDocs; d += 1) {
    const name = index % 4 === 0 && d === 0 ? rng.pick(ODD_NAMES) : rng.pick(DOCUMENT_NAMES);
    const type = documentType(name);
    const bytes =
      type === 'application/pdf'
        ? minimalPdf(`${name} for ${loan.fields.loanNumber ?? id}`)
        : textFile([`document ${name}`, `loan ${id}`, `line ${rng.int(1, 1e6)}`]);
    const requirement = requirementFor(rng, ids, d);
    const period =
      requirement && requirement.periods.length > 0
        ? (requirement.periods[requirement.periods.length - 1] ?? null)
        : null;
    const uploadedAt = formatWithOffset(at.createdAtMs + (d + 1) * DAY, at.offset);
    documents.push({
      id: ids.make('doc', rng.id('doc', 12)),
      loanId: id,
      name,
      type,
      category: rng.pick(['financials', 'legal', 'identity', 'collateral', 'other']),
      bytes,
      uploadedAt,
      attached: true,
      pendingSize: null,
      requirement,
      period,
      requirementStatus: rng.pick(['PENDING', 'APPROVED', 'APPROVED']),
      versions: [{ version: 1, size: bytes.length, uploadedAt, period }],
      signed: false,
    });
  }
  return documents;
}
