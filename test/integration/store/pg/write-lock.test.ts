/**
 * The write lock every PostgreSQL write transaction takes (src/store/sql.ts) across replicas: a
 * replica paused inside a write transaction (SIGSTOP, a frozen VM) must not hold it for ever.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../../../src/store/open.js';
import type { StoreDb } from '../../../../src/store/sql.js';
import { createTestDatabase, pgSkipReason, type TestDatabase, pgTarget } from '../../../support/pg.js';

let db: TestDatabase;
beforeAll(async () => {
  if (pgSkipReason) return;
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

describe.skipIf(pgSkipReason !== null)('the PostgreSQL write lock', () => {
  it("an unfenced write transaction left idle by a paused replica is ended by the server, so the other replicas' writes go on (it was held until the replica resumed)", async () => {
    // Opened as the daemon opens its store (its pool logs a connection the server ends).
    const open = (applicationName: string): Promise<StoreDb> =>
      openStore(pgTarget(db.url, { poolSize: 2, connectTimeoutMs: 5000 }), { applicationName });
    const a = await open('paused-replica');
    const b = await open('other-replica');
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    let resume!: () => void;
    const resumed = new Promise<void>((r) => (resume = r));
    // Replica a takes the lock, then sends nothing more: what the server sees of a stopped process.
    const paused = a
      .write(async () => {
        await a.run('SELECT 1');
        entered();
        await resumed;
      })
      .then(
        () => 'committed',
        (err: Error) => err.message,
      );
    await inside;
    const stuck = await db
      .pool('observer', 1)
      .query<{ state: string }>(
        "SELECT state FROM pg_stat_activity WHERE application_name = 'paused-replica' AND state = 'idle in transaction'",
      );
    expect(stuck.rows).toHaveLength(1);

    // Replica b's write waits for the lock until the server ends a's idle transaction.
    let guard: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      b.write(() => b.run('SELECT 1')).then(() => 'written'),
      new Promise<string>(
        (r) => (guard = setTimeout(() => r('still waiting for the write lock after 25 s'), 25_000)),
      ),
    ]);
    clearTimeout(guard);
    expect(outcome).toBe('written');
    // The paused replica, resumed, finds its transaction ended: nothing it wrote in it stays.
    resume();
    expect(await paused).not.toBe('committed');
    await a.close();
    await b.close();
  }, 40_000);
});
