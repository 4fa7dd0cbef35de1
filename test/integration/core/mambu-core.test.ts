import { afterEach, describe, expect, it } from 'vitest';
import { MambuCore, type MambuCoreOptions } from '../../../src/core/mambu/mambu-core.js';
import { derivedMambuId, UUID_V4 } from '../../../src/core/mambu/ids.js';
import { CoreRejectedError, CoreUnavailableError } from '../../../src/core/port.js';
import { FatalError } from '../../../src/lib/errors.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import { startFakeMambu, type FakeMambu, type FakeMambuOptions } from '../../support/fake-mambu.js';
import { makePackage } from '../../unit/core/support.js';

/**
 * The Mambu adapter against the strict fake Mambu (test/support/fake-mambu.ts): every retry horizon
 * (a lost answer, a key in flight, an uncached 400, a key past its six hours, a read that misses)
 * ends with exactly one client, group, loan and disbursement, and Mambu refuses nothing it is sent.
 * Assertions are on the records the fake holds.
 */
let fake: FakeMambu;
const cores: MambuCore[] = [];

async function start(o: FakeMambuOptions = {}): Promise<void> {
  fake = await startFakeMambu(o);
}

function adapter(o: Partial<MambuCoreOptions> = {}): MambuCore {
  const core = new MambuCore({
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
    ...o,
  });
  cores.push(core);
  return core;
}

afterEach(async () => {
  for (const c of cores.splice(0)) await c.close();
  await fake?.close();
});

/** The mambu set's records for a business loan with one person (the group's member). */
function records(
  loanId: string,
  o: {
    business?: string;
    person?: string;
    loanFields?: Record<string, unknown>;
    ein?: string;
    ssn?: string;
  } = {},
): MappedRecord[] {
  const biz = o.business ?? `biz_${loanId}`;
  const per = o.person ?? `per_${loanId}`;
  return [
    {
      type: 'client',
      externalId: per,
      fields: {
        firstName: 'Ann',
        lastName: 'Lee',
        idDocuments: [{ documentType: 'SSN', documentId: o.ssn ?? '123456780', issuingAuthority: 'IRS' }],
        _taxInformation_Clients: { taxId: o.ssn ?? '123456780' },
      },
    },
    {
      type: 'group',
      externalId: biz,
      fields: {
        groupName: 'Acme Tools LLC',
        memberExternalIds: [per],
        _taxInformation_Groups: { taxId: o.ein ?? '123456789' },
      },
    },
    {
      type: 'loan',
      externalId: loanId,
      fields: {
        accountHolderExternalId: biz,
        accountHolderType: 'GROUP',
        productTypeKey: 'term-loan',
        loanAmount: '1250000.50',
        scheduleSettings: {
          repaymentInstallments: 60,
          repaymentPeriodCount: 1,
          repaymentPeriodUnit: 'MONTHS',
          gracePeriod: 6,
          gracePeriodType: 'PAY_INTEREST_ONLY',
        },
        interestSettings: { interestRate: '7.25' },
        disbursementDetails: { expectedDisbursementDate: '2025-03-14', firstRepaymentDate: '2025-04-14' },
        ...o.loanFields,
      },
    },
  ];
}

const PDF = Buffer.from('%PDF-1.4 test');
const withDoc = (loanId: string, recs: MappedRecord[], name = 'Tax: return "2024" <final>.pdf') =>
  makePackage(
    loanId,
    [
      ...recs,
      {
        type: 'document',
        externalId: 'doc_1',
        fields: { loanExternalId: loanId, name, notes: 'financials' },
      },
    ],
    [{ id: 'doc_1', name, bytes: PDF }],
  );

const census = () => ({
  clients: fake.clients.length,
  groups: fake.groups.length,
  loans: fake.loans.length,
  disbursements: fake.transactions.length,
  documents: fake.documents.length,
});

