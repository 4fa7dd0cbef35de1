import { describe, expect, it } from 'vitest';
import { consoleSchema } from '../../../src/config/schema.js';
import { createConsoleService } from '../../../src/console/service.js';
import { EXCEPTION_SORTS, type ExceptionItem, type ExceptionQuery } from '../../../src/console/contract.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { searchKey } from '../../../src/lib/search-key.js';
import { createConsoleStore } from '../../../src/store/console.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { named, type StoreDb } from '../../../src/store/sql.js';
import { FakeClock } from '../../support/fake-clock.js';
import { STORE_ENGINES, engineSkipped, testStores } from '../../support/store-engines.js';

const DAY = 86_400_000;
// A Wednesday, noon UTC.
const NOW = Date.parse('2026-11-25T12:00:00Z');

interface Seed {
  id: string;
  state: string;
  reason: string | null;
  review: number;
  amount: number | null;
  released: string | null;
  entered: number;
  product: string;
  name: string | null;
}

async function seeded(db: StoreDb, n: number) {
  const ins = `INSERT INTO loans (id, loan_number, state, quarantine_reason, review_items, cents_amount, released_at_iso, product_id, borrower_name, borrower_key, state_entered_at, created_at, updated_at)
     VALUES (@id, @number, @state, @reason, @review, @amount, @released, @product, @name, @key, @entered, @entered, @entered)`;
  const seeds: Seed[] = [];
  const reasons = ['mapping', 'core_rejected', 'validation'];
  for (let i = 0; i < n; i++) {
    const kind = i % 5;
    const s: Seed = {
      id: `L${String((i * 7919) % 1000).padStart(4, '0')}-${i}`,
      state: kind === 3 ? 'acknowledged' : kind === 4 ? (i % 2 ? 'queued' : 'acknowledged') : 'quarantined',
      reason: kind < 3 ? (reasons[i % 3] as string) : null,
      review: kind === 3 ? 1 + (i % 4) : 0,
      // Ties and nulls on purpose: keyset paging must neither skip nor repeat.
      amount: i % 11 === 0 ? null : (i % 13) * 1000 - 5000,
      released: i % 9 === 0 ? null : `2026-11-${String(10 + (i % 12)).padStart(2, '0')}T10:00:00Z`,
      entered: NOW - (i % 17) * DAY - (i % 3) * 1000,
      product: i % 2 ? 'SBA7A' : 'LOC',
      name: i % 6 === 0 ? null : i % 50 === 1 ? `José Müller ${i} SÀRL` : `Borrower ${i % 40} LLC`,
    };
    seeds.push(s);
  }
  await db.write(async () => {
    for (const [i, s] of seeds.entries())
      await db.run(
        ...named(ins, { ...s, number: `N-${i}`, key: s.name === null ? null : searchKey(s.name) }),
      );
  });
  const clock = new FakeClock({ start: NOW });
  const service = createConsoleService({
    store: createBoardingStore(db),
    consoleStore: createConsoleStore(db),
    config: { console: consoleSchema.parse({}), bank: { timeZone: 'UTC' }, reports: { dir: '/nonexistent' } },
    clock,
    logger: silentLogger(),
  });
  const exceptions = seeds.filter(
    (s) => s.state === 'quarantined' || (s.review > 0 && s.state === 'acknowledged'),
  );
  return { db, service, seeds, exceptions };
}

async function all(
  service: Awaited<ReturnType<typeof seeded>>['service'],
  q: ExceptionQuery,
): Promise<ExceptionItem[]> {
  const out: ExceptionItem[] = [];
  let cursor: string | undefined;
  for (let guard = 0; guard < 1000; guard++) {
    const page = await service.exceptions({ ...q, ...(cursor ? { cursor } : {}) });
    out.push(...page.items);
    if (!page.next) return out;
    cursor = page.next;
  }
  throw new Error('paging did not end');
}

