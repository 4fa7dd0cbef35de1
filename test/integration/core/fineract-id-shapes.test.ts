import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import {
  DIGEST_PREFIX,
  fineractExternalId,
  fineractExternalIdBeforePathSafe,
} from '../../../src/core/fineract/external-id.js';
import { FineractCore } from '../../../src/core/fineract/fineract-core.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { createExternalRefStore } from '../../../src/store/identity/external-refs.js';
import { refusedRequestPath, startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import { fineractRecords, makePackage } from '../../unit/core/support.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

/**
 * Platform ids of any length and shape in Fineract: one longer than externalId (VARCHAR(100)), or
 * one with `/`, `%`, `?`, `#`, spaces or non-ASCII letters (which no request path carries through
 * Tomcat and Spring), is stored as a path-safe digest, found again by it on a retry (no second
 * client or loan), found under the raw id an earlier version stored (a search, not a path), and
 * mapped back to the platform id in a listing (reconciliation).
 */
const PDF = Buffer.from('%PDF-1.4 statement\n%%EOF\n');
const LONG = (what: string): string => `urn:lender:${what}:${'x'.repeat(120)}:${what.length}`;
const WILD = {
  loan: 'loan/2026 Q1/Zürich %20 #7?x=1',
  borrower: 'business/São Paulo 50%+ & Co',
  guarantor: 'person/東京 😀 Łódź',
  doc: 'doc/statement 2026/01 %',
};

let fake: FakeFineract | undefined;
let db: Db | undefined;
const adapters: FineractCore[] = [];
const dbs: Db[] = [];

/** A Fineract adapter on the fake, with its state database (the test's, or another: a fresh install). */
function adapter(state: Db | undefined = db, approve = false): FineractCore {
  if (!fake || !state) throw new Error('start the fake first');
  const a = new FineractCore({
    clock: systemClock,
    baseUrl: fake.url,
    username: fake.username,
    password: fake.password,
    tenantId: fake.tenantId,
    officeId: 1,
    timeoutMs: 5_000,
    insecureTls: false,
    approve,
    disburse: false,
    logger: silentLogger(),
    externalRefs: createExternalRefStore(sqliteStore(state)),
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
  for (const d of dbs.splice(0)) d.close();
});

function newDb(): Db {
  const d = openDatabase(':memory:');
  dbs.push(d);
  return d;
}

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
    const pkg = makePackage(loanId, fineractRecords(loanId, { borrower, guarantor, docIds: [docId] }), [
      { id: docId, name: 'statement.pdf', bytes: PDF },
    ]);
    const receipt = await adapter().board(pkg);
    expect(f.loans).toHaveLength(1);
    expect(f.loans[0]!.externalId).toBe(fineractExternalId(loanId));
    expect(f.clients.map((c) => c.externalId).sort()).toEqual(
      [fineractExternalId(borrower), fineractExternalId(guarantor)].sort(),
    );
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
    const rec = (id: string, accountNo: string) =>
      fineractRecords(id).map((r) => (r.type === 'loan' ? { ...r, fields: { ...r.fields, accountNo } } : r));
    const first = await adapter().board(makePackage('loan_a', rec('loan_a', '1000000008')));
    expect(first.accountNumber).toBe('1000000008');
    expect(f.loans[0]!.accountNo).toBe('1000000008');
    await expect(adapter().board(makePackage('loan_b', rec('loan_b', '1000000008')))).rejects.toThrow(
      /accountNo/,
    );
  });
});

function wildPackage() {
  return makePackage(
    WILD.loan,
    fineractRecords(WILD.loan, { borrower: WILD.borrower, guarantor: WILD.guarantor, docIds: [WILD.doc] }),
    [{ id: WILD.doc, name: 'statement.pdf', bytes: PDF }],
  );
}

