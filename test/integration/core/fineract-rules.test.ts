import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from '../../../src/lib/clock.js';
import { request } from 'undici';
import { FineractCore, type FineractCoreOptions } from '../../../src/core/fineract/fineract-core.js';
import { CoreRejectedError, CoreUnavailableError } from '../../../src/core/port.js';
import { FatalError } from '../../../src/lib/errors.js';
import { silentLogger } from '../../../src/lib/logger.js';
import {
  startFakeFineract,
  type FakeFineract,
  type FakeFineractOptions,
} from '../../support/fake-fineract.js';
import { fineractRecords, makePackage } from '../../unit/core/support.js';

/**
 * Apache Fineract's server-side rules (../shared/domain-notes.md), held by the fake and met by
 * the adapter. Each adapter test failed against the adapter as it was before these rules.
 */
const PDF = Buffer.from('%PDF-1.4 statement\n%%EOF\n');
const UUID_LOAN = '0b6f3c2e-7f3a-4d6b-9c1e-2a5d8e9f0a1b';
let fake: FakeFineract;
const adapters: FineractCore[] = [];

async function start(opts: FakeFineractOptions = {}): Promise<FakeFineract> {
  fake = await startFakeFineract(opts);
  return fake;
}

function adapter(o: Partial<FineractCoreOptions> = {}): FineractCore {
  const a = new FineractCore({
    clock: systemClock,
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
    ...o,
  });
  adapters.push(a);
  return a;
}

