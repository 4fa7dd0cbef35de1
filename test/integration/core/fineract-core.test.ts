import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { CoreRejectedError, CoreUnavailableError } from '../../../src/core/port.js';
import { FatalError } from '../../../src/lib/errors.js';
import { silentLogger } from '../../../src/lib/logger.js';
import {
  startFakeFineract,
  type FakeFineract,
  type FakeFineractOptions,
} from '../../support/fake-fineract.js';
import { fineractRecords, makePackage, sha256 } from '../../unit/core/support.js';

const PDF = Buffer.from('%PDF-1.4 tax return\n%%EOF\n');
let fake: FakeFineract;
const adapters: FineractCore[] = [];

async function start(opts: FakeFineractOptions = {}): Promise<FakeFineract> {
  fake = await startFakeFineract(opts);
  return fake;
}

function adapter(
  o: { timeoutMs?: number; approve?: boolean; disburse?: boolean; password?: string } = {},
): FineractCore {
  const a = new FineractCore({
    clock: systemClock,
    baseUrl: fake.url,
    username: fake.username,
    password: o.password ?? fake.password,
    tenantId: fake.tenantId,
    officeId: 1,
    timeoutMs: o.timeoutMs ?? 5_000,
    insecureTls: false,
    approve: o.approve ?? false,
    disburse: o.disburse ?? false,
    logger: silentLogger(),
  });
  adapters.push(a);
  return a;
}

function loanPackage(
  loanId = 'loan_1',
  docs: Array<{ id: string; name: string | null; bytes: Buffer }> = [
    { id: 'doc_1', name: '../../etc/passwd', bytes: PDF },
  ],
) {
  return makePackage(loanId, fineractRecords(loanId, { docIds: docs.map((d) => d.id) }), docs);
}

/** Each external id exists at most once in the core; returns counts for assertions. */
function census() {
  const count = (ids: Array<string | null>) => {
    const m = new Map<string, number>();
    for (const id of ids) if (id !== null) m.set(id, (m.get(id) ?? 0) + 1);
    return m;
  };
  const clients = count(fake.clients.map((c) => c.externalId));
  const loans = count(fake.loans.map((l) => l.externalId));
  for (const [id, n] of [...clients, ...loans]) expect(n, `external id ${id}`).toBe(1);
  return {
    clients: fake.clients.length,
    loans: fake.loans.length,
    guarantors: fake.guarantors.length,
    documents: fake.documents.length,
  };
}

afterEach(async () => {
  for (const a of adapters.splice(0)) await a.close();
  await fake.close();
});

