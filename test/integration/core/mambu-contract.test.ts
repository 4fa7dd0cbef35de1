import { afterEach, describe, expect, it } from 'vitest';
import { coreSchema } from '../../../src/config/schema.js';
import { MambuCore } from '../../../src/core/mambu/mambu-core.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import {
  documentResponse,
  errorResponse,
  loanRequest,
  loanTransaction,
  clientResponse,
} from '../../../src/sandbox/cores/mambu/contract.js';
import {
  MAMBU_OPERATIONS,
  startMambuSimulator,
  type MambuSimulator,
} from '../../../src/sandbox/cores/mambu/index.js';
import { makePackage } from '../../unit/core/support.js';

/**
 * Issue 42: every request shape the Mambu adapter can send, driven through the simulator that holds
 * them to Mambu's published API v2 contract (src/sandbox/cores/mambu/contract.ts): each record type
 * (client with identity document and tax id, group with members, loan for a group and for a
 * client, every optional field the mambu set maps), each state transition (REQUEST_APPROVAL,
 * APPROVE, the disbursement), documents, and every look-up (by id, searches, lists, products,
 * custom field sets, the organization). The contract accepted all of them (nothing refused), the
 * simulator's answers matched the response schemas (no contract violations), and every operation of
 * the contract was exercised. A day sent where Mambu publishes a date-time is refused as Mambu
 * refuses it: the adapter of round 4 fails this test.
 */
let sim: MambuSimulator;
const cores: MambuCore[] = [];

afterEach(async () => {
  for (const c of cores.splice(0)) await c.close();
  await sim?.close();
});

function adapter(): MambuCore {
  const block = coreSchema.parse(sim.coreBlock());
  const m = block.mambu!;
  const core = new MambuCore({
    baseUrl: m.baseUrl,
    auth: m.auth,
    disburseAuth: m.disburseAuth,
    timeoutMs: 5_000,
    insecureTls: false,
    approve: m.approve,
    disburse: m.disburse,
    branchKey: 'main-branch',
    taxIdField: m.taxIdField,
    loanRefField: m.loanRefField,
    timeZone: m.timeZone ?? 'America/Chicago',
    documents: { maxBytes: 1024 * 1024, refused: 'skip' },
    logger: silentLogger(),
    clock: systemClock,
  });
  cores.push(core);
  return core;
}

const person = (id: string, ssn: string): MappedRecord => ({
  type: 'client',
  externalId: id,
  fields: {
    firstName: 'Ann',
    lastName: 'Lee',
    idDocuments: [{ documentType: 'SSN', documentId: ssn, issuingAuthority: 'IRS' }],
    _taxInformation_Clients: { taxId: ssn },
  },
});

const loan = (id: string, holder: string, type: 'GROUP' | 'CLIENT', extra: Record<string, unknown> = {}) => ({
  type: 'loan',
  externalId: id,
  fields: {
    accountHolderExternalId: holder,
    accountHolderType: type,
    productTypeKey: 'term-loan',
    loanName: 'SBA 7(a) term loan',
    loanAmount: '250000.00',
    scheduleSettings: {
      repaymentInstallments: 120,
      repaymentPeriodCount: 1,
      repaymentPeriodUnit: 'MONTHS',
      gracePeriod: 6,
      gracePeriodType: 'PAY_INTEREST_ONLY',
    },
    interestSettings: { interestRate: '10.5' },
    disbursementDetails: { expectedDisbursementDate: '2025-08-19', firstRepaymentDate: '2025-09-19' },
    notes: 'working capital',
    ...extra,
  },
});

