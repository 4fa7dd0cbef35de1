import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FormData, request } from 'undici';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappedRecord } from '../../../src/mapping/types.js';
import {
  DEFAULT_FINERACT_TENANT,
  FINERACT_OPERATIONS,
  requestErrors,
  responseProblems,
  startFineractSimulator,
  type FineractOperationName,
  type FineractSimulator,
} from '../../../src/sandbox/cores/fineract/index.js';
import { fineractRecords, makePackage } from '../../unit/core/support.js';

/**
 * The Fineract simulator is bound to Fineract's published contract (contract.ts): every request
 * shape the adapter can send is driven through it and accepted by the schemas, every answer it
 * gives fits the published response schemas, and a request that breaks the contract gets
 * Fineract's 400 envelope naming the parameter.
 */

let sim: FineractSimulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

function adapter(s: FineractSimulator, o: { approve?: boolean; disburse?: boolean } = {}): FineractCore {
  return new FineractCore({
    clock: systemClock,
    baseUrl: s.url,
    username: s.username,
    password: s.password,
    tenantId: s.tenantId,
    officeId: 1,
    timeoutMs: 5_000,
    insecureTls: false,
    approve: o.approve ?? false,
    disburse: o.disburse ?? false,
    logger: silentLogger(),
  });
}

function operationsSeen(s: FineractSimulator): Set<FineractOperationName> {
  return new Set(
    s.requests
      .filter((r) => r.operation !== null && r.status >= 200 && r.status < 300)
      .map((r) => r.operation as FineractOperationName),
  );
}

const FIXTURES = join(import.meta.dirname, '../../../mappings/fineract/fixtures');
const fixtureRecords = readdirSync(FIXTURES, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => ({
    name: d.name,
    records: (
      JSON.parse(readFileSync(join(FIXTURES, d.name, 'expected.json'), 'utf8')) as {
        records?: MappedRecord[];
      }
    ).records,
  }))
  .filter((c): c is { name: string; records: MappedRecord[] } => Array.isArray(c.records));

