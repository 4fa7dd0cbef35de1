import { afterEach, describe, expect, it } from 'vitest';
import { DIGEST_PREFIX, fineractExternalId } from '../../../src/core/fineract/external-id.js';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { openDatabase, type Db } from '../../../src/store/db.js';
import { createExternalRefStore } from '../../../src/store/external-refs.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import { fineractRecords, makePackage } from '../../unit/core/support.js';

/**
 * Platform ids longer than Fineract's externalId (VARCHAR(100)): stored as a digest, found again
 * by it on a retry (no second client or loan), and mapped back to the platform id in a listing.
 */
const PDF = Buffer.from('%PDF-1.4 statement\n%%EOF\n');
const LONG = (what: string): string => `urn:lender:${what}:${'x'.repeat(120)}:${what.length}`;

let fake: FakeFineract | undefined;
let db: Db | undefined;
const adapters: FineractCore[] = [];

function adapter(): FineractCore {
  if (!fake || !db) throw new Error('start the fake first');
  const a = new FineractCore({
    baseUrl: fake.url,
    username: fake.username,
    password: fake.password,
    tenantId: fake.tenantId,
    officeId: 1,
    timeoutMs: 5_000,
    insecureTls: false,
    approve: false,
    disburse: false,
    logger: silentLogger(),
    externalRefs: createExternalRefStore(db),
  });
  adapters.push(a);
  return a;
}

afterEach(async () => {
  for (const a of adapters.splice(0)) await a.close();
  await fake?.close();
  db?.close();
  fake = undefined;
  db = undefined;
});

describe('fineractExternalId', () => {
  it('keeps an id that fits, digests a longer one deterministically (sha256, base64url), and one that looks like a digest', () => {
    expect(fineractExternalId('ln_1nh9j7qm2q')).toBe('ln_1nh9j7qm2q');
    const hundred = 'a'.repeat(100);
    expect(fineractExternalId(hundred)).toBe(hundred);
    const d = fineractExternalId('a'.repeat(101));
    expect(d).toMatch(/^sha256:[A-Za-z0-9_-]{43}$/);
    expect(d.length).toBeLessThanOrEqual(100);
    expect(fineractExternalId('a'.repeat(101))).toBe(d);
    expect(fineractExternalId('b'.repeat(101))).not.toBe(d);
    // An id that starts like a digest could meet one: it is digested too.
    expect(fineractExternalId(`${DIGEST_PREFIX}abc`)).not.toBe(`${DIGEST_PREFIX}abc`);
  });
});

describe('FineractCore with ids longer than externalId', () => {
  it('boards under digests, finds the loan and clients again on a retry, and lists the platform id', async () => {
    const f = (fake = await startFakeFineract());
    db = openDatabase(':memory:');
    const loanId = LONG('loan');
    const borrower = LONG('business');
    const guarantor = LONG('person');
    const docId = LONG('document');
    const pkg = makePackage(loanId, fineractRecords(loanId, { borrower, guarantor, docIds: [docId] }), [{ id: docId, name: 'statement.pdf', bytes: PDF }]);
    const receipt = await adapter().board(pkg);
    expect(f.loans).toHaveLength(1);
    expect(f.loans[0]!.externalId).toBe(fineractExternalId(loanId));
    expect(f.clients.map((c) => c.externalId).sort()).toEqual([fineractExternalId(borrower), fineractExternalId(guarantor)].sort());
    expect(f.writes().filter((w) => w.status >= 400)).toEqual([]);
    // Fineract's own account number, read back after the create.
    expect(receipt.accountNumber).toBe(f.loans[0]!.accountNo);
    expect(f.documents[0]!.description).toContain(`[doc:${fineractExternalId(docId)}]`);

    // A retry (a restart, a new adapter) finds everything by the same digests: nothing twice.
    const again = await adapter().board(pkg);
    expect(again.coreReference).toBe(receipt.coreReference);
    expect(f.loans).toHaveLength(1);
    expect(f.clients).toHaveLength(2);
    expect(f.documents).toHaveLength(1);
    expect((await adapter().findLoan(loanId))?.coreReference).toBe(receipt.coreReference);

    // A listing (reconciliation) names the platform id, not the digest.
    const listed = [];
    for await (const l of adapter().listLoans()) listed.push(l.loanExternalId);
    expect(listed).toEqual([loanId]);
  });

  it('sends the pool account number as accountNo; Fineract refuses a second loan with the same one', async () => {
    const f = (fake = await startFakeFineract());
    db = openDatabase(':memory:');
    const rec = (id: string, accountNo: string) => fineractRecords(id).map((r) => (r.type === 'loan' ? { ...r, fields: { ...r.fields, accountNo } } : r));
    const first = await adapter().board(makePackage('loan_a', rec('loan_a', '1000000008')));
    expect(first.accountNumber).toBe('1000000008');
    expect(f.loans[0]!.accountNo).toBe('1000000008');
    await expect(adapter().board(makePackage('loan_b', rec('loan_b', '1000000008')))).rejects.toThrow(/accountNo/);
  });
});
