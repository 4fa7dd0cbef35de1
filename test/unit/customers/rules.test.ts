import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  createCustomerResolver,
  CustomerAmbiguousError,
  CustomerWaitError,
} from '../../../src/identity/customer-match.js';
import { CustomerExtract, DEFAULT_EXTRACT_LAYOUT } from '../../../src/core/file/customer-extract.js';
import { parseCsvLine } from '../../../src/lib/csv.js';
import {
  CustomerSourceUnavailableError,
  type CustomerDirectory,
  type ExistingCustomer,
} from '../../../src/core/port.js';
import { CustomerKeys, normaliseName, normaliseTin } from '../../../src/lib/customer-keys.js';
import { silentLogger, type Logger } from '../../../src/lib/logger.js';
import type { Entities } from '../../../src/contract/schemas.js';
import { createBoardingStore, type BoardingStore } from '../../../src/store/index.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';
import { FakeClock } from '../../support/fake-clock.js';
import { customerSourceCheck } from '../../../src/observability/readiness.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';
import { countStatements } from '../../support/count-statements.js';

const keys = new CustomerKeys('unit-test-key-0123456789');

describe('tax id normalisation', () => {
  it.each([
    ['12-3456789', '123456789'],
    ['123456789', '123456789'],
    [' 12 3456789 ', '123456789'],
    ['123-45-6789', '123456789'],
    ['12345678', '012345678'], // an EIN whose leading zero a spreadsheet dropped
    ['1234567', '001234567'],
    [123456789, '123456789'],
  ])('%s → %s', (raw, want) => {
    expect(normaliseTin(raw)).toBe(want);
  });

  it.each([
    ['*****6789'],
    ['XXXXX6789'],
    [''],
    ['12345'],
    ['1234567890'],
    ['000000000'],
    [null],
    [undefined],
  ])('%s never matches', (raw) => {
    expect(normaliseTin(raw)).toBeNull();
    expect(keys.tinHash(raw)).toBeNull();
  });

  it('hashes the same tax id the same whatever its form, and never contains it', () => {
    const h = keys.tinHash('12-3456789');
    expect(h).toBe(keys.tinHash('123456789'));
    expect(h).not.toContain('3456789');
    expect(new CustomerKeys('another-key-0123456789').tinHash('123456789')).not.toBe(h);
  });
});

describe('name normalisation', () => {
  it.each([
    ['ACME LLC', 'Acme, L.L.C.'],
    ['Acme Inc.', 'ACME INC'],
    ['Café Olé  Corp.', 'cafe ole corp'],
    ['Smith & Sons', 'Smith and Sons'],
    ['Acme Incorporated', 'Acme, Inc.'],
    ['  acme bakery llc ', 'Acme Bakery LLC'],
  ])('%s agrees with %s', (a, b) => {
    expect(normaliseName(a)).toBe(normaliseName(b));
  });

  it.each([
    ['Acme Tools LLC', 'Acme LLC'],
    ['Acme LLC', 'Acme LLP'],
  ])('%s does not agree with %s', (a, b) => {
    expect(normaliseName(a)).not.toBe(normaliseName(b));
  });
});

function logger(lines: string[]): Logger {
  const l = silentLogger();
  const capture = (obj: unknown, msg?: string) => {
    lines.push(typeof obj === 'string' ? obj : `${msg ?? ''} ${JSON.stringify(obj)}`);
  };
  return Object.assign(Object.create(l) as Logger, {
    warn: capture,
    info: () => undefined,
    child: () => logger(lines),
  });
}