describe('the Fineract simulator holds the adapter to the published contract', () => {
  it('every operation of the adapter, each record type, optional field and state transition: all accepted', async () => {
    sim = await startFineractSimulator();
    const core = adapter(sim, { approve: true, disburse: true });
    const bankCustomer = sim.seedClient({ fullname: 'Existing Customer Inc' });
    // Person and entity clients, identifiers, a loan with every optional field, customer and
    // external guarantors, documents; submitted → approved → disbursed.
    // The guarantor's id is no path (a space): looked up by the listing search as well.
    const records = fineractRecords('loan_all', { guarantor: 'per loan_all', docIds: ['doc_a', 'doc_b'] });
    const loan = records.find((r) => r.type === 'loan')!;
    Object.assign(loan.fields, {
      accountNo: '4000000017',
      graceOnPrincipalPayment: 3,
      graceOnInterestPayment: 0,
      interestRatePerPeriod: '7.125',
    });
    records.push(
      {
        type: 'identifier',
        externalId: 'biz_loan_all:tin',
        fields: {
          clientExternalId: 'biz_loan_all',
          documentTypeId: 2,
          documentKey: '121234567',
          description: 'EIN',
        },
      },
      {
        type: 'identifier',
        externalId: 'per loan_all:tin',
        fields: { clientExternalId: 'per loan_all', documentTypeId: 3, documentKey: '123456789' },
      },
      {
        type: 'client',
        externalId: 'biz_matched',
        fields: {
          legalFormId: 2,
          fullname: 'Existing Customer Inc',
          clientId: String(bankCustomer.id),
          officeId: 1,
        },
      },
      {
        type: 'guarantor',
        externalId: 'loan_all:biz_matched',
        fields: { clientExternalId: 'biz_matched', loanExternalId: 'loan_all', guarantorTypeId: 1 },
      },
      {
        type: 'guarantor',
        externalId: 'loan_all:ext',
        fields: { loanExternalId: 'loan_all', guarantorTypeId: 3, firstname: 'Sam', lastname: 'Outside' },
      },
    );
    const docs = ['doc_a', 'doc_b'].map((id) => ({
      id,
      name: `${id}.pdf`,
      bytes: Buffer.from(`%PDF ${id}`),
    }));
    await core.board(makePackage('loan_all', records, docs));
    // A second board reads everything back and writes nothing.
    await core.board(makePackage('loan_all', records, docs));
    // Customer match, reconciliation and connection check: the rest of the reads.
    await core.customers.findByTin({
      tin: '121234567',
      tinType: 'EIN',
      tinHash: 'h',
      name: 'Acme Tools LLC',
    });
    expect(await core.findLoan('loan_all')).not.toBeNull();
    for await (const _ of core.listLoans()) void _;
    await core.checkConnection({ productIds: [1] });
    // An id an earlier version stored raw (not path-safe): found by the listing search.
    await core.findLoan('id with spaces');
    await core.close();

    expect(sim.contractRefusals).toEqual([]);
    expect(sim.contractViolations).toEqual([]);
    expect(sim.requests.filter((r) => r.status >= 400 && r.status !== 404)).toEqual([]);
    expect([...operationsSeen(sim)].sort()).toEqual(
      (Object.keys(FINERACT_OPERATIONS) as FineractOperationName[]).sort(),
    );
    expect(sim.loans.map((l) => [l.externalId, l.statusId, l.accountNo])).toEqual([
      ['loan_all', 300, '4000000017'],
    ]);
    expect(sim.guarantors.map((g) => g.guarantorTypeId).sort()).toEqual([1, 1, 3]);
    expect(sim.documents).toHaveLength(2);
    // The decimals went as the JSON numbers the OpenAPI types them, exactly.
    expect(sim.loans[0]!.body['principal']).toBe(1250000.5);
    expect(sim.loans[0]!.body['interestRatePerPeriod']).toBe(7.125);
  });

  it.each(fixtureRecords)(
    'mapping fixture $name: every request it makes fits the contract',
    async ({ records }) => {
      sim = await startFineractSimulator();
      const matched = records
        .filter((r) => r.type === 'client' && r.fields['clientId'] !== undefined)
        .sort((a, b) => Number(a.fields['clientId']) - Number(b.fields['clientId']));
      for (const m of matched) sim.seedClient({ fullname: `bank customer ${m.externalId}` });
      const loan = records.find((r) => r.type === 'loan')!;
      const docs = records
        .filter((r) => r.type === 'document')
        .map((r) => ({
          id: r.externalId,
          name: `${r.externalId}.pdf`,
          bytes: Buffer.from(`bytes ${r.externalId}`),
        }));
      const core = adapter(sim, { approve: true, disburse: true });
      try {
        await core.board(makePackage(loan.externalId, records, docs));
      } finally {
        await core.close();
      }
      expect(sim.contractRefusals).toEqual([]);
      expect(sim.contractViolations).toEqual([]);
      expect(sim.loans.map((l) => l.statusId)).toEqual([300]);
    },
  );

  it('a request that breaks the contract gets Fineract 400 envelope naming each parameter', async () => {
    sim = await startFineractSimulator();
    const auth = `Basic ${Buffer.from(`${sim.username}:${sim.password}`).toString('base64')}`;
    const client = await post(sim, auth, '/clients', {
      officeId: 1,
      legalFormId: 1,
      firstname: 'A',
      lastname: 'B',
      active: true,
      activationDate: '14 March 2025',
      externalId: 'x'.repeat(101),
    });
    expect(client.status).toBe(400);
    expect(client.body).toMatchObject({
      httpStatusCode: '400',
      userMessageGlobalisationCode: 'validation.msg.validation.errors.exist',
      developerMessage: expect.any(String),
      defaultUserMessage: expect.any(String),
    });
    const codes = (client.body as { errors: Array<Record<string, unknown>> }).errors.map((e) => [
      e['parameterName'],
      e['userMessageGlobalisationCode'],
    ]);
    expect(codes).toEqual(
      expect.arrayContaining([
        ['externalId', 'validation.msg.client.externalId.exceeds.max.length'],
        ['dateFormat', 'validation.msg.client.dateFormat.cannot.be.blank'],
        ['locale', 'validation.msg.client.locale.cannot.be.blank'],
      ]),
    );
    for (const e of (client.body as { errors: Array<Record<string, unknown>> }).errors)
      expect(Object.keys(e).sort()).toEqual(
        [
          'args',
          'defaultUserMessage',
          'developerMessage',
          'parameterName',
          'userMessageGlobalisationCode',
          'value',
        ].sort(),
      );
    const c = sim.seedClient({ firstname: 'Ann', lastname: 'Lee' });
    const loan = await post(sim, auth, '/loans', {
      clientId: c.id,
      productId: 1,
      principal: true,
      loanTermFrequency: 12,
      loanTermFrequencyType: 2,
      loanType: 'personal',
      numberOfRepayments: 12,
      repaymentEvery: 1,
      repaymentFrequencyType: 7,
      interestRatePerPeriod: '5',
      amortizationType: 1,
      interestType: 0,
      interestCalculationPeriodType: 1,
      transactionProcessingStrategyCode: 'mifos-standard-strategy',
      expectedDisbursementDate: '2025-02-30',
      dateFormat: 'yyyy-MM-dd',
      locale: 'en',
    });
    expect(loan.status).toBe(400);
    const loanCodes = (loan.body as { errors: Array<Record<string, unknown>> }).errors.map(
      (e) => e['userMessageGlobalisationCode'],
    );
    expect(loanCodes).toEqual(
      expect.arrayContaining([
        'validation.msg.loan.principal.invalid.decimal.format',
        'validation.msg.loan.loanType.is.not.one.of.expected.enumerations',
        'validation.msg.loan.repaymentFrequencyType.is.not.one.of.expected.enumerations',
        'validation.msg.loan.submittedOnDate.cannot.be.blank',
      ]),
    );
    expect(sim.loans).toHaveLength(0);
    expect(sim.contractRefusals.map((r) => r.operation)).toEqual(['createClient', 'createLoan']);
    // The dates a base-valid request carries are read with its dateFormat: 30 February is no date.
    expect(
      requestErrors('approveLoan', { approvedOnDate: '2025-02-30', dateFormat: 'yyyy-MM-dd', locale: 'en' }),
    ).toEqual([expect.objectContaining({ parameterName: 'approvedOnDate', code: 'invalid.date.format' })]);
  });

  it('an empty document, which Fineract refuses after the loan exists (size > 0), is decided before any write', async () => {
    sim = await startFineractSimulator();
    const auth = `Basic ${Buffer.from(`${sim.username}:${sim.password}`).toString('base64')}`;
    const c = sim.seedClient({ firstname: 'Ann', lastname: 'Lee' });
    const l = await post(sim, auth, '/loans', {
      clientId: c.id,
      productId: 1,
      principal: 1000,
      loanTermFrequency: 12,
      loanTermFrequencyType: 2,
      loanType: 'individual',
      numberOfRepayments: 12,
      repaymentEvery: 1,
      repaymentFrequencyType: 2,
      interestRatePerPeriod: 5,
      amortizationType: 1,
      interestType: 0,
      interestCalculationPeriodType: 1,
      transactionProcessingStrategyCode: 'mifos-standard-strategy',
      expectedDisbursementDate: '2025-03-14',
      submittedOnDate: '2025-03-14',
      dateFormat: 'yyyy-MM-dd',
      locale: 'en',
    });
    expect(l.status).toBe(200);
    const form = new FormData();
    form.append('name', 'empty');
    form.append('file', new Blob([], { type: 'application/pdf' }), 'empty.pdf');
    const res = await request(`${sim.url}/loans/${(l.body as { loanId: number }).loanId}/documents`, {
      method: 'POST',
      headers: { authorization: auth, 'fineract-platform-tenantid': sim.tenantId },
      body: form,
    });
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(await res.body.json())).toContain(
      'validation.msg.document.size.not.greater.than.zero',
    );

    const core = adapter(sim);
    const records = fineractRecords('loan_empty_doc', { docIds: ['doc_empty', 'doc_ok'] });
    const r = await core.board(
      makePackage('loan_empty_doc', records, [
        { id: 'doc_empty', name: 'empty.pdf', bytes: Buffer.alloc(0) },
        { id: 'doc_ok', name: 'ok.pdf', bytes: Buffer.from('%PDF ok') },
      ]),
    );
    await core.close();
    expect(r.warnings).toEqual([expect.stringContaining('document doc_empty is empty (0 bytes)')]);
    expect(sim.documents.map((d) => d.name)).toEqual(['Document doc_ok']);
    expect(sim.loans.map((x) => x.externalId)).toContain('loan_empty_doc');
  });

  it("a tenant's setup is the simulator's: a client activated before its office opened or after the business date is refused", async () => {
    sim = await startFineractSimulator({
      offices: [{ id: 7, name: 'Branch 7', openingDate: '2025-06-01' }],
      businessDate: '2025-09-30',
    });
    const auth = `Basic ${Buffer.from(`${sim.username}:${sim.password}`).toString('base64')}`;
    const client = (activationDate: string) =>
      post(sim!, auth, '/clients', {
        officeId: 7,
        legalFormId: 2,
        fullname: 'Acme',
        active: true,
        activationDate,
        dateFormat: 'yyyy-MM-dd',
        locale: 'en',
      });
    const early = await client('2025-03-14');
    expect(early.status).toBe(400);
    expect(JSON.stringify(early.body)).toContain(
      'error.msg.clients.activationDate.cannot.be.before.office.activation.date',
    );
    const future = await client('2025-10-01');
    expect(future.status).toBe(400);
    expect(JSON.stringify(future.body)).toContain('validation.msg.client.activationDate.in.the.future');
    expect((await client('2025-07-01')).status).toBe(200);
    expect(sim.clients.map((c) => c.officeId)).toEqual([7]);
    expect((await get(sim, auth, '/offices/1')).status).toBe(404);
    expect(sim.coreBlock()['http']).toMatchObject({ officeId: 7 });
  });

  it('the response schemas can fail: an answer without the published fields is caught', () => {
    expect(responseProblems('getLoan', { id: 1, accountNo: '000000001' }).length).toBeGreaterThan(3);
    expect(responseProblems('getLoan', { id: 1, status: { id: 100 } }).join(' ')).toMatch(/timeline/);
    expect(responseProblems('createClient', { resourceId: 'one' })).not.toEqual([]);
    expect(
      responseProblems('getOffice', { id: 1, name: 'x', openingDate: '2009-01-01', hierarchy: '.' }),
    ).toEqual([expect.stringMatching(/^openingDate/)]);
  });

  it('coreBlock() is the core: block that points a connector at it, from the default tenant', async () => {
    sim = await startFineractSimulator();
    expect(sim.coreBlock()).toEqual({
      adapter: 'http',
      http: {
        profile: 'fineract',
        baseUrl: sim.url,
        username: DEFAULT_FINERACT_TENANT.username,
        password: DEFAULT_FINERACT_TENANT.password,
        tenantId: DEFAULT_FINERACT_TENANT.tenantId,
        officeId: 1,
        approve: true,
        disburse: false,
      },
    });
    // The products mappings/fineract names exist; others do not.
    const auth = `Basic ${Buffer.from(`${sim.username}:${sim.password}`).toString('base64')}`;
    for (const id of [1, 2, 3, 4]) expect((await get(sim, auth, `/loanproducts/${id}`)).status).toBe(200);
    expect((await get(sim, auth, '/loanproducts/5')).status).toBe(404);
  });
});

async function post(s: FineractSimulator, auth: string, path: string, body: unknown) {
  const res = await request(`${s.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: auth,
      'fineract-platform-tenantid': s.tenantId,
      'content-type': 'application/json',
    },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.json() };
}

async function get(s: FineractSimulator, auth: string, path: string) {
  const res = await request(`${s.url}${path}`, {
    headers: { authorization: auth, 'fineract-platform-tenantid': s.tenantId },
  });
  return { status: res.statusCode, body: await res.body.json() };
}