describe('fineractExternalId of ids of any shape', () => {
  it('keeps a path-safe id, digests one with / % ? # spaces or non-ASCII (and . or ..), deterministically', () => {
    for (const id of [
      'ln_1nh9j7qm2q',
      'urn:lender:loan:Cs567cY:6in-w.E~f',
      '3f2b0c1e-0b1a-4c2d-8e3f-0123456789ab',
    ])
      expect(fineractExternalId(id)).toBe(id);
    for (const id of [
      'a/b',
      'a%b',
      'a b',
      'a?b',
      'a#b',
      'Zürich',
      '東京',
      '😀',
      'a;b',
      'a\\b',
      '.',
      '..',
      'a+b',
      'a&b',
    ]) {
      const d = fineractExternalId(id);
      expect(d, id).toMatch(/^sha256:[A-Za-z0-9_-]{43}$/);
      expect(fineractExternalId(id)).toBe(d);
      // Before: the raw id, which a path could not carry.
      expect(fineractExternalIdBeforePathSafe(id)).toBe(id);
      expect(refusedRequestPath(`/x/${encodeURIComponent(d)}`), id).toBeNull();
    }
    expect(fineractExternalId('a/b')).not.toBe(fineractExternalId('a/c'));
    // Longer than 100 or looking like a digest: digested, as before.
    expect(fineractExternalIdBeforePathSafe('a'.repeat(101))).toBe(fineractExternalId('a'.repeat(101)));
    expect(fineractExternalId(`${DIGEST_PREFIX}abc`)).not.toBe(`${DIGEST_PREFIX}abc`);
  });
});

describe('the fake Fineract refuses what Tomcat and Spring refuse in a path', () => {
  it('an encoded slash, backslash or percent, a semicolon, raw non-ASCII and dot segments: 400 before Fineract, as HTML', async () => {
    const f = (fake = await startFakeFineract());
    const headers = {
      authorization: `Basic ${Buffer.from(`${f.username}:${f.password}`).toString('base64')}`,
      'fineract-platform-tenantid': f.tenantId,
    };
    for (const bad of ['a%2Fb', 'a%2fb', 'a%5Cb', '50%25', 'a;b', 'a%3Bb']) {
      const res = await fetch(`${f.url}/clients/external-id/${bad}`, { headers });
      expect(res.status, bad).toBe(400);
      expect(res.headers.get('content-type'), bad).toMatch(/text\/html/);
    }
    // The same characters in a query string pass (the search takes any externalId).
    const ok = await fetch(`${f.url}/clients?externalId=${encodeURIComponent('a/b 50% ü')}`, { headers });
    expect(ok.status).toBe(200);
    expect(refusedRequestPath('/loans/external-id/Z%C3%BCrich')).toBeNull();
    expect(refusedRequestPath('/loans/external-id/Zürich')).not.toBeNull();
    // A dot segment (fetch itself resolves one before sending, so it is checked here).
    expect(refusedRequestPath('/clients/external-id/%2E%2E')).not.toBeNull();
  });
});