const sortKey: Record<(typeof EXCEPTION_SORTS)[number], (s: Seed) => number | string> = {
  age: (s) => s.entered,
  amount: (s) => s.amount ?? -9007199254740992,
  released: (s) => s.released ?? '',
  id: (s) => s.id,
};

describe.each(STORE_ENGINES)('on %s', (engine) => {
  const open = testStores(engine);
  const seed = async (n: number) => seeded((await open()).db, n);

  describe.skipIf(engineSkipped(engine))('exception queue', () => {
    it('pages every sort in both directions by keyset: the pages together are the whole sorted queue, nothing skipped or repeated', async () => {
      const { service, exceptions } = await seed(260);
      for (const sort of EXCEPTION_SORTS) {
        for (const dir of ['asc', 'desc'] as const) {
          const got = (await all(service, { sort, dir, limit: 7 })).map((i) => i.id);
          const key = sortKey[sort];
          const want = [...exceptions]
            .sort((a, b) => {
              const ka = key(a);
              const kb = key(b);
              const c = ka < kb ? -1 : ka > kb ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
              return dir === 'asc' ? c : -c;
            })
            .map((s) => s.id);
          expect(got, `${sort} ${dir}`).toEqual(want);
        }
      }
    });

    it('filters by reason, state, product, amount, release date, age in business days and search', async () => {
      const { service, exceptions } = await seed(260);
      const ids = async (q: ExceptionQuery) =>
        (await all(service, { ...q, sort: 'id', limit: 50 })).map((i) => i.id);
      const sorted = (xs: Seed[]) => xs.map((s) => s.id).sort();
      expect(await ids({ reason: 'core_rejected' })).toEqual(
        sorted(exceptions.filter((s) => s.reason === 'core_rejected')),
      );
      expect(await ids({ state: 'review' })).toEqual(sorted(exceptions.filter((s) => s.review > 0)));
      expect(await ids({ reason: 'review', product: 'LOC' })).toEqual(
        sorted(exceptions.filter((s) => s.review > 0 && s.product === 'LOC')),
      );
      expect(await ids({ minAmountCents: 0, maxAmountCents: 3000 })).toEqual(
        sorted(exceptions.filter((s) => s.amount !== null && s.amount >= 0 && s.amount <= 3000)),
      );
      expect(await ids({ releasedFrom: '2026-11-12', releasedTo: '2026-11-14' })).toEqual(
        sorted(
          exceptions.filter(
            (s) => s.released !== null && s.released >= '2026-11-12' && s.released < '2026-11-15',
          ),
        ),
      );
      // NOW is Wednesday 2026-11-25: 0–1 business days back reaches Tuesday the 24th; 2–5 reaches Wednesday the 18th.
      expect(await ids({ maxAgeDays: 1 })).toEqual(
        sorted(exceptions.filter((s) => s.entered >= Date.parse('2026-11-24T00:00:00Z'))),
      );
      expect(await ids({ minAgeDays: 6 })).toEqual(
        sorted(exceptions.filter((s) => s.entered < Date.parse('2026-11-18T00:00:00Z'))),
      );
      expect(await ids({ q: 'borrower 7 llc' })).toEqual(
        sorted(exceptions.filter((s) => s.name?.toLowerCase().includes('borrower 7 llc'))),
      );
      // Whatever the case and accents, on either side.
      const accented = exceptions.filter((s) => s.name?.startsWith('José Müller'));
      expect(accented.length).toBeGreaterThan(1);
      expect(await ids({ q: 'jose MULLER' })).toEqual(sorted(accented));
      expect(await ids({ q: 'müller 51 sàrl' })).toEqual(
        sorted(accented.filter((s) => s.name === 'José Müller 51 SÀRL')),
      );
      const one = exceptions[4] as Seed;
      expect(await ids({ q: one.id })).toEqual([one.id]);

      const counts = await service.exceptionCounts();
      const total = counts.reduce((n, c) => n + c.total, 0);
      expect(total).toBe(exceptions.length);
      const review = counts.find((c) => c.reason === 'review');
      expect(review?.total).toBe(exceptions.filter((s) => s.review > 0).length);
      expect((review?.byAge['0-1'] ?? 0) + (review?.byAge['2-5'] ?? 0) + (review?.byAge['>5'] ?? 0)).toBe(
        review?.total,
      );
    });

    it('pages the amount sort past loans without an amount (regression: on PostgreSQL the NULL stand-in −2^53 failed the whole page)', async () => {
      const { db, service } = await seed(0);
      const store = createBoardingStore(db);
      for (const [id, cents] of [
        ['A', null],
        ['B', 500],
        ['C', null],
        ['D', -7],
      ] as const) {
        await store.loans.insert(
          { id, state: 'quarantined', patch: { quarantineReason: 'mapping', centsAmount: cents } },
          NOW,
        );
      }
      expect((await all(service, { sort: 'amount', dir: 'asc', limit: 1 })).map((i) => i.id)).toEqual([
        'A',
        'C',
        'D',
        'B',
      ]);
      expect((await all(service, { sort: 'amount', dir: 'desc', limit: 1 })).map((i) => i.id)).toEqual([
        'B',
        'D',
        'C',
        'A',
      ]);
    });

    it('refuses a cursor from another sort order and a made-up cursor (400)', async () => {
      const { service } = await seed(40);
      const page = await service.exceptions({ sort: 'amount', limit: 3 });
      await expect(
        service.exceptions({ sort: 'id', limit: 3, cursor: page.next as string }),
      ).rejects.toMatchObject({ status: 400, field: 'cursor' });
      await expect(service.exceptions({ cursor: 'not-a-cursor' })).rejects.toMatchObject({
        status: 400,
        field: 'cursor',
      });
    });

    it('keeps the age of a loan in its state: entering a state stamps it, staying in it does not', async () => {
      const { db } = await seed(0);
      await db.run("INSERT INTO loans (id, state, created_at, updated_at) VALUES ('A', 'queued', 100, 100)");
      await db.run(
        "UPDATE loans SET state = 'quarantined', quarantine_reason = 'mapping', updated_at = 200 WHERE id = 'A'",
      );
      await db.run("UPDATE loans SET last_seen_at = 300, updated_at = 300 WHERE id = 'A'");
      expect(
        await db.get("SELECT state_entered_at AS t, exception_reason AS r FROM loans WHERE id = 'A'"),
      ).toEqual({ t: 200, r: 'mapping' });
    });
  });
});