/** POST straight to the fake (rules of the fake itself). */
async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await request(`${fake.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${fake.username}:${fake.password}`).toString('base64')}`,
      'fineract-platform-tenantid': fake.tenantId,
      'content-type': 'application/json',
      ...headers,
    },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : text,
    cached: res.headers['x-served-from-cache'] === 'true',
  };
}

const codes = (b: unknown): string[] => {
  const o = b as {
    userMessageGlobalisationCode?: string;
    errors?: Array<{ userMessageGlobalisationCode?: string }>;
  };
  return [
    o.userMessageGlobalisationCode,
    ...(o.errors ?? []).map((e) => e.userMessageGlobalisationCode),
  ].filter((c): c is string => typeof c === 'string');
};

afterEach(async () => {
  for (const a of adapters.splice(0)) await a.close();
  await fake?.close();
});

describe('the fake Fineract is as strict as the real one', () => {
  it('an Idempotency-Key over 50 characters fails before the command runs (VARCHAR(50)), 403', async () => {
    await start();
    const r = await post(
      '/clients',
      { legalFormId: 1, firstname: 'A', lastname: 'B', officeId: 1, active: false },
      { 'idempotency-key': 'k'.repeat(51) },
    );
    expect(r.status).toBe(403);
    expect(codes(r.body)).toContain('error.msg.unknown.data.integrity.issue');
    expect(fake.clients).toHaveLength(0);
  });

  it('keys are scoped by action, not URL; failures are stored and replayed; uploads ignore keys', async () => {
    await start();
    const first = await post(
      '/clients',
      { legalFormId: 1, firstname: 'A', lastname: 'B', officeId: 9, active: false },
      { 'idempotency-key': 'same' },
    );
    expect(first.status).toBe(404); // office 9
    const again = await post(
      '/clients',
      { legalFormId: 1, firstname: 'A', lastname: 'B', officeId: 1, active: false },
      { 'idempotency-key': 'same' },
    );
    expect(again).toMatchObject({ status: 404, cached: true });
    expect(fake.clients).toHaveLength(0);
    // Another action under the same key is its own command.
    const other = await post('/loans', {}, { 'idempotency-key': 'same' });
    expect(other).toMatchObject({ status: 400, cached: false });
  });

  it('legalFormId is required; names have Fineract lengths; unsupported parameters are refused on commands', async () => {
    await start();
    const r = await post('/clients', {
      firstname: 'A',
      lastname: 'B'.repeat(51),
      officeId: 1,
      active: false,
    });
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('legalFormId');
    expect(JSON.stringify(r.body)).toContain('lastname');
    const c = await post('/clients', {
      legalFormId: 1,
      firstname: 'A',
      lastname: 'B',
      officeId: 1,
      active: false,
    });
    const clientId = (c.body as { clientId: number }).clientId;
    const loan = fineractRecords('l1').find((x) => x.type === 'loan')!.fields;
    const { clientExternalId: _ref, ...loanBody } = loan;
    fake.clients[0]!.active = true;
    const l = await post('/loans', { ...loanBody, clientId, externalId: 'l1' });
    expect(l.status).toBe(200);
    const loanId = (l.body as { loanId: number }).loanId;
    const bad = await post(`/loans/${loanId}?command=approve`, {
      approvedOnDate: '2025-03-14',
      dateFormat: 'yyyy-MM-dd',
      locale: 'en',
      approvedBy: 'me',
    });
    expect(bad.status).toBe(400);
    expect(codes(bad.body)).toContain('error.msg.parameter.unsupported');
    const ok = await post(`/loans/${loanId}?command=approve`, {
      approvedOnDate: '2025-03-14',
      dateFormat: 'yyyy-MM-dd',
      locale: 'en',
    });
    expect(ok.status).toBe(200);
    // A command in the wrong loan state is a 400.
    const twice = await post(`/loans/${loanId}?command=approve`, {
      approvedOnDate: '2025-03-14',
      dateFormat: 'yyyy-MM-dd',
      locale: 'en',
    });
    expect(twice.status).toBe(400);
    // Duplicate loan external id: the real pre-check code under the generic domain-rule code.
    const dup = await post('/loans', { ...loanBody, clientId, externalId: 'l1' });
    expect(dup.status).toBe(403);
    expect(codes(dup.body)).toEqual([
      'validation.msg.domain.rule.violation',
      'error.msg.loan.with.externalId.already.used',
    ]);
  });

  it('grace on principal must be less than the number of repayments; principal fits DECIMAL(19,6)', async () => {
    await start();
    const a = adapter();
    const grace = fineractRecords('l1');
    grace.find((r) => r.type === 'loan')!.fields['graceOnPrincipalPayment'] = 60;
    const e1 = await a.board(makePackage('l1', grace)).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(CoreRejectedError);
    expect((e1 as Error).message).toMatch(/graceOnPrincipalPayment.*less than numberOfRepayments/);
    const big = fineractRecords('l2');
    big.find((r) => r.type === 'loan')!.fields['principal'] = '10000000000000.00';
    const e2 = await a.board(makePackage('l2', big)).catch((e: unknown) => e);
    expect(e2).toMatchObject({ name: 'CoreRejectedError', status: 403 });
    expect(fake.loans).toHaveLength(0);
  });

  it('documents: whitelist with content type, and the 5 MiB cap (403 error.msg.document.save)', async () => {
    await start({ documentMaxBytes: 64 });
    const a = adapter({ documents: { maxBytes: 1_000_000, refused: 'skip', refusedByType: {} } });
    // The adapter's own cap is larger than this fake's: the core's 403 surfaces.
    const pkg = makePackage('l1', fineractRecords('l1', { docIds: ['d1'] }), [
      { id: 'd1', name: 'big.pdf', bytes: Buffer.alloc(100, 0x41) },
    ]);
    const err = await a.board(pkg).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'CoreRejectedError', status: 403 });
    expect(codes((err as CoreRejectedError).detail)).toContain('error.msg.document.save');
  });
});

describe('the Fineract adapter meets those rules', () => {
  it('keys stay within 50 characters with UUID ids, for every command, and are stable across retries', async () => {
    await start();
    const pkg = () =>
      makePackage(
        UUID_LOAN,
        fineractRecords(UUID_LOAN, { borrower: `biz-${UUID_LOAN}`, guarantor: `per-${UUID_LOAN}` }),
      );
    await adapter({ approve: true, disburse: true }).board(pkg());
    expect(fake.loans[0]!.statusId).toBe(300);
    expect(fake.guarantors).toHaveLength(1);
    const keys = fake
      .writes()
      .map((w) => w.idempotencyKey)
      .filter((k): k is string => k !== null);
    expect(keys).toHaveLength(6);
    for (const k of keys) expect(k.length).toBeLessThanOrEqual(50);
  });

  it('a failure Fineract stored under a key is not replayed for ever: the retry goes under the next key', async () => {
    await start();
    fake.inject({ method: 'POST', path: '/loans', kind: 'fail-in-command', status: 500 });
    const a = adapter();
    await expect(a.board(makePackage('l1', fineractRecords('l1')))).rejects.toBeInstanceOf(
      CoreUnavailableError,
    );
    expect(fake.loans).toHaveLength(0);
    await a.board(makePackage('l1', fineractRecords('l1')));
    expect(fake.loans).toHaveLength(1);
    const loanPosts = fake.writes('/loans');
    expect(loanPosts.map((w) => [w.status, w.fromCache])).toEqual([
      [500, false],
      [500, true],
      [200, false],
    ]);
    expect(loanPosts[2]!.idempotencyKey).not.toBe(loanPosts[0]!.idempotencyKey);
  });

  it('425 (the same key in flight) is "retry later", never a quarantine', async () => {
    await start();
    fake.inject({ method: 'POST', path: '/loans', kind: 'delay', delayMs: 400 });
    const [a, b] = [adapter(), adapter()];
    const pkg = () => makePackage('l1', fineractRecords('l1'));
    const first = a.board(pkg());
    // The second adapter sends the same key while the delay fault holds the first request.
    await vi.waitFor(() => expect(fake.keysInFlight(), 'the first POST /loans held').toBe(1), {
      timeout: 5000,
      interval: 5,
    });
    const results = await Promise.allSettled([first, b.board(pkg())]);
    expect(results[0].status).toBe('fulfilled');
    expect(results[1].status).toBe('rejected');
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(CoreUnavailableError);
    expect(fake.requests.some((r) => r.status === 425)).toBe(true);
    await b.board(pkg());
    expect(fake.loans).toHaveLength(1);
  });

  it("a loan created by someone else meanwhile: Fineract's duplicate code leads to the existing loan", async () => {
    await start({ idempotencyReplay: false });
    fake.inject({ method: 'POST', path: '/loans', kind: 'delay', delayMs: 300, times: 2 });
    const [a, b] = [adapter(), adapter()];
    const pkg = () => makePackage('l1', fineractRecords('l1'));
    const [ra, rb] = await Promise.all([a.board(pkg()), b.board(pkg())]);
    expect(ra.coreReference).toBe(rb.coreReference);
    expect(fake.loans).toHaveLength(1);
    expect(fake.requests.some((r) => r.path === '/loans' && r.status === 403)).toBe(true);
  });

  it('an unknown tenant (400, plain text) and a missing permission (403) stop the connector as fatal', async () => {
    await start({ deniedPermissions: ['CREATE_LOAN'] });
    await expect(
      adapter({ tenantId: 'other' }).board(makePackage('l1', fineractRecords('l1'))),
    ).rejects.toThrow(FatalError);
    const err = await adapter()
      .board(makePackage('l1', fineractRecords('l1')))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FatalError);
    expect((err as Error).message).toContain('CREATE_LOAN');
  });

  it('creates client identifiers (tax ids) once', async () => {
    await start();
    const records = fineractRecords('l1');
    records.splice(2, 0, {
      type: 'identifier',
      externalId: 'biz_l1:tin',
      fields: { clientExternalId: 'biz_l1', documentTypeId: 2, documentKey: '123456789', description: 'EIN' },
    });
    const a = adapter();
    await a.board(makePackage('l1', records));
    await a.board(makePackage('l1', records));
    expect(fake.identifiers).toEqual([
      expect.objectContaining({ clientId: fake.clients[0]!.id, documentTypeId: 2, documentKey: '123456789' }),
    ]);
  });

  it('documents Fineract would refuse follow the bank policy, decided before anything is written', async () => {
    await start();
    const docs = [
      { id: 'd_pdf', name: 'statement', bytes: PDF },
      { id: 'd_txt', name: 'notes.txt', bytes: Buffer.from('plain text') },
    ];
    const pkg = (id: string) => {
      const p = makePackage(id, fineractRecords(id, { docIds: docs.map((d) => d.id) }), docs);
      p.documents[1] = { ...p.documents[1]!, type: 'text/plain' };
      return p;
    };
    const skipping = await adapter().board(pkg('l1'));
    expect(fake.documents.map((d) => d.fileName)).toEqual(['statement.pdf']);
    expect(skipping.warnings).toEqual([expect.stringContaining('d_txt is text/plain')]);
    expect(fake.writes().filter((r) => r.status >= 400)).toHaveLength(0);

    const writesBefore = fake.writes().length;
    const strict = adapter({
      documents: { maxBytes: 5 * 1024 * 1024, refused: 'skip', refusedByType: { txt: 'quarantine' } },
    });
    await expect(strict.board(pkg('l2'))).rejects.toThrow(/d_txt is text\/plain.*quarantine/);
    expect(fake.writes().length).toBe(writesBefore);

    const capped = adapter({ documents: { maxBytes: 10, refused: 'skip', refusedByType: {} } });
    const r = await capped.board(makePackage('l3', fineractRecords('l3', { docIds: ['d_pdf'] }), [docs[0]!]));
    expect(r.warnings).toEqual([expect.stringContaining("over Fineract's upload cap of 10")]);
  });

  it('product settings are read once per product and a mismatch is refused with what to configure', async () => {
    await start({
      productSettings: {
        2: { name: 'Floating SBA', isFloatingInterestRate: true },
        3: { name: 'Small', maxPrincipal: 1000 },
      },
    });
    const a = adapter();
    const withProduct = (id: string, productId: number) => {
      const r = fineractRecords(id);
      r.find((x) => x.type === 'loan')!.fields['productId'] = productId;
      return makePackage(id, r);
    };
    await expect(a.board(withProduct('l1', 2))).rejects.toThrow(
      /product 2 \(Floating SBA\) is linked to floating interest rates/,
    );
    await expect(a.board(withProduct('l2', 3))).rejects.toThrow(
      /outside Fineract product 3 \(Small\) limits 0–1000/,
    );
    await a.board(withProduct('l3', 1));
    await a.board(withProduct('l4', 1));
    expect(fake.requests.filter((r) => r.path === '/loanproducts/1')).toHaveLength(1);
    expect(fake.loans.map((l) => l.externalId)).toEqual(['l3', 'l4']);
  });

  it('guarantors are added before approval; an approval after the business date is refused with the reason', async () => {
    // Clients are activated and the loan submitted on 2025-03-14, before the business date (Fineract
    // refuses both in its future); the approval the mapping dates later is after it.
    await start({ businessDate: '2025-03-20' });
    const records = fineractRecords('l1');
    records.find((r) => r.type === 'loan')!.fields['approvedOnDate'] = '2025-03-25';
    const err = await adapter({ approve: true })
      .board(makePackage('l1', records))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CoreRejectedError);
    expect((err as Error).message).toMatch(/approvedOnDate.*after the business date 2025-03-20/);
    const order = fake.writes().map((w) => w.path.replace(/\d+/g, 'N'));
    expect(order).toContain('/loans/N/guarantors');
    expect(order.indexOf('/loans/N/guarantors')).toBeLessThan(order.indexOf('/loans/N'));
  });
});
