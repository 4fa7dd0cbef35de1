import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createMemoryRateState, type RateStateStore } from '../../../src/platform/rate-budget/ledger.js';
import { createSqliteRateState, rateStateFor } from '../../../src/store/rate-budget/sqlite.js';
import { openTestStore, type TestStore } from '../../support/store-engines.js';

const opened: TestStore[] = [];
afterEach(async () => {
  while (opened.length > 0) await opened.pop()?.close();
});

// The per-process ledger (SQLite file, or memory). On PostgreSQL every process spends from the
// shared ledger instead (src/store/rate-budget/pg.ts; test/integration/store/rate-budget/pg.test.ts).
const stores: Array<[string, () => Promise<RateStateStore>]> = [
  ['sqlite', () => Promise.resolve(createSqliteRateState(openDatabase(':memory:')))],
  ['memory', () => Promise.resolve(createMemoryRateState())],
];

describe.each(stores)('%s rate state', (name, make) => {
  it('keeps a spend window per process and bucket, a pause that only grows, and strikes until cleared or pruned', async () => {
    const s = await make();
    const seen: Array<{ others: Array<{ spent: number; until: number }>; pause: number | null }> = [];
    s.reserve('p1', 'read', 100, 1000, { spent: 5, until: 300 });
    s.reserve('p2', 'read', 100, 1000, { spent: 2, until: 200 });
    s.reserve('p1', 'write', 100, 1000, { spent: 7, until: 250 });
    // Another process sees the rows of every owner but itself, per bucket, while they are in the window.
    seen.push(s.reserve('p3', 'read', 1100, 1000, null));
    seen.push(s.reserve('p1', 'read', 1250, 1000, null));
    seen.push(s.reserve('p3', 'write', 1260, 1000, null));
    expect(seen.map((v) => v.others.sort((a, b) => a.until - b.until))).toEqual([
      [
        { spent: 2, until: 200 },
        { spent: 5, until: 300 },
      ],
      [],
      [],
    ]);
    // A reservation replaces the owner's row.
    s.reserve('p1', 'read', 1250, 1000, { spent: 1, until: 1400 });
    seen.push(s.reserve('p3', 'read', 1300, 1000, null));
    expect(seen.at(-1)?.others).toEqual([{ spent: 1, until: 1400 }]);
    s.savePause('write', 5000);
    s.savePause('write', 4000);
    expect(s.loadPause('write')).toBe(5000);
    expect(s.loadPause('read')).toBeNull();
    seen.push(s.reserve('p3', 'write', 1300, 1000, null));
    expect(seen.at(-1)?.pause).toBe(5000);
    s.recordStrike({ at: 1000, bucket: 'read', path: '/a', retryAfterMs: 2000 });
    s.recordStrike({ at: 2000, bucket: 'write', path: null, retryAfterMs: null });
    expect(s.activeStrikes(1500).map((x) => x.bucket)).toEqual(['write']);
    expect(s.clearStrikes('ops', 3000)).toBe(2);
    expect(s.activeStrikes(0)).toEqual([]);
    s.prune(1500, 1500);
    seen.push(s.reserve('p9', 'read', 0, 1_000_000, null));
    expect(seen.at(-1)?.others).toEqual([]);
  });
});

describe('the rate state a process left on SQLite', () => {
  it('is what the next process reads: spend, the pause, the strikes and their clearing', async () => {
    const t = await openTestStore('sqlite');
    opened.push(t);
    const first = rateStateFor(t.db);
    first.reserve('daemon', 'write', 90, 60_000, { spent: 3, until: 100 });
    first.reserve('daemon', 'read', 90, 60_000, { spent: 40, until: 150 });
    first.savePause('read', 9000);
    first.recordStrike({
      at: 500,
      bucket: 'write',
      path: '/public/v1/loans/:id/boarding',
      retryAfterMs: 1500,
    });
    first.recordStrike({ at: 600, bucket: 'read', path: null, retryAfterMs: null });
    const second = rateStateFor(t.db);
    const windows: unknown[] = [];
    for (const bucket of ['write', 'read'] as const)
      windows.push(second.reserve('next-run', bucket, 1000, 60_000, null).others);
    expect(windows).toEqual([[{ spent: 3, until: 100 }], [{ spent: 40, until: 150 }]]);
    expect(second.loadPause('read')).toBe(9000);
    expect(second.activeStrikes(0).map((s) => [s.at, s.bucket, s.path, s.retryAfterMs])).toEqual([
      [500, 'write', '/public/v1/loans/:id/boarding', 1500],
      [600, 'read', null, null],
    ]);
    expect(second.clearStrikes('ops-anna: ticket 4711', 700)).toBe(2);
    expect(
      await t.db.all('SELECT cleared_at AS at, cleared_by AS by FROM rate_strikes ORDER BY seq'),
    ).toEqual([
      { at: 700, by: 'ops-anna: ticket 4711' },
      { at: 700, by: 'ops-anna: ticket 4711' },
    ]);
    expect(rateStateFor(t.db).activeStrikes(0)).toEqual([]);
  });
});