describe('migration 13 on an existing state database', () => {
  it('backfills when each loan entered its state from its history (updated_at when it has none)', async () => {
    const { default: Database } = await import('better-sqlite3');
    const { MIGRATIONS, migrationSql } = await import('../../../src/store/migrations/migrations.js');
    const { migrate } = await import('../../../src/store/migrations/sqlite.js');
    const db = new Database(':memory:');
    for (const [v, sql] of MIGRATIONS.slice(0, 11).entries()) {
      db.exec(migrationSql(sql, 'sqlite'));
      db.pragma(`user_version = ${v + 1}`);
    }
    db.prepare(
      "INSERT INTO loans (id, state, quarantine_reason, created_at, updated_at) VALUES ('A', 'quarantined', 'mapping', 100, 900)",
    ).run();
    db.prepare(
      "INSERT INTO loans (id, state, created_at, updated_at) VALUES ('B', 'acknowledged', 100, 800)",
    ).run();
    db.prepare(
      "INSERT INTO loan_events (loan_id, at, kind, from_state, to_state) VALUES ('A', 150, 'transition', NULL, 'queued'), ('A', 300, 'transition', 'mapped', 'quarantined')",
    ).run();
    migrate(db);
    expect(db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
    expect(
      db.prepare('SELECT id, state_entered_at AS t, exception_reason AS r FROM loans ORDER BY id').all(),
    ).toEqual([
      { id: 'A', t: 300, r: 'mapping' },
      { id: 'B', t: 800, r: null },
    ]);
  });
});
