/**
 * A replica that takes the lease over from a stale leader ends that leader's sessions (regression:
 * a SIGSTOPped leader's queued write transactions each held the shared write lock until their idle
 * timeout, one after another: the standby's first acknowledgement came a minute after the stop).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../../../src/lib/clock.js';
import { FakeClock } from '../../../support/fake-clock.js';
import { openLeadership } from '../../../../src/store/leadership/leases.js';
import { openStore } from '../../../../src/store/open.js';
import type { StoreDb } from '../../../../src/store/sql.js';
import { createTestDatabase, pgSkipReason, type TestDatabase, pgTarget } from '../../../support/pg.js';

let db: TestDatabase;
const stores: StoreDb[] = [];
beforeAll(async () => {
  if (pgSkipReason) return;
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  for (const s of stores) await s.close().catch(() => undefined);
  await db?.drop();
});

const open = async (): Promise<StoreDb> => {
  const s = await openStore(pgTarget(db.url, { poolSize: 3, connectTimeoutMs: 5000 }));
  stores.push(s);
  return s;
};

describe.skipIf(pgSkipReason !== null)('taking over from a stale leader', () => {
  it("ends the stale leader's sessions: its stalled write transaction stops holding the write lock at once, not after the 15 s idle timeout", async () => {
    const a = await open();
    const b = await open();
    expect(a.instance).not.toBeNull();
    expect(a.instance).not.toBe(b.instance);
    await a.run('CREATE TABLE evict_probe (who text)');
    const leaderA = await openLeadership(a, {
      name: 'boarding',
      clock: systemClock,
      ttlMs: 1_500,
      renewEveryMs: 500,
    });
    const leaderB = await openLeadership(b, {
      name: 'boarding',
      clock: systemClock,
      ttlMs: 1_500,
      renewEveryMs: 500,
    });
    expect(leaderA.holder.endsWith(`:${a.instance}`)).toBe(true);
    await leaderA.tick();
    expect(leaderA.term?.epoch).toBe(1);
    // A stalls inside a write transaction (as a process stopped mid-transaction): it holds the
    // shared write lock, and its lease is never renewed.
    let release!: () => void;
    const stalled = a.write(async () => {
      await a.run("INSERT INTO evict_probe VALUES ('a')");
      await new Promise<void>((r) => (release = r));
    });
    stalled.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1_700)); // A's lease expires on the database's clock
    const t0 = Date.now();
    await leaderB.tick();
    expect(leaderB.term?.epoch).toBe(2);
    await leaderB.guard(b, () => b.write(() => b.run("INSERT INTO evict_probe VALUES ('b')")));
    expect(Date.now() - t0).toBeLessThan(5_000);
    release();
    // A's transaction was ended by the server: its row is gone, B's stands.
    await expect(stalled).rejects.toThrow();
    expect(await b.all('SELECT who FROM evict_probe')).toEqual([{ who: 'b' }]);
    await leaderB.stop();
  });

  it('a replica that stopped trusting its own lease (a slow renew) takes it again at once in a new epoch, without waiting out its TTL', async () => {
    const s = await open();
    const clock = new FakeClock({ start: Date.now() });
    const l = await openLeadership(s, { name: 'self', clock, ttlMs: 60_000, renewEveryMs: 5_000 });
    await l.tick();
    expect(l.term?.epoch).toBe(1);
    await clock.advance(58_000); // the local trust deadline (TTL − 2 s); the database's lease runs on
    expect(l.role).toBe('standby');
    await l.tick();
    expect(l.term?.epoch).toBe(2);
    await l.stop();
  });
});