describe('customer extract', () => {
  const dir = mkdtempSync(join(tmpdir(), 'extract-'));
  const clock = new FakeClock({ start: Date.now() });
  const extract = (name: string, text: string | null, lines: string[] = [], maxAgeHours = 36) => {
    const path = join(dir, name);
    if (text !== null) writeFileSync(path, text);
    return new CustomerExtract({
      path,
      maxAgeHours,
      layout: DEFAULT_EXTRACT_LAYOUT,
      keys,
      clock,
      logger: logger(lines),
    });
  };
  const q = (tin: string, name = 'Acme LLC') => ({
    tin: normaliseTin(tin)!,
    tinType: 'EIN' as const,
    tinHash: keys.tinHash(tin)!,
    name,
  });

  it('finds a customer by its tax id in any form, and says whether the name agrees', async () => {
    const x = extract(
      'a.csv',
      'cif,tin,name,birth_or_formation_date\n80000001,12-3456789,"ACME, L.L.C.",2019-01-02\n80000002,987654321,Other Co,\n',
    );
    expect(await x.findByTin(q('123456789'))).toEqual([{ cif: '80000001', nameAgrees: true }]);
    expect(await x.findByTin(q('123456789', 'Acme Tools LLC'))).toEqual([
      { cif: '80000001', nameAgrees: false },
    ]);
    expect(await x.findByTin(q('111111111'))).toEqual([]);
    expect(x.status()).toMatchObject({ ok: true });
  });

  it('reports a malformed line with file:line, skips it and reads the rest', async () => {
    const lines: string[] = [];
    const x = extract(
      'b.csv',
      'cif,tin,name\n80000001,*****6789,Masked\n,123456789,No Cif\n80000003,12345,Short\n"80000004,"bad quote\n80000005,223456789,Good\n',
      lines,
    );
    expect(await x.findByTin(q('223456789', 'Good'))).toEqual([{ cif: '80000005', nameAgrees: true }]);
    const path = join(dir, 'b.csv');
    expect(lines.some((l) => l.includes(`${path}:2`) && l.includes('masked or malformed'))).toBe(true);
    expect(lines.some((l) => l.includes(`${path}:3`) && l.includes('no CIF'))).toBe(true);
    expect(lines.some((l) => l.includes(`${path}:4`))).toBe(true);
    expect(lines.join('\n')).not.toContain('223456789');
    expect(x.status().detail).toMatch(/malformed line/);
  });

  it('a missing extract makes the loan wait, never "no customer"', async () => {
    const x = extract('missing.csv', null);
    await expect(x.findByTin(q('123456789'))).rejects.toMatchObject({
      name: 'CustomerSourceUnavailableError',
      code: 'customers.extract_missing',
    });
    expect(x.status().ok).toBe(false);
    // /readyz says why loans wait (the receiver stays in rotation).
    const ready = await customerSourceCheck(() => x.status())();
    expect(ready.detail).toMatch(/^loans wait for customer match: .*missing\.csv: no such file/);
  });

  it('a stale extract (older than maxAgeHours) makes the loan wait', async () => {
    const x = extract('stale.csv', 'cif,tin,name\n80000001,123456789,Acme LLC\n', [], 36);
    const old = (clock.now() - 40 * 3_600_000) / 1000;
    utimesSync(join(dir, 'stale.csv'), old, old);
    await expect(x.findByTin(q('123456789'))).rejects.toMatchObject({ code: 'customers.extract_stale' });
  });

  it('an extract without the declared columns is unreadable: loans wait', async () => {
    const x = extract('cols.csv', 'customer,taxid\n1,123456789\n');
    await expect(x.findByTin(q('123456789'))).rejects.toMatchObject({ code: 'customers.extract_unreadable' });
    expect(x.status().detail).toMatch(/no column "cif"/);
  });

  it('is re-read when the bank drops a new one', async () => {
    const x = extract('c.csv', 'cif,tin,name\n80000001,123456789,Acme LLC\n');
    expect(await x.findByTin(q('323456789'))).toEqual([]);
    writeFileSync(
      join(dir, 'c.csv'),
      'cif,tin,name\n80000001,123456789,Acme LLC\n80000009,323456789,New Co\n',
    );
    const t = (clock.now() + 5_000) / 1000;
    utimesSync(join(dir, 'c.csv'), t, t);
    expect(await x.findByTin(q('323456789', 'New Co'))).toEqual([{ cif: '80000009', nameAgrees: true }]);
  });

  it('two CIFs for one tax id come back as two customers', async () => {
    const x = extract('d.csv', 'cif,tin,name\n80000001,123456789,Acme LLC\n80000002,12-3456789,Acme LLC\n');
    expect((await x.findByTin(q('123456789'))).map((c) => c.cif)).toEqual(['80000001', '80000002']);
  });
});

/** A core directory answering from a table (or failing). */
function directory(
  table: Record<string, ExistingCustomer[]>,
  fail = false,
): CustomerDirectory & { calls: number } {
  const d = {
    calls: 0,
    findByTin(qq: { tin: string }) {
      d.calls += 1;
      if (fail)
        return Promise.reject(new CustomerSourceUnavailableError('customers.search_failed', 'search failed'));
      return Promise.resolve(table[qq.tin] ?? []);
    },
    status: () => ({ ok: !fail, detail: 'test' }),
  };
  return d;
}