describe('FineractCore against a fake Fineract', () => {
  it('boards business and person clients, the loan, the guarantor and the documents', async () => {
    await start();
    const pkg = loanPackage();
    const receipt = await adapter().board(pkg);
    expect(census()).toEqual({ clients: 2, loans: 1, guarantors: 1, documents: 1 });
    const loan = fake.loans[0]!;
    const borrower = fake.clients.find((c) => c.externalId === 'biz_loan_1')!;
    expect(borrower).toMatchObject({ legalFormId: 2, fullname: 'Acme Tools LLC' });
    expect(fake.clients.find((c) => c.externalId === 'per_loan_1')).toMatchObject({
      legalFormId: 1,
      firstname: 'Ann',
      lastname: 'Lee',
    });
    expect(loan.clientId).toBe(borrower.id);
    expect(loan.body['clientExternalId']).toBeUndefined();
    expect(fake.guarantors[0]).toMatchObject({
      loanId: loan.id,
      guarantorTypeId: 1,
      entityId: fake.clients.find((c) => c.externalId === 'per_loan_1')!.id,
    });
    const doc = fake.documents[0]!;
    expect(doc).toMatchObject({
      loanId: loan.id,
      name: 'Document doc_1',
      sha256: sha256(PDF),
      size: PDF.length,
      fileName: 'etc_passwd.pdf',
      type: 'application/pdf',
    });
    expect(doc.description).toContain('[doc:doc_1]');
    expect(receipt).toMatchObject({
      coreReference: String(loan.id),
      loanExternalId: 'loan_1',
      mappingVersion: 'map-v1',
    });
    expect(receipt.documents).toEqual([
      { documentId: 'doc_1', sha256: sha256(PDF), bytes: PDF.length, coreId: String(doc.id) },
    ]);
    expect(receipt.records.map((r) => r.type)).toEqual(['client', 'client', 'loan', 'guarantor', 'document']);
    // Every command carried an Idempotency-Key derived from what it does, within Fineract's
    // VARCHAR(50); the upload (outside Fineract's command pipeline) carries none.
    const writes = fake.writes();
    expect(writes.map((w) => w.path.replace(/\d+/g, 'N'))).toEqual([
      '/clients',
      '/clients',
      '/loans',
      '/loans/N/guarantors',
      '/loans/N/documents',
    ]);
    const keys = writes.slice(0, 4).map((w) => w.idempotencyKey!);
    expect(keys.map((k) => k.split(':')[0])).toEqual(['client', 'client', 'loan', 'guarantor']);
    for (const k of keys) expect(k.length).toBeLessThanOrEqual(50);
    expect(new Set(keys).size).toBe(4);
    expect(writes[4]!.idempotencyKey).toBeNull();
  });

  it('boarding again is a no-op: look-ups find everything, no write is made', async () => {
    await start();
    const a = adapter();
    const first = await a.board(loanPackage());
    const writes = fake.writes().length;
    const second = await a.board(loanPackage());
    expect(fake.writes().length).toBe(writes);
    expect(second.coreReference).toBe(first.coreReference);
    expect(census()).toEqual({ clients: 2, loans: 1, guarantors: 1, documents: 1 });
  });

  it('a shared borrower across two loans is created once', async () => {
    await start();
    const a = adapter();
    await a.board(
      makePackage('loan_1', fineractRecords('loan_1', { borrower: 'biz_shared', guarantor: 'per_shared' })),
    );
    await a.board(
      makePackage('loan_2', fineractRecords('loan_2', { borrower: 'biz_shared', guarantor: 'per_shared' })),
    );
    expect(census()).toEqual({ clients: 2, loans: 2, guarantors: 2, documents: 0 });
  });

  it('loans sharing a borrower boarded concurrently, by one adapter or by two: one client', async () => {
    await start({ idempotencyReplay: false });
    const one = adapter();
    const pkgs = ['loan_1', 'loan_2', 'loan_3'].map((id) =>
      makePackage(id, fineractRecords(id, { borrower: 'biz_shared', guarantor: `per_${id}` })),
    );
    await Promise.all(pkgs.map((p) => one.board(p)));
    const [a, b] = [adapter(), adapter()];
    const more = ['loan_4', 'loan_5'].map((id) =>
      makePackage(id, fineractRecords(id, { borrower: 'biz_other', guarantor: `per_${id}` })),
    );
    await Promise.all([a.board(more[0]!), b.board(more[1]!)]);
    expect(census()).toEqual({ clients: 7, loans: 5, guarantors: 5, documents: 0 });
  });

  it('timeout after Fineract committed the loan, then retry: the adapter checks first, one loan', async () => {
    await start({ idempotencyReplay: false });
    fake.inject({ method: 'POST', path: '/loans', kind: 'hang-after-commit' });
    const a = adapter({ timeoutMs: 300 });
    const err = await a.board(loanPackage()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CoreUnavailableError);
    expect((err as CoreUnavailableError).ambiguous).toBe(true);
    expect(fake.loans).toHaveLength(1); // it did commit

    await a.board(loanPackage());
    expect(fake.writes('/loans')).toHaveLength(1);
    expect(census()).toEqual({ clients: 2, loans: 1, guarantors: 1, documents: 1 });
  });

  it('timeouts on client creation and document upload, then retry: nothing twice', async () => {
    await start({ idempotencyReplay: false });
    fake.inject({ method: 'POST', path: '/clients', kind: 'hang-after-commit' });
    fake.inject({ method: 'POST', path: /^\/loans\/\d+\/documents$/, kind: 'reset-after-commit' });
    const a = adapter({ timeoutMs: 300 });
    await expect(a.board(loanPackage())).rejects.toBeInstanceOf(CoreUnavailableError);
    await expect(a.board(loanPackage())).rejects.toMatchObject({
      name: 'CoreUnavailableError',
      ambiguous: true,
    });
    await a.board(loanPackage());
    expect(census()).toEqual({ clients: 2, loans: 1, guarantors: 1, documents: 1 });
  });

  it('crash mid-loan (clients created, loan not): a fresh adapter completes without duplicates', async () => {
    await start();
    fake.inject({ method: 'POST', path: '/loans', kind: 'status-before', status: 503 });
    const crashed = adapter();
    await expect(crashed.board(loanPackage())).rejects.toBeInstanceOf(CoreUnavailableError);
    expect(census()).toEqual({ clients: 2, loans: 0, guarantors: 0, documents: 0 });
    await crashed.close();

    const fresh = adapter();
    await fresh.board(loanPackage());
    expect(census()).toEqual({ clients: 2, loans: 1, guarantors: 1, documents: 1 });
    expect(fake.writes('/clients')).toHaveLength(2);
  });

  it('a 5xx after commit with Fineract idempotency on: the retry is served from its cache', async () => {
    await start({ idempotencyReplay: true });
    fake.inject({
      method: 'POST',
      path: /^\/loans\/\d+\/guarantors$/,
      kind: 'status-after-commit',
      status: 500,
    });
    const a = adapter();
    await expect(a.board(loanPackage())).rejects.toMatchObject({ ambiguous: true });
    await a.board(loanPackage());
    expect(census()).toEqual({ clients: 2, loans: 1, guarantors: 1, documents: 1 });
  });

  it("a 4xx becomes CoreRejectedError carrying Fineract's own message", async () => {
    await start();
    const records = fineractRecords('loan_1');
    const loan = records.find((r) => r.type === 'loan')!;
    loan.fields['loanTermFrequency'] = 12; // 60 monthly repayments: the term must be 60
    const err = await adapter()
      .board(makePackage('loan_1', records))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CoreRejectedError);
    expect((err as CoreRejectedError).status).toBe(400);
    expect((err as Error).message).toMatch(
      /loanTermFrequency: Loan term frequency \(12\) must be equal to repaymentEvery × numberOfRepayments \(60\)/,
    );
  });

  it('refuses dates without dateFormat/locale and person/entity name mix-ups, with the parameter named', async () => {
    await start();
    const records = fineractRecords('loan_1');
    const biz = records[0]!;
    biz.fields['firstname'] = 'Acme';
    delete biz.fields['dateFormat'];
    const err = (await adapter()
      .board(makePackage('loan_1', records))
      .catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(CoreRejectedError);
    expect(err.message).toContain('firstname');
    expect(err.message).toContain('dateFormat');
    expect(fake.clients).toHaveLength(0);
  });

  it('refuses unknown record types before writing anything', async () => {
    await start();
    const records = [...fineractRecords('loan_1'), { type: 'customer', externalId: 'c1', fields: {} }];
    await expect(adapter().board(makePackage('loan_1', records))).rejects.toThrow(
      /record type "customer".*not supported/,
    );
    expect(fake.writes()).toHaveLength(0);
  });

  it('wrong credentials are a FatalError (operator problem), not a quarantine', async () => {
    await start();
    await expect(adapter({ password: 'nope' }).board(loanPackage())).rejects.toBeInstanceOf(FatalError);
    expect(await adapter({ password: 'nope' }).health()).toMatchObject({ ok: false });
    expect(await adapter().health()).toEqual({ ok: true, detail: fake.url });
  });

  it('approves and disburses by config, once, even when a command times out after commit', async () => {
    await start({ idempotencyReplay: false });
    fake.inject({ method: 'POST', path: /^\/loans\/\d+$/, kind: 'hang-after-commit' });
    const a = adapter({ approve: true, disburse: true, timeoutMs: 300 });
    await expect(a.board(loanPackage())).rejects.toBeInstanceOf(CoreUnavailableError);
    await a.board(loanPackage());
    await a.board(loanPackage());
    expect(fake.loans[0]).toMatchObject({
      statusId: 300,
      approvedOnDate: '2025-03-14',
      actualDisbursementDate: '2025-03-14',
    });
    expect(fake.writes(/^\/loans\/\d+$/)).toHaveLength(2);
  });

  it('findLoan and listLoans read the loan back in platform units', async () => {
    await start();
    const a = adapter();
    await a.board(loanPackage());
    const found = await a.findLoan('loan_1');
    expect(found).toEqual({
      coreReference: String(fake.loans[0]!.id),
      loanExternalId: 'loan_1',
      mappingVersion: null,
      fields: {
        centsAmount: 125000050,
        bpsRate: 725,
        maturityDate: '2030-03-14',
        firstPaymentDate: '2025-04-14',
        paymentFrequency: 'monthly',
      },
      // A loan lookup cannot vouch for the guarantors and documents of the same board.
      complete: false,
    });
    expect(await a.findLoan('nope')).toBeNull();
    const all = [];
    for await (const l of a.listLoans()) all.push(l.loanExternalId);
    expect(all).toEqual(['loan_1']);
  });
});