describe('Mambu adapter against the strict fake Mambu', () => {
  it('boards a business loan: client, group with its member, loan approved by one user and disbursed by another, document', async () => {
    await start();
    const receipt = await adapter().board(withDoc('loan_1', records('loan_1')));
    expect(census()).toEqual({ clients: 1, groups: 1, loans: 1, disbursements: 1, documents: 1 });
    const client = fake.clients[0]!;
    const group = fake.groups[0]!;
    const loan = fake.loans[0]!;
    expect(client.id).toBe(derivedMambuId('client', 'per_loan_1'));
    expect(group.body['groupMembers']).toEqual([{ clientKey: client.encodedKey }]);
    expect(group.body['memberExternalIds']).toBeUndefined();
    expect(loan).toMatchObject({
      id: derivedMambuId('loan', 'loan_1'),
      accountState: 'ACTIVE',
      approvedBy: 'approver',
      disbursedBy: 'disburser',
      loanAmountText: '1250000.50',
    });
    expect(loan.body).toMatchObject({
      accountHolderKey: group.encodedKey,
      accountHolderType: 'GROUP',
      productTypeKey: fake.products[0]!.encodedKey,
      _boarding_Loans: { platformLoanId: 'loan_1' },
    });
    // Mambu types both as date-time (issue 42): the mapped days at midnight, Chicago's offset then.
    expect(loan.body['disbursementDetails']).toEqual({
      expectedDisbursementDate: '2025-03-14T00:00:00-05:00',
      firstRepaymentDate: '2025-04-14T00:00:00-05:00',
    });
    expect(fake.transactions[0]).toMatchObject({
      loanId: loan.id,
      externalId: `${loan.id}-disbursement`,
      by: 'disburser',
    });
    // A name with characters Mambu refuses is cleaned, not refused.
    expect(fake.documents[0]).toMatchObject({
      ownerKey: loan.encodedKey,
      name: 'Tax_ return _2024_ _final_.pdf',
    });
    expect(fake.documents[0]!.notes).toContain('[doc:doc_1]');
    expect(receipt).toMatchObject({
      coreReference: loan.id,
      accountNumber: loan.id,
      loanExternalId: 'loan_1',
    });
    expect(receipt.records.map((r) => `${r.type}:${r.coreId}`)).toEqual([
      `client:${client.id}`,
      `group:${group.id}`,
      `loan:${loan.id}`,
      `document:${fake.documents[0]!.encodedKey}`,
    ]);
    // Every write carried a v4-UUID Idempotency-Key, each its own; Mambu refused nothing.
    const keys = fake.writes().map((w) => w.idempotencyKey);
    expect(keys.every((k) => k !== null && UUID_V4.test(k))).toBe(true);
    expect(new Set(keys).size).toBe(keys.length);
    expect(fake.refused()).toEqual([]);
  });

  it('boarding again writes nothing: every record is found by its id, the document by its marker', async () => {
    await start();
    const a = adapter();
    const first = await a.board(withDoc('loan_1', records('loan_1')));
    const writes = fake.writes().length;
    const second = await adapter().board(withDoc('loan_1', records('loan_1')));
    expect(fake.writes()).toHaveLength(writes);
    expect(second.coreReference).toBe(first.coreReference);
    expect(census()).toEqual({ clients: 1, groups: 1, loans: 1, disbursements: 1, documents: 1 });
  });

  it('the bank numbers: a pool account number is the loan id, a pool CIF the group id; exact amounts at the platform maximum', async () => {
    await start();
    const recs = records('loan_1', { loanFields: { id: '1000000008', loanAmount: '90071992547409.91' } });
    recs[1]!.fields['id'] = '800000017';
    await adapter({ approve: false, disburse: false }).board(makePackage('loan_1', recs));
    expect(fake.loans[0]).toMatchObject({
      id: '1000000008',
      loanAmountText: '90071992547409.91',
      accountState: 'PENDING_APPROVAL',
    });
    expect(fake.groups[0]!.id).toBe('800000017');
  });

  it('an answer lost after Mambu committed (reset, 500), then retries: one of each, found by id', async () => {
    await start();
    fake.inject({ method: 'POST', path: '/api/clients', kind: 'reset-after-commit' });
    fake.inject({ method: 'POST', path: '/api/loans', kind: 'status-after-commit', status: 500 });
    fake.inject({ method: 'POST', path: /disbursement-transactions$/, kind: 'reset-after-commit' });
    fake.inject({ method: 'POST', path: '/api/documents', kind: 'reset-after-commit' });
    const a = adapter();
    for (let i = 0; i < 4; i++) {
      const err = await a.board(withDoc('loan_1', records('loan_1'))).catch((e: unknown) => e);
      expect(err, `attempt ${i + 1}`).toBeInstanceOf(CoreUnavailableError);
      expect((err as CoreUnavailableError).ambiguous).toBe(true);
    }
    await a.board(withDoc('loan_1', records('loan_1')));
    expect(census()).toEqual({ clients: 1, groups: 1, loans: 1, disbursements: 1, documents: 1 });
    expect(fake.refused()).toEqual([]);
  });

  it('a key still in flight answers 409: the loan is retried later (never quarantined), then boards once', async () => {
    await start();
    fake.inject({ method: 'POST', path: '/api/loans', kind: 'delay', delayMs: 400 });
    const [a, b] = [
      adapter({ approve: false, disburse: false }),
      adapter({ approve: false, disburse: false }),
    ];
    const recs = records('loan_1');
    const first = a.board(makePackage('loan_1', recs));
    await new Promise((r) => setTimeout(r, 150));
    const second = await b.board(makePackage('loan_1', recs)).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(CoreUnavailableError);
    expect((second as Error).message).toMatch(/409.*still being processed/);
    await first;
    await b.board(makePackage('loan_1', recs));
    expect(fake.loans).toHaveLength(1);
    expect(fake.requests.filter((r) => r.status === 409)).toHaveLength(1);
  });

  it('a key in flight answered with 102 (the connection then closes): retried later, one loan', async () => {
    await start({ inFlight: 102 });
    fake.inject({ method: 'POST', path: '/api/loans', kind: 'delay', delayMs: 400 });
    const [a, b] = [
      adapter({ approve: false, disburse: false }),
      adapter({ approve: false, disburse: false }),
    ];
    const first = a.board(makePackage('loan_1', records('loan_1')));
    await new Promise((r) => setTimeout(r, 150));
    const second = await b.board(makePackage('loan_1', records('loan_1'))).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(CoreUnavailableError);
    expect((second as CoreUnavailableError).ambiguous).toBe(true);
    await first;
    await b.board(makePackage('loan_1', records('loan_1')));
    expect(fake.loans).toHaveLength(1);
    expect(fake.requests.some((r) => r.status === 102)).toBe(true);
  });

  it('a loan its product would refuse (installments, grace type) stops before anything is written', async () => {
    await start();
    fake.products[0]!.installments = { max: 36 };
    const a = adapter();
    await expect(a.board(makePackage('loan_1', records('loan_1')))).rejects.toThrow(
      /repaymentInstallments 60 is outside Mambu product term-loan \(Term loan\) limits 0–36/,
    );
    delete fake.products[0]!.installments;
    fake.products[0]!.gracePeriodType = 'INTEREST_FORGIVENESS';
    // Products are read once per process: a changed product is seen by the next process.
    await expect(adapter().board(makePackage('loan_1', records('loan_1')))).rejects.toThrow(
      /type PAY_INTEREST_ONLY, but Mambu product term-loan \(Term loan\) allows INTEREST_FORGIVENESS/,
    );
    expect(census()).toEqual({ clients: 0, groups: 0, loans: 0, disbursements: 0, documents: 0 });
    expect(fake.writes()).toEqual([]);
  });

  it('a 400 is not cached: after the product is fixed, the same key runs again and the loan boards once', async () => {
    await start();
    // A rule the adapter does not check first: Mambu's answer is the first word.
    fake.products[0]!.interestRate = { max: 5 };
    const a = adapter({ approve: false, disburse: false });
    const err = await a.board(makePackage('loan_1', records('loan_1'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CoreRejectedError);
    expect((err as Error).message).toContain(
      'PARAMS_INCONSISTENT_WITH_PRODUCT_RULES: interestSettings.interestRate',
    );
    expect(fake.loans).toHaveLength(0);
    fake.products[0]!.interestRate = { max: 30 };
    await a.board(makePackage('loan_1', records('loan_1')));
    const loanPosts = fake.requests.filter((r) => r.method === 'POST' && r.path === '/api/loans');
    expect(loanPosts.map((r) => r.status)).toEqual([400, 201]);
    expect(loanPosts[0]!.idempotencyKey).toBe(loanPosts[1]!.idempotencyKey);
    expect(fake.loans).toHaveLength(1);
  });

  it('after six hours the key is gone and a read misses the loan: DUPLICATE_ID on its own id, no second loan', async () => {
    await start();
    fake.inject({ method: 'POST', path: '/api/loans', kind: 'reset-after-commit' });
    const a = adapter({ approve: false, disburse: false });
    await expect(a.board(makePackage('loan_1', records('loan_1')))).rejects.toBeInstanceOf(
      CoreUnavailableError,
    );
    fake.advance(6 * 60 * 60 * 1000 + 1);
    // The look-ups race the commit (they find nothing); the create runs again under its expired key.
    const id = derivedMambuId('loan', 'loan_1');
    fake.inject({ method: 'GET', path: `/api/loans/${id}`, kind: 'miss' });
    fake.inject({ method: 'POST', path: '/api/loans:search', kind: 'miss' });
    const receipt = await a.board(makePackage('loan_1', records('loan_1')));
    expect(fake.loans).toHaveLength(1);
    expect(receipt.coreReference).toBe(id);
    const loanPosts = fake.requests.filter((r) => r.method === 'POST' && r.path === '/api/loans');
    expect(loanPosts.map((r) => [r.status, r.fromCache])).toEqual([
      [0, false],
      [400, false],
    ]);
    expect(loanPosts[1]!.reason).toBe('DUPLICATE_ID');
  });

  it('within six hours a repeated key gets the cached answer: no second record', async () => {
    await start();
    fake.inject({
      method: 'GET',
      path: `/api/clients/${derivedMambuId('client', 'per_loan_1')}`,
      kind: 'miss',
      times: 1,
    });
    const a = adapter({ approve: false, disburse: false });
    await a.board(makePackage('loan_1', records('loan_1')));
    fake.inject({
      method: 'GET',
      path: `/api/clients/${derivedMambuId('client', 'per_loan_1')}`,
      kind: 'miss',
    });
    fake.inject({ method: 'POST', path: '/api/clients:search', kind: 'miss' });
    await a.board(makePackage('loan_1', records('loan_1')));
    const clientPosts = fake.requests.filter((r) => r.method === 'POST' && r.path === '/api/clients');
    expect(clientPosts.map((r) => r.fromCache)).toEqual([false, true]);
    expect(fake.clients).toHaveLength(1);
  });

  it('the approver may not disburse: without disburseAuth the daemon stops with what to configure', async () => {
    await start();
    const a = adapter({ disburseAuth: undefined });
    const err = await a.board(makePackage('loan_1', records('loan_1'))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FatalError);
    expect((err as Error).message).toContain('core.mambu.disburseAuth');
    expect(fake.transactions).toHaveLength(0);
    // With the second credentials the same loan completes: approved once, disbursed once.
    await adapter().board(makePackage('loan_1', records('loan_1')));
    expect(fake.loans[0]).toMatchObject({
      accountState: 'ACTIVE',
      approvedBy: 'approver',
      disbursedBy: 'disburser',
    });
    expect(fake.transactions).toHaveLength(1);
  });

  it('a product that starts loans as partial applications: approval is requested, then given', async () => {
    await start();
    await adapter().board(
      makePackage('loan_1', records('loan_1', { loanFields: { productTypeKey: 'personal-loan' } })),
    );
    expect(fake.loans[0]).toMatchObject({ accountState: 'ACTIVE' });
  });

  it('customer match: the tax id finds the bank’s group and client; last guard before a create reuses a holder', async () => {
    await start();
    const g = fake.seedGroup({ id: '555', groupName: 'ACME TOOLS, L.L.C.', taxId: '12-3456789' });
    const c = fake.seedClient({ id: '556', firstName: 'Ann', lastName: 'Lee', taxId: '123456780' });
    const a = adapter({ approve: false, disburse: false });
    const found = await a.customers.findByTin({
      tin: '123456789',
      tinType: 'EIN',
      tinHash: 'h',
      name: 'Acme Tools LLC',
    });
    expect(found).toEqual([{ cif: '555', nameAgrees: true }]);
    // A mapping without the match result: the guard finds both by tax id and creates neither.
    await a.board(makePackage('loan_1', records('loan_1')));
    expect(fake.groups).toHaveLength(1);
    expect(fake.clients).toHaveLength(1);
    expect(fake.loans[0]!.body['accountHolderKey']).toBe(g.encodedKey);
    expect(c.id).toBe('556');
    // A matched customer (existing) that is gone: refused, naming it.
    const recs = records('loan_2');
    recs[1]!.fields = { id: '999', existing: true, groupName: 'x' };
    await expect(a.board(makePackage('loan_2', recs))).rejects.toThrow(
      /matched Mambu group 999 does not exist/,
    );
  });

  it('dates go as date-time with the tenant offset of each day (core.mambu.timeZone), never as a bare day', async () => {
    await start();
    const recs = records('loan_tz', {
      loanFields: {
        disbursementDetails: { expectedDisbursementDate: '2025-03-28', firstRepaymentDate: '2025-04-28' },
      },
    });
    await adapter({ timeZone: 'Europe/Berlin' }).board(makePackage('loan_tz', recs, []));
    // Berlin moves to summer time on 2025-03-30: the two days have different offsets.
    expect(fake.loans[0]!.body['disbursementDetails']).toEqual({
      expectedDisbursementDate: '2025-03-28T00:00:00+01:00',
      firstRepaymentDate: '2025-04-28T00:00:00+02:00',
    });
    expect(fake.refused()).toEqual([]);
    // A value that is neither a day nor an instant is refused before anything is written.
    const bad = records('loan_bad', {
      loanFields: { disbursementDetails: { expectedDisbursementDate: '2025-03-28T00:00:00' } },
    });
    await expect(adapter().board(makePackage('loan_bad', bad, []))).rejects.toThrow(
      /disbursementDetails\.expectedDisbursementDate "2025-03-28T00:00:00" is neither a day/,
    );
    expect(fake.loans).toHaveLength(1);
    expect(fake.clients).toHaveLength(1);
  });

  it('config check --connect: credentials, products of the set, custom field sets', async () => {
    await start();
    const ok = await adapter().checkConnection({
      productIds: [],
      productRefs: ['term-loan', 'personal-loan'],
      customFieldSets: { client: ['_taxInformation_Clients'] },
    });
    expect(ok.map((c) => [c.name, c.status])).toEqual([
      ['core', 'ok'],
      ['core.disburseAuth', 'ok'],
      ['core.products', 'ok'],
      ['core.customFields', 'ok'],
      ['core.timeZone', 'ok'],
    ]);
    const bad = await adapter({ loanRefField: '_other_Loans.ref' }).checkConnection({
      productIds: [],
      productRefs: ['no-such-product'],
      customFieldSets: { group: ['_extra_Groups'] },
    });
    expect(bad.find((c) => c.name === 'core.products')).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('no-such-product: no such loan product'),
    });
    expect(bad.find((c) => c.name === 'core.customFields')?.detail).toMatch(
      /GROUP has no custom field set _extra_Groups.*LOAN_ACCOUNT has no custom field set _other_Loans/,
    );
    // The tenant's zone (GET /setup/organization) differs from core.mambu.timeZone: named, with the fix.
    const zone = await adapter({ timeZone: 'America/New_York' }).checkConnection({ productIds: [] });
    expect(zone.find((c) => c.name === 'core.timeZone')).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining(
        "core.mambu.timeZone is America/New_York but the Mambu tenant's time zone is America/Chicago",
      ),
    });
    // An alias of the same zone agrees.
    const alias = await adapter({ timeZone: 'US/Central' }).checkConnection({ productIds: [] });
    expect(alias.find((c) => c.name === 'core.timeZone')?.status).toBe('ok');
    const refused = await adapter({ auth: { apiKey: 'wrong' } }).checkConnection({ productIds: [] });
    expect(refused[0]).toMatchObject({
      name: 'core',
      status: 'fail',
      detail: expect.stringContaining('401'),
    });
  });
});