function entities(...parties: Array<{ id: string; ein?: string; ssn?: string; name?: string }>): Entities {
  return {
    businesses: parties
      .filter((p) => p.ein !== undefined)
      .map((p) => ({ id: p.id, name: p.name ?? 'Acme LLC', ein: p.ein, role: 'borrower' })),
    people: parties
      .filter((p) => p.ssn !== undefined)
      .map((p) => ({ id: p.id, firstName: 'Ann', lastName: 'Lee', ssn: p.ssn, role: 'guarantor' })),
  };
}

describe.each(STORE_ENGINES)('customer resolver: the rules, on %s', (engine) => {
  const open = testStores(engine);
  const setup = async (
    dir: CustomerDirectory | undefined,
    o: { onAmbiguous?: 'quarantine' | 'create'; allowLast4Tin?: boolean; coreAssigns?: boolean } = {},
  ) => {
    const store: BoardingStore = createBoardingStore((await open()).db);
    const clock = new FakeClock();
    let n = 100;
    const r = createCustomerResolver({
      store,
      directory: dir,
      keys,
      newCif: () => Promise.resolve(o.coreAssigns === true ? null : String((n += 1))),
      onAmbiguous: o.onAmbiguous ?? 'quarantine',
      allowLast4Tin: o.allowLast4Tin ?? false,
      clock,
      logger: silentLogger(),
    });
    const loan = async (id: string, state: 'fetched' | 'quarantined' | 'written' = 'fetched') => {
      await store.loans.insert({ id, state: 'queued' }, clock.now());
      await store.loans.transition(id, { to: 'fetched', expectedFrom: 'queued' }, clock.now());
      if (state === 'quarantined')
        await store.loans.transition(
          id,
          { to: 'quarantined', expectedFrom: 'fetched', patch: { quarantineReason: 'mapping' } },
          clock.now(),
        );
    };
    const written = async (id: string) => {
      await store.loans.transition(
        id,
        { to: 'mapped', expectedFrom: 'fetched', patch: { coreWriteStartedAt: clock.now() } },
        clock.now(),
      );
      await store.loans.transition(
        id,
        {
          to: 'written',
          expectedFrom: 'mapped',
          patch: { writtenAt: clock.now(), coreReference: 'x' },
          also: () => r.afterWrite(id, null),
        },
        clock.now(),
      );
    };
    return { store, r, loan, written };
  };

  it.skipIf(engineSkipped(engine))(
    'new TIN: created with a pool CIF; the same TIN under another entity id on a later loan: matched by tin, existing',
    async () => {
      const { r, loan, written, store } = await setup(directory({}));
      await loan('L1');
      const a = await r.resolve('L1', entities({ id: 'biz_1', ein: '12-3456789' }));
      expect(a.customers['biz_1']).toEqual({ cif: '101', matchedBy: 'created', existing: false });
      await written('L1');
      await loan('L2');
      const b = await r.resolve('L2', entities({ id: 'biz_NEW', ein: '123456789', name: 'ACME, L.L.C.' }));
      expect(b.customers['biz_NEW']).toEqual({ cif: '101', matchedBy: 'tin', existing: true });
      await loan('L3');
      const c = await r.resolve('L3', entities({ id: 'biz_1', ein: '123456789' }));
      expect(c.customers['biz_1']).toEqual({ cif: '101', matchedBy: 'crossref', existing: true });
      expect((await store.customers.list({})).map((x) => [x.entityId, x.cif, x.matchedBy])).toEqual([
        ['biz_1', '101', 'created'],
        ['biz_NEW', '101', 'tin'],
      ]);
    },
  );

  it.skipIf(engineSkipped(engine))(
    "the core's customer: matched by tin; a name that disagrees is a review item",
    async () => {
      const { r, loan } = await setup(directory({ '123456789': [{ cif: '80000001', nameAgrees: false }] }));
      await loan('L1');
      const a = await r.resolve('L1', entities({ id: 'biz_1', ein: '123456789', name: 'Acme Tools LLC' }));
      expect(a.customers['biz_1']).toEqual({ cif: '80000001', matchedBy: 'tin', existing: true });
      expect(a.reviews).toHaveLength(1);
      expect(a.reviews[0]!.message).toMatch(/another name/);
      expect(a.reviews[0]!.message).not.toContain('123456789');
    },
  );

  it.skipIf(engineSkipped(engine))(
    'two CIFs for one TIN: customer_match_ambiguous, or a new customer with customers.onAmbiguous: create',
    async () => {
      const table = {
        '123456789': [
          { cif: 'A1', nameAgrees: true },
          { cif: 'A2', nameAgrees: true },
        ],
      };
      const q = await setup(directory(table));
      await q.loan('L1');
      await expect(q.r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }))).rejects.toBeInstanceOf(
        CustomerAmbiguousError,
      );
      const c = await setup(directory(table), { onAmbiguous: 'create' });
      await c.loan('L1');
      const res = await c.r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }));
      expect(res.customers['biz_1']).toMatchObject({ matchedBy: 'created', existing: false });
      expect(res.reviews[0]!.message).toMatch(/onAmbiguous: create/);
    },
  );

  it.skipIf(engineSkipped(engine))(
    'regression: a customer an earlier loan created, whose number the core assigns, found twice in the core later: ambiguous, not the first one',
    async () => {
      const table: Record<string, ExistingCustomer[]> = {};
      const { r, loan, written } = await setup(directory(table), { coreAssigns: true });
      await loan('L1');
      expect(
        (await r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }))).customers['biz_1'],
      ).toMatchObject({ cif: null, matchedBy: 'created' });
      await written('L1');
      // Someone created a second client with the tax id in the core meanwhile.
      table['123456789'] = [
        { cif: 'C7', nameAgrees: true },
        { cif: 'C9', nameAgrees: true },
      ];
      await loan('L2');
      await expect(r.resolve('L2', entities({ id: 'biz_2', ein: '123456789' }))).rejects.toBeInstanceOf(
        CustomerAmbiguousError,
      );
    },
  );

  it.skipIf(engineSkipped(engine))(
    'a masked TIN matches nothing (and without allowLast4Tin is left to the mapping: tin_incomplete)',
    async () => {
      const d = directory({});
      const { r, loan } = await setup(d);
      await loan('L1');
      const a = await r.resolve('L1', entities({ id: 'biz_1', ein: '*****6789' }));
      expect(a.customers).toEqual({});
      expect(d.calls).toBe(0);
      const w = await setup(d, { allowLast4Tin: true });
      await w.loan('L1');
      expect(
        (await w.r.resolve('L1', entities({ id: 'biz_1', ein: '*****6789' }))).customers['biz_1'],
      ).toMatchObject({ matchedBy: 'created', existing: false });
      expect(d.calls).toBe(0);
    },
  );

  it.skipIf(engineSkipped(engine))(
    'a source that cannot answer makes the loan wait and claims nothing',
    async () => {
      const { r, loan, store } = await setup(directory({}, true));
      await loan('L1');
      await expect(r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }))).rejects.toBeInstanceOf(
        CustomerSourceUnavailableError,
      );
      expect(await store.customers.byTin(keys.tinHash('123456789')!)).toBeUndefined();
    },
  );

  it.skipIf(engineSkipped(engine))(
    'a second loan waits while the first one, whose write may have happened, creates the customer',
    async () => {
      const { r, loan, written } = await setup(directory({}));
      await loan('L1');
      await r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }));
      await loan('L2');
      await expect(r.resolve('L2', entities({ id: 'biz_2', ein: '123456789' }))).rejects.toBeInstanceOf(
        CustomerWaitError,
      );
      await written('L1');
      expect((await r.resolve('L2', entities({ id: 'biz_2', ein: '123456789' }))).customers['biz_2']).toEqual(
        { cif: '101', matchedBy: 'tin', existing: true },
      );
    },
  );

  it.skipIf(engineSkipped(engine))(
    'a loan whose creator was quarantined before writing creates the customer itself (same CIF)',
    async () => {
      const { r, loan, store } = await setup(directory({}));
      await loan('L1');
      await r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }));
      await store.loans.transition(
        'L1',
        { to: 'quarantined', expectedFrom: 'fetched', patch: { quarantineReason: 'mapping' } },
        Date.now(),
      );
      await loan('L2');
      const b = await r.resolve('L2', entities({ id: 'biz_2', ein: '123456789' }));
      expect(b.customers['biz_2']).toEqual({ cif: '101', matchedBy: 'created', existing: false });
      expect((await store.customers.byTin(keys.tinHash('123456789')!))?.creatorLoanId).toBe('L2');
    },
  );

  it.skipIf(engineSkipped(engine))(
    'the same TIN twice on one loan: one customer record, the second references it',
    async () => {
      const { r, loan } = await setup(directory({}));
      await loan('L1');
      const a = await r.resolve(
        'L1',
        entities({ id: 'biz_1', ein: '123456789' }, { id: 'per_1', ssn: '123-45-6789' }),
      );
      expect(a.customers['biz_1']).toMatchObject({ existing: false, cif: '101' });
      expect(a.customers['per_1']).toMatchObject({ existing: true, cif: '101' });
    },
  );

  it.skipIf(engineSkipped(engine))(
    'a retry of the creating loan still creates (idempotent in the core), with the same CIF',
    async () => {
      const { r, loan } = await setup(directory({}));
      await loan('L1');
      await r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }));
      expect((await r.resolve('L1', entities({ id: 'biz_1', ein: '123456789' }))).customers['biz_1']).toEqual(
        { cif: '101', matchedBy: 'created', existing: false },
      );
    },
  );
});

