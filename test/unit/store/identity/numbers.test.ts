import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { hasValidCheckDigit } from '../../../../src/lib/check-digit.js';
import { FatalError } from '../../../../src/lib/errors.js';
import { openDatabase } from '../../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../../src/store/index.js';
import { openStore } from '../../../../src/store/open.js';
import type { StoreDb } from '../../../../src/store/sql.js';
import {
  DEFAULT_NUMBER_POOLS,
  PoolExhaustedError,
  createNumberStore,
  formatNumber,
  type NumberPools,
  type NumberPoolSpec,
} from '../../../../src/store/identity/numbers.js';
import { STORE_ENGINES, engineSkipped, testStores, type TestEngine } from '../../../support/store-engines.js';
import { pgTarget } from '../../../support/pg.js';
import { sqliteStore } from '../../../../src/store/sqlite/store.js';
import { countStatements } from '../../../support/count-statements.js';

const T0 = 1_700_000_000_000;
const dir = mkdtempSync(join(tmpdir(), 'numbers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pools = (account: Partial<NumberPoolSpec>): NumberPools => ({
  ...DEFAULT_NUMBER_POOLS,
  account: { ...DEFAULT_NUMBER_POOLS.account, ...account },
});

describe('number formats', () => {
  it('formats prefix + zero-padded sequence + check digit to the width', () => {
    const spec: NumberPoolSpec = {
      ranges: [{ from: '1', to: '999' }],
      prefix: '77',
      width: 8,
      checkDigit: 'luhn',
      warnAt: 0.9,
    };
    const n = formatNumber(spec, 42n);
    expect(n).toMatch(/^7700042\d$/);
    expect(hasValidCheckDigit('luhn', n ?? '')).toBe(true);
    expect(formatNumber({ ...spec, prefix: 'LN', checkDigit: 'none', width: 6 }, 42n)).toBe('LN0042');
  });
});

/** Two handles on one state, as a daemon and a command (or two replicas) have: two connections to one file, two pools on one database. */
async function twoHandles(
  engine: TestEngine,
  name: string,
  url: string | null,
  cleanup: Array<() => Promise<void>>,
): Promise<[StoreDb, StoreDb]> {
  const open = async (): Promise<StoreDb> => {
    const db =
      engine === 'sqlite'
        ? sqliteStore(openDatabase(join(dir, `${name}.sqlite`)))
        : await openStore(pgTarget(url as string, { poolSize: 2, connectTimeoutMs: 5000 }));
    cleanup.push(() => db.close());
    return db;
  };
  return [await open(), await open()];
}