describe('FineractCore with ids of any shape', () => {
  it('boards wild ids under digests, finds everything again on a retry and after a lost answer, and lists the platform ids', async () => {
    const f = (fake = await startFakeFineract());
    const db = newDb();
    const pkg = wildPackage();
    // The answer of the loan's create is lost after Fineract committed it: the next board finds it.
    f.inject({ method: 'POST', path: '/loans', kind: 'reset-after-commit' });
    await expect(adapter(db, true).board(pkg)).rejects.toThrow();
    expect(f.loans).toHaveLength(1);
    const receipt = await adapter(db, true).board(pkg);
    expect(f.loans).toHaveLength(1);
    expect(f.loans[0]!.externalId).toBe(fineractExternalId(WILD.loan));
    expect(f.clients.map((c) => c.externalId).sort()).toEqual(
      [fineractExternalId(WILD.borrower), fineractExternalId(WILD.guarantor)].sort(),
    );
    expect(f.guarantors).toHaveLength(1);
    expect(f.documents).toHaveLength(1);
    expect(f.documents[0]!.description).toContain(`[doc:${WILD.doc}]`);
    expect(f.requests.filter((r) => r.status === 400)).toEqual([]);

    // A restart (a new adapter, the same state database) finds everything: nothing twice.
    const again = await adapter(db, true).board(pkg);
    expect(again.coreReference).toBe(receipt.coreReference);
    expect([f.loans.length, f.clients.length, f.guarantors.length, f.documents.length]).toEqual([1, 2, 1, 1]);
    expect((await adapter(db, true).findLoan(WILD.loan))?.coreReference).toBe(receipt.coreReference);

    // Reconciliation's listing names the platform id, not the digest.
    const listed = [];
    for await (const l of adapter(db, true).listLoans()) listed.push(l.loanExternalId);
    expect(listed).toEqual([WILD.loan]);
  });

  it('finds clients and a loan an earlier version boarded under the raw id: no second record, no migration', async () => {
    const f = (fake = await startFakeFineract());
    const pkg = wildPackage();
    await adapter(newDb(), true).board(pkg);
    // What an earlier version left in Fineract: the raw ids as externalId (and no digest recorded).
    f.loans[0]!.externalId = WILD.loan;
    for (const c of f.clients)
      c.externalId = c.externalId === fineractExternalId(WILD.borrower) ? WILD.borrower : WILD.guarantor;
    const loanCore = String(f.loans[0]!.id);
    const posts = f.writes().length;

    const db = newDb();
    const receipt = await adapter(db, true).board(pkg);
    expect(receipt.coreReference).toBe(loanCore);
    expect([f.loans.length, f.clients.length, f.guarantors.length, f.documents.length]).toEqual([1, 2, 1, 1]);
    expect(f.writes().length).toBe(posts);
    // The raw id was looked up with the search (a query), never in a path Tomcat refuses.
    expect(f.requests.filter((r) => r.status === 400)).toEqual([]);
    expect(f.requests.some((r) => r.method === 'GET' && r.path === '/loans')).toBe(true);
    expect((await adapter(db, true).findLoan(WILD.loan))?.coreReference).toBe(loanCore);
    const listed = [];
    for await (const l of adapter(db, true).listLoans()) listed.push(l.loanExternalId);
    expect(listed).toEqual([WILD.loan]);
  });

  it("finds an earlier version's client behind other records Fineract's LIKE search also matches (% and _ are wildcards there): no second client (regression: a 2-row search page hid it)", async () => {
    const f = (fake = await startFakeFineract());
    const pkg = wildPackage();
    await adapter(newDb(), true).board(pkg);
    f.loans[0]!.externalId = WILD.loan;
    for (const c of f.clients)
      c.externalId = c.externalId === fineractExternalId(WILD.borrower) ? WILD.borrower : WILD.guarantor;
    // Three other customers whose externalIds the pattern 'business/São Paulo 50%+ & Co' matches,
    // listed before the real one.
    for (const x of [
      'business/São Paulo 50X+ & Co',
      'business/São Paulo 50 east+ & Co',
      'BUSINESS/SÃO PAULO 50%+ & CO',
    ])
      f.seedClient({ fullname: x, externalId: x });
    f.clients.unshift(...f.clients.splice(-3));
    const clientsBefore = f.clients.length;
    const posts = f.writes().length;
    const receipt = await adapter(newDb(), true).board(pkg);
    expect(receipt.coreReference).toBe(String(f.loans[0]!.id));
    expect(f.clients.length).toBe(clientsBefore);
    expect(f.writes().length).toBe(posts);
  });

  it('a loan of an earlier version with a path-safe id is found with one look-up, as before', async () => {
    const f = (fake = await startFakeFineract());
    const pkg = makePackage('ln_plain', fineractRecords('ln_plain'));
    await adapter(newDb(), true).board(pkg);
    const before = f.requests.length;
    expect((await adapter(newDb(), true).findLoan('ln_plain'))?.coreReference).toBe(String(f.loans[0]!.id));
    expect(f.requests.slice(before).map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /loans/external-id/ln_plain',
    ]);
  });
});