describe('extract lines', () => {
  it.each([
    ['a,b,c', ['a', 'b', 'c']],
    ['"Acme, L.L.C.",b', ['Acme, L.L.C.', 'b']],
    ['"say ""hi""",x', ['say "hi"', 'x']],
    ['a,,', ['a', '', '']],
    ['"a"', ['a']],
  ])('%s', (line, want) => {
    expect(parseCsvLine(line, ',')).toEqual(want);
  });
  it.each([['"open,b'], ['"a"b,c'], ['a"b,c']])('%s is not CSV', (line) => {
    expect(typeof parseCsvLine(line, ',')).toBe('string');
  });
});

describe('what customer matching costs the state database (issue 44 item 5)', () => {
  it('a new loan with three parties: two look-ups and one statement per table; a repeat borrower writes only its loan rows', async () => {
    const sqlite = openDatabase(':memory:');
    const store = createBoardingStore(sqliteStore(sqlite));
    const clock = new FakeClock();
    let n = 100;
    const r = createCustomerResolver({
      store,
      directory: undefined,
      keys,
      newCif: () => Promise.resolve(String((n += 1))),
      onAmbiguous: 'quarantine',
      allowLast4Tin: false,
      clock,
      logger: silentLogger(),
    });
    const parties = entities(
      { id: 'biz_1', ein: '12-3456789' },
      { id: 'p_1', ssn: '234-56-7890' },
      { id: 'p_2', ssn: '987-65-4321' },
    );
    const counter = countStatements(sqlite);
    const body = (): string[] => counter.seen.filter((q) => !/^(BEGIN|COMMIT)/.test(q));
    try {
      const first = await r.resolve('L1', parties);
      expect(Object.values(first.customers).map((c) => c.matchedBy)).toEqual([
        'created',
        'created',
        'created',
      ]);
      // xref look-up, tax-id look-up, the claims, the cross-references, the loan's rows: no savepoint.
      expect(body(), body().join('\n')).toHaveLength(5);
      counter.reset();
      await store.write(() => r.afterWrite('L1', null));
      expect(body(), body().join('\n')).toHaveLength(1);
      counter.reset();
      const again = await r.resolve('L2', parties);
      expect(again.customers['p_1']).toEqual({ cif: '102', matchedBy: 'crossref', existing: true });
      // The repeat borrower: the two look-ups and its loan's rows; the cross-references are unchanged.
      expect(body(), body().join('\n')).toHaveLength(3);
      expect(
        body().filter(
          (q) => /customer_xref|INSERT INTO customers|UPDATE customers/.test(q) && !/^SELECT/.test(q),
        ),
      ).toEqual([]);
    } finally {
      counter.stop();
    }
    // The cross-reference still names the loan that resolved it last.
    expect((await store.customers.find('p_1')).map((x) => [x.firstLoanId, x.lastLoanId])).toEqual([
      ['L1', 'L2'],
    ]);
    expect((await store.customers.forLoan('L2')).map((x) => x.cif)).toEqual(['101', '102', '103']);
    sqlite.close();
  });
});