describe('Mambu adapter requests against the published-contract schemas (issue 42)', () => {
  it('every request shape the adapter sends is accepted, every answer is Mambu-shaped, every operation is used', async () => {
    sim = await startMambuSimulator();
    const core = adapter();
    // 1. A business loan: client (identity document, tax id), group with its member, loan with every
    //    optional field the set maps, approve, disburse by the disburser, a document.
    const business: MappedRecord[] = [
      person('per_1', '123456780'),
      {
        type: 'group',
        externalId: 'biz_1',
        fields: {
          groupName: 'Acme Tools LLC',
          memberExternalIds: ['per_1'],
          _taxInformation_Groups: { taxId: '123456789' },
        },
      },
      loan('loan_1', 'biz_1', 'GROUP'),
      {
        type: 'document',
        externalId: 'doc_1',
        fields: { loanExternalId: 'loan_1', name: 'tax return.pdf', notes: 'financials' },
      },
    ];
    const pdf = Buffer.from('%PDF-1.4 test');
    await core.board(makePackage('loan_1', business, [{ id: 'doc_1', name: 'tax return.pdf', bytes: pdf }]));
    // 2. A person's loan on a product that starts loans as partial applications (REQUEST_APPROVAL
    //    first), with the optional fields left out: no first repayment date, no name, no notes.
    const personal = loan('loan_2', 'per_2', 'CLIENT', {
      productTypeKey: 'personal-loan',
      scheduleSettings: {
        repaymentInstallments: 36,
        repaymentPeriodCount: 2,
        repaymentPeriodUnit: 'WEEKS',
        gracePeriod: 0,
        gracePeriodType: 'NONE',
      },
      disbursementDetails: { expectedDisbursementDate: '2025-11-02' },
    });
    const { loanName: _name, notes: _notes, ...personalFields } = personal.fields;
    await core.board(
      makePackage('loan_2', [person('per_2', '223456780'), { ...personal, fields: personalFields }]),
    );
    // 3. Customers the bank already has (matched: existing, referenced by their Mambu id) and a
    //    holder found by its tax id (the last guard before a create).
    const seededGroup = sim.seedGroup({ id: '777', groupName: 'Bank Customer Inc', taxId: '323456789' });
    sim.seedClient({ id: '778', firstName: 'Bo', lastName: 'Ng', taxId: '423456780' });
    await core.board(
      makePackage('loan_3', [
        {
          type: 'group',
          externalId: 'biz_3',
          fields: { id: '777', existing: true, groupName: 'Bank Customer Inc' },
        },
        { ...person('per_3', '423456780') },
        loan('loan_3', 'biz_3', 'GROUP'),
      ]),
    );
    // 4. Boarding again only looks (ids, the disbursement's externalId, the document's marker).
    await core.board(makePackage('loan_1', business, [{ id: 'doc_1', name: 'tax return.pdf', bytes: pdf }]));
    // 5. Reconciliation, the customer match and config check --connect read.
    expect(await core.findLoan('loan_1')).toMatchObject({ loanExternalId: 'loan_1' });
    const listed: string[] = [];
    for await (const l of core.listLoans()) listed.push(l.loanExternalId);
    expect(listed.sort()).toEqual(['loan_1', 'loan_2', 'loan_3']);
    expect(
      await core.customers.findByTin({
        tin: '123456789',
        tinType: 'EIN',
        tinHash: 'h',
        name: 'Acme Tools LLC',
      }),
    ).toHaveLength(1);
    const checks = await core.checkConnection({
      productIds: [],
      productRefs: ['term-loan', 'personal-loan'],
      customFieldSets: { client: ['_taxInformation_Clients'], group: ['_taxInformation_Groups'] },
    });
    expect(checks.every((c) => c.status === 'ok')).toBe(true);

    expect(sim.contractViolations).toEqual([]);
    expect(sim.refused()).toEqual([]);
    expect(sim.requests.filter((r) => r.status >= 500 || r.status === 0)).toEqual([]);
    // Every operation of the contract was driven, and answered with a success at least once.
    const used = new Set(sim.requests.filter((r) => r.status < 300).map((r) => r.operation));
    expect([...Object.keys(MAMBU_OPERATIONS)].filter((op) => !used.has(op))).toEqual([]);
    // Each state transition happened: three loans, all ACTIVE; the person's loan was requested first.
    expect(sim.loans.map((l) => l.accountState)).toEqual(['ACTIVE', 'ACTIVE', 'ACTIVE']);
    expect(sim.requests.filter((r) => r.operation === 'changeLoanState').length).toBe(4);
    expect(sim.loans[2]!.body['accountHolderKey']).toBe(seededGroup.encodedKey);
    expect(sim.clients.filter((c) => c.id === '778')).toHaveLength(1);
    expect(sim.clients).toHaveLength(3);
    expect(sim.documents).toHaveLength(1);
    expect(sim.transactions).toHaveLength(3);
    // Optional fields reached Mambu as sent (and as published): branch, name, notes, dates with offsets.
    expect(sim.loans[0]!.body).toMatchObject({
      assignedBranchKey: 'main-branch',
      loanName: 'SBA 7(a) term loan',
      notes: 'working capital',
      disbursementDetails: {
        expectedDisbursementDate: '2025-08-19T00:00:00-05:00',
        firstRepaymentDate: '2025-09-19T00:00:00-05:00',
      },
    });
    expect(sim.loans[1]!.body['disbursementDetails']).toEqual({
      expectedDisbursementDate: '2025-11-02T00:00:00-05:00',
    });
  });

  it('a day where Mambu publishes a date-time is refused as Mambu refuses it (400 INVALID_PARAMETERS naming the field)', async () => {
    sim = await startMambuSimulator();
    const client = await fetch(`${sim.url}/clients`, {
      method: 'POST',
      headers: {
        accept: 'application/vnd.mambu.v2+json',
        'content-type': 'application/json',
        authorization: `Basic ${Buffer.from('approver:approver-pass').toString('base64')}`,
      },
      body: JSON.stringify({ firstName: 'Ann', lastName: 'Lee' }),
    });
    expect(client.status).toBe(201);
    const holder = clientResponse.parse(await client.json());
    const post = (body: unknown) =>
      fetch(`${sim.url}/loans`, {
        method: 'POST',
        headers: {
          accept: 'application/vnd.mambu.v2+json',
          'content-type': 'application/json',
          authorization: `Basic ${Buffer.from('approver:approver-pass').toString('base64')}`,
        },
        body: JSON.stringify(body),
      });
    const body = {
      accountHolderKey: holder.encodedKey,
      accountHolderType: 'CLIENT',
      productTypeKey: sim.products[0]!.encodedKey,
      loanAmount: 1000,
      scheduleSettings: {
        repaymentInstallments: 12,
        repaymentPeriodCount: 1,
        repaymentPeriodUnit: 'MONTHS',
        gracePeriod: 0,
      },
      interestSettings: { interestRate: 5 },
      disbursementDetails: { expectedDisbursementDate: '2025-08-19' },
    };
    const refused = await post(body);
    expect(refused.status).toBe(400);
    const err = errorResponse.parse(await refused.json());
    expect(err.errors[0]).toMatchObject({ errorCode: 4, errorReason: 'INVALID_PARAMETERS' });
    expect(err.errors[0]!.errorSource).toMatch(/^disbursementDetails\.expectedDisbursementDate: /);
    expect(sim.loans).toHaveLength(0);
    // Other published types: an enum, an int32, a property the schema does not have.
    for (const [bad, field] of [
      [{ ...body, accountHolderType: 'PERSON' }, 'accountHolderType'],
      [
        { ...body, scheduleSettings: { ...body.scheduleSettings, repaymentInstallments: 1.5 } },
        'scheduleSettings.repaymentInstallments',
      ],
      [{ ...body, loanAmount: '1000' }, 'loanAmount'],
      [{ ...body, accountHolderExternalId: 'x' }, 'accountHolderExternalId'],
    ] as const) {
      const r = await post(bad);
      expect(r.status).toBe(400);
      expect(errorResponse.parse(await r.json()).errors[0]!.errorSource).toContain(field);
    }
    // With the offset the same loan is taken.
    const ok = await post({
      ...body,
      disbursementDetails: { expectedDisbursementDate: '2025-08-19T00:00:00-05:00' },
    });
    expect(ok.status).toBe(201);
    expect(sim.contractViolations).toEqual([]);
  });

  it('the answer schemas hold the simulator to Mambu’s names: the round-4 fake’s shapes would be caught', () => {
    // The old fake answered a disbursement with its own names (loanId, by) and a document with a string id.
    expect(
      loanTransaction.safeParse({
        encodedKey: 'k',
        id: '1',
        loanId: 'L1',
        type: 'DISBURSEMENT',
        externalId: 'x',
        by: 'u',
      }).success,
    ).toBe(false);
    expect(documentResponse.safeParse({ id: '8a01', name: 'n', type: 'pdf' }).success).toBe(false);
    expect(
      clientResponse.safeParse({ id: '1', encodedKey: 'k', firstName: 'a', lastName: 'b', clientState: 'X' })
        .success,
    ).toBe(false);
    // A date without offset is not a date-time.
    expect(
      loanRequest.safeParse({
        accountHolderKey: 'k',
        accountHolderType: 'CLIENT',
        productTypeKey: 'p',
        loanAmount: 1,
        disbursementDetails: { firstRepaymentDate: '2025-08-19T00:00:00' },
      }).success,
    ).toBe(false);
  });
});