describe.each(STORE_ENGINES)('number pools on %s', (engine) => {
  const open = testStores(engine);
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanup.length > 0) await cleanup.pop()?.();
  });
  const fresh = async () => (await open()).db;

  describe.skipIf(engineSkipped(engine))('allocation', () => {
    it('gives a key one number forever and two keys two numbers', async () => {
      const s = createBoardingStore(await fresh());
      const a = await s.numbers.allocate('account', 'loan-a', T0);
      const b = await s.numbers.allocate('account', 'loan-b', T0);
      expect(a.fresh).toBe(true);
      expect(b.number).not.toBe(a.number);
      expect(await s.numbers.allocate('account', 'loan-a', T0 + 1)).toEqual({
        number: a.number,
        fresh: false,
      });
      expect(await s.numbers.get('account', 'loan-a')).toBe(a.number);
      expect(await s.numbers.keyOf('account', b.number)).toBe('loan-b');
      expect(a.number).toHaveLength(10);
      expect(hasValidCheckDigit('luhn', a.number)).toBe(true);
      // Pools are separate key spaces.
      expect(await s.numbers.get('customer', 'loan-a')).toBeNull();
    });

    it('reuses a number after a restart (a new connection) and continues the sequence', async () => {
      const t = await open();
      const [before, after] = await twoHandles(engine, `restart-${Date.now()}`, t.url, cleanup);
      const first = (await createNumberStore(before).allocate('account', 'L1', T0)).number;
      await before.close();
      const store = createNumberStore(after);
      expect(await store.allocate('account', 'L1', T0 + 5)).toEqual({ number: first, fresh: false });
      const second = (await store.allocate('account', 'L2', T0 + 5)).number;
      expect(second).not.toBe(first);
      expect((await store.usage('account')).used).toBe(2);
    });

    it('an allocation inside a transaction that rolls back leaves no number behind (it is part of the state change)', async () => {
      const s = createBoardingStore(await fresh());
      await expect(
        s.write(async () => {
          await s.numbers.allocate('account', 'L1', T0);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect(await s.numbers.get('account', 'L1')).toBeNull();
      expect((await s.numbers.usage('account')).used).toBe(0);
    });

    it('two store handles on one state never hand out one number twice', async () => {
      const t = await open();
      const [d1, d2] = await twoHandles(engine, `two-handles-${Date.now()}`, t.url, cleanup);
      const h1 = createNumberStore(d1, pools({ ranges: [{ from: '1', to: '500' }] }));
      const h2 = createNumberStore(d2, pools({ ranges: [{ from: '1', to: '500' }] }));
      const seen = new Map<string, string>();
      for (let i = 0; i < 100; i++) {
        for (const [h, name] of [
          [h1, 'a'],
          [h2, 'b'],
        ] as const) {
          const key = `${name}${i}`;
          const n = (await h.allocate('account', key, T0)).number;
          expect(seen.has(n), `number ${n} given to ${seen.get(n)} and ${key}`).toBe(false);
          seen.set(n, key);
        }
      }
      expect(seen.size).toBe(200);
    });

    it('skips a sequence whose mod-11 check digit would be 10, and each issued number checks', async () => {
      const s = createNumberStore(
        await fresh(),
        pools({ ranges: [{ from: '1', to: '30' }], width: 4, checkDigit: 'mod11' }),
      );
      const issued: string[] = [];
      for (;;) {
        try {
          issued.push((await s.allocate('account', `k${issued.length}`, T0)).number);
        } catch (err) {
          expect(err).toBeInstanceOf(PoolExhaustedError);
          break;
        }
      }
      // 006 has weighted sum 12 ≡ 1 → 10: never issued.
      expect(formatNumber(s.pools.account, 6n)).toBeNull();
      expect(issued.some((n) => n.startsWith('006'))).toBe(false);
      expect(issued.some((n) => n.startsWith('005'))).toBe(true);
      expect(issued.every((n) => hasValidCheckDigit('mod11', n))).toBe(true);
      const skipped = Array.from({ length: 30 }, (_, i) => i + 1).filter(
        (i) => formatNumber(s.pools.account, BigInt(i)) === null,
      );
      expect(skipped.length).toBeGreaterThan(0);
      expect(issued).toHaveLength(30 - skipped.length);
      expect(await s.usage('account')).toMatchObject({
        used: 30,
        capacity: 30,
        ratio: 1,
        allocated: 30 - skipped.length,
      });
    });

    it('an exhausted pool throws a fatal error naming the config key, and never reuses a number', async () => {
      const s = createNumberStore(await fresh(), pools({ ranges: [{ from: '10', to: '12' }], width: 3 }));
      const got: string[] = [];
      for (const k of ['a', 'b', 'c']) got.push((await s.allocate('account', k, T0)).number);
      expect(new Set(got).size).toBe(3);
      let caught: unknown;
      try {
        await s.allocate('account', 'd', T0);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(PoolExhaustedError);
      expect(caught).toBeInstanceOf(FatalError);
      expect((caught as Error).message).toMatch(
        /identity\.accountNumbers\.pool: the account number pool is exhausted \(all 3 sequence\(s\)/,
      );
      expect((caught as Error).message).toMatch(/add a range to identity\.accountNumbers\.pool\.ranges/);
      expect(await s.get('account', 'd')).toBeNull();
      // Keys that have a number still get it.
      expect((await s.allocate('account', 'a', T0)).number).toBe(got[0]);
    });

    it('a range added later is used without renumbering; ranges are used in the order listed', async () => {
      const db = await fresh();
      const small = createNumberStore(db, pools({ ranges: [{ from: '500', to: '501' }], width: 4 }));
      const a = (await small.allocate('account', 'a', T0)).number;
      await small.allocate('account', 'b', T0);
      await expect(small.allocate('account', 'c', T0)).rejects.toThrow(PoolExhaustedError);
      const bigger = createNumberStore(
        db,
        pools({
          ranges: [
            { from: '500', to: '501' },
            { from: '100', to: '199' },
          ],
          width: 4,
        }),
      );
      expect((await bigger.allocate('account', 'a', T0)).number).toBe(a);
      expect((await bigger.allocate('account', 'c', T0)).number).toMatch(/^100\d$/);
      expect(await bigger.usage('account')).toMatchObject({ used: 3, capacity: 102 });
    });

    it('a re-declared range never re-issues a number another key holds', async () => {
      const db = await fresh();
      const first = createNumberStore(db, pools({ ranges: [{ from: '1', to: '9' }], width: 2 }));
      const held: string[] = [];
      for (const k of ['a', 'b', 'c']) held.push((await first.allocate('account', k, T0)).number);
      // Same sequences, declared from a different start: a new cursor, but 1–3 are held.
      const again = createNumberStore(db, pools({ ranges: [{ from: '01', to: '9' }], width: 2 }));
      const next = (await again.allocate('account', 'd', T0)).number;
      const redeclared = createNumberStore(db, pools({ ranges: [{ from: '2', to: '9' }], width: 2 }));
      const after = (await redeclared.allocate('account', 'e', T0)).number;
      expect(held).not.toContain(next);
      expect([...held, next]).not.toContain(after);
    });

    it('reports usage as the share of sequences consumed', async () => {
      const s = createNumberStore(await fresh(), pools({ ranges: [{ from: '1', to: '10' }], width: 3 }));
      expect(await s.usage('account')).toMatchObject({ used: 0, capacity: 10, ratio: 0, warnAt: 0.9 });
      for (let i = 0; i < 9; i++) await s.allocate('account', `k${i}`, T0);
      expect(await s.usage('account')).toMatchObject({ used: 9, ratio: 0.9, allocated: 9 });
    });
  });
});

describe('what a number costs the state database (issue 44 item 5: ≤ 2 statements)', () => {
  it('a new key costs two statements, a key that holds one two, inside the caller’s transaction no savepoint', async () => {
    const sqlite = openDatabase(':memory:');
    const db = sqliteStore(sqlite);
    const s = createBoardingStore(db);
    // The first allocation of a process reads the range's cursor once; the cost is of every one after it.
    await s.numbers.allocate('account', 'warm-up', T0);
    const counter = countStatements(sqlite);
    try {
      const a = await s.numbers.allocate('account', 'loan-a', T0);
      expect(a.fresh).toBe(true);
      const fresh = counter.seen.filter((q) => !/^(BEGIN|COMMIT)/.test(q));
      expect(fresh, fresh.join('\n')).toHaveLength(2);
      counter.reset();
      expect(await s.numbers.allocate('account', 'loan-a', T0)).toEqual({ number: a.number, fresh: false });
      expect(counter.seen.filter((q) => !/^(BEGIN|COMMIT)/.test(q))).toHaveLength(2);
      counter.reset();
      await s.write(async () => {
        await s.numbers.allocate('account', 'loan-b', T0);
        await s.numbers.allocate('customer', 'tin-b', T0);
      });
      // Two numbers (the customer pool's first: its cursor is read once), one transaction, no savepoint.
      expect(counter.seen.filter((q) => /SAVEPOINT/.test(q))).toEqual([]);
      expect(
        counter.seen.filter((q) => !/^(BEGIN|COMMIT)/.test(q)).length,
        counter.seen.join('\n'),
      ).toBeLessThanOrEqual(2 + 4);
      counter.reset();
      await s.write(() => s.numbers.allocate('customer', 'tin-c', T0));
      expect(counter.seen.filter((q) => !/^(BEGIN|COMMIT)/.test(q))).toHaveLength(2);
    } finally {
      counter.stop();
    }
    // The counts the metrics read follow by trigger.
    expect(await s.numbers.usage('account')).toMatchObject({ used: 3, allocated: 3 });
    expect(await s.numbers.usage('customer')).toMatchObject({ used: 2, allocated: 2 });
  });

  it('a cursor another handle moved, or a transaction that rolled back, is read again: never a number twice', async () => {
    const path = join(dir, `stale-${Date.now()}.sqlite`);
    const d1 = sqliteStore(openDatabase(path));
    const d2 = sqliteStore(openDatabase(path));
    try {
      const h1 = createNumberStore(d1, pools({ ranges: [{ from: '1', to: '50' }], width: 4 }));
      const h2 = createNumberStore(d2, pools({ ranges: [{ from: '1', to: '50' }], width: 4 }));
      const seen = new Set<string>();
      const take = async (h: typeof h1, key: string): Promise<void> => {
        const n = (await h.allocate('account', key, T0)).number;
        expect(seen.has(n), `${n} twice`).toBe(false);
        seen.add(n);
      };
      await take(h1, 'a1');
      await take(h2, 'b1');
      await take(h1, 'a2');
      await expect(
        d1.write(async () => {
          await h1.allocate('account', 'rolled-back', T0);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      await take(h1, 'a3');
      await take(h2, 'b2');
      expect(await h1.get('account', 'rolled-back')).toBeNull();
      expect(seen.size).toBe(5);
      expect((await h1.usage('account')).allocated).toBe(5);
    } finally {
      await d1.close();
      await d2.close();
    }
  });
});
