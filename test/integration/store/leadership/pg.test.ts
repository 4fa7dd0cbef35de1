/**
 * Leadership with fencing on a REAL PostgreSQL (scripts/pg-test-server.sh, started by the vitest
 * globalSetup). Interleavings are forced with explicit transactions on separate connections and
 * observed through pg_stat_activity (a backend waiting on a row lock), never with sleeps; the only
 * waits are for the database clock to pass a lease's expiry (expect.poll on the database itself).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PG_FENCE_SQL } from '../../../../src/store/leadership/fence.js';
import {
  FencedOut,
  PgLeadership,
  acquireLease,
  readLease,
  releaseLease,
  renewLease,
  type LeaseTerm,
} from '../../../../src/store/leadership/pg.js';
import type { PgPool } from '../../../../src/store/pg/pool.js';
import { pgStore } from '../../../../src/store/pg/store.js';
import type { StoreDb } from '../../../../src/store/sql.js';
import { FakeClock } from '../../../support/fake-clock.js';
import { createTestDatabase, pgSkipReason, type TestDatabase } from '../../../support/pg.js';

let db: TestDatabase;
let admin: PgPool;
let lease = 0;
/** A fresh lease name per test: tests never see each other's rows. */
const nextName = (): string => `lease-${++lease}`;

beforeAll(async () => {
  if (pgSkipReason) return;
  db = await createTestDatabase();
  admin = db.pool('admin', 3);
  await admin.query('CREATE TABLE writes (name text NOT NULL, writer text NOT NULL, epoch bigint NOT NULL)');
});
afterAll(async () => {
  if (!pgSkipReason) await db.drop();
});

const live: PgLeadership[] = [];
/** Each replica's store over its pool: its writes are fenced the production way (guard + write). */
const stores = new Map<PgLeadership, StoreDb>();
afterEach(async () => {
  for (const l of live.splice(0)) await l.stop();
});

function replica(
  name: string,
  holder: string,
  opts: { clock?: FakeClock; ttlMs?: number; pool?: PgPool; fenceIdleTimeoutMs?: number } = {},
): PgLeadership {
  const pool = opts.pool ?? db.pool(`replica-${holder}`, 3);
  const l = new PgLeadership({
    pool,
    name,
    holder,
    clock: opts.clock ?? new FakeClock({ start: Date.now() }),
    ttlMs: opts.ttlMs ?? 15_000,
    renewEveryMs: Math.min(5_000, (opts.ttlMs ?? 15_000) / 3),
    marginMs: Math.min(2_000, (opts.ttlMs ?? 15_000) / 10),
    ...(opts.fenceIdleTimeoutMs !== undefined ? { fenceIdleTimeoutMs: opts.fenceIdleTimeoutMs } : {}),
  });
  live.push(l);
  stores.set(l, storeOn(pool));
  return l;
}

/**
 * A replica's store over its pool. A connection the server ends while checked out (the idle
 * timeout, pg_terminate_backend) emits 'error' on its client: handled as the connector's pool does
 * (src/store/open.ts), the statement in progress fails with it.
 */
function storeOn(pool: PgPool): StoreDb {
  if (typeof pool.on === 'function') pool.on('connect', (c) => c.on('error', () => undefined));
  return pgStore(pool, 'test');
}

/**
 * A fenced unit of work by this replica, the one way the connector fences: Leadership.guard and a
 * write transaction of the store, which checks the lease in the same transaction first.
 */
const fenced = <T>(l: PgLeadership, fn: (s: StoreDb, term: LeaseTerm) => Promise<T>): Promise<T> => {
  const s = stores.get(l)!;
  const term = l.term;
  return l.guard(s, () => s.write(() => fn(s, term!)));
};

/** A fenced write by this replica: one row in `writes` tagged with who wrote it under which epoch. */
const write = (l: PgLeadership, name: string, writer: string): Promise<void> =>
  fenced(l, async (s, term) => {
    await s.run('INSERT INTO writes (name, writer, epoch) VALUES (?, ?, ?)', [name, writer, term.epoch]);
  });

const writesBy = async (name: string, writer: string): Promise<number> =>
  (
    await admin.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM writes WHERE name = $1 AND writer = $2',
      [name, writer],
    )
  ).rows[0]!.n;

/** Waits for the database clock to pass the lease's expiry (no local clock involved). */
async function untilExpired(name: string): Promise<void> {
  await expect
    .poll(async () => (await readLease(admin, name))!.expiresInMs < 0, { timeout: 20_000, interval: 50 })
    .toBe(true);
}

/** Waits until some backend of this application is blocked on a lock. */
async function untilWaitingOnLock(applicationName: string): Promise<void> {
  await expect
    .poll(
      async () =>
        (
          await admin.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
            [applicationName],
          )
        ).rows[0]!.n,
      { timeout: 10_000, interval: 20 },
    )
    .toBeGreaterThan(0);
}

/** A gate a test opens when it wants a transaction to go on. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe.skipIf(pgSkipReason !== null)('PostgreSQL leadership with fencing', () => {
  it('two holders racing to acquire: exactly one wins each round and the epoch goes up by one', async () => {
    const name = nextName();
    const a = db.pool('race-a', 2);
    const b = db.pool('race-b', 2);
    for (let round = 1; round <= 20; round++) {
      const [ra, rb] = await Promise.all([
        acquireLease(a, name, 'A', 15_000),
        acquireLease(b, name, 'B', 15_000),
      ]);
      const winners = [ra, rb].filter((r) => r !== null);
      expect(winners).toHaveLength(1);
      expect(winners[0]!.epoch).toBe(round);
      const holder = ra !== null ? 'A' : 'B';
      expect(await releaseLease(admin, { name, holder, epoch: round })).toBe(true);
    }
  });

  it('an acquire racing an uncommitted acquire waits for it and then loses (forced interleaving)', async () => {
    const name = nextName();
    const pa = db.pool('lock-a', 1);
    const pb = db.pool('lock-b', 1);
    const ca = await pa.connect();
    try {
      await ca.query('BEGIN');
      expect(await acquireLease(ca, name, 'A', 15_000)).toMatchObject({ epoch: 1 });
      const b = acquireLease(pb, name, 'B', 15_000);
      await untilWaitingOnLock('lock-b');
      await ca.query('COMMIT');
      expect(await b).toBeNull();
      expect(await readLease(admin, name)).toMatchObject({ holder: 'A', epoch: 1 });
    } finally {
      ca.release();
    }
  });

  it('a lease held and unexpired cannot be acquired by another holder', async () => {
    const name = nextName();
    expect(await acquireLease(admin, name, 'A', 15_000)).toMatchObject({ epoch: 1 });
    expect(await acquireLease(admin, name, 'B', 15_000)).toBeNull();
    expect(await readLease(admin, name)).toMatchObject({ holder: 'A', epoch: 1 });
  });

  it('renew succeeds only for the same holder and epoch: a stale epoch cannot renew', async () => {
    const name = nextName();
    const first = await acquireLease(admin, name, 'A', 15_000);
    expect(first?.epoch).toBe(1);
    await releaseLease(admin, { name, holder: 'A', epoch: 1 });
    const second = await acquireLease(admin, name, 'A', 15_000);
    expect(second?.epoch).toBe(2);
    expect(await renewLease(admin, { name, holder: 'A', epoch: 1 }, 15_000)).toBe(false);
    expect(await renewLease(admin, { name, holder: 'B', epoch: 2 }, 15_000)).toBe(false);
    expect(await renewLease(admin, { name, holder: 'A', epoch: 2 }, 15_000)).toBe(true);
  });

  it('an expired lease cannot be renewed: its holder must acquire again and gets a new epoch', async () => {
    const name = nextName();
    await acquireLease(admin, name, 'A', 300);
    await untilExpired(name);
    expect(await renewLease(admin, { name, holder: 'A', epoch: 1 }, 15_000)).toBe(false);
    expect(await acquireLease(admin, name, 'A', 15_000)).toMatchObject({ epoch: 2 });
  });

  it('a paused leader (no renew past the TTL) writes nothing once another replica took over, and steps down', async () => {
    const name = nextName();
    // The paused process's own clock does not move: it believes it is still inside its trust window
    // (it checked, then was stopped), so only the database fence stands between it and a late write.
    const clockA = new FakeClock({ start: Date.now() });
    const a = replica(name, 'A', { clock: clockA, ttlMs: 1_000 });
    const b = replica(name, 'B', { ttlMs: 15_000 });
    await a.tick();
    expect(a.term).toMatchObject({ epoch: 1 });
    await write(a, name, 'A');
    await untilExpired(name);
    await b.tick();
    expect(b.term).toMatchObject({ holder: 'B', epoch: 2 });
    expect(a.trusted()).toBe(true); // its local clock did not move
    const late = write(a, name, 'A-late');
    await expect(late).rejects.toBeInstanceOf(FencedOut);
    await expect(late).rejects.toMatchObject({ reason: 'lease_lost' });
    expect(await writesBy(name, 'A-late')).toBe(0);
    expect(a.role).toBe('standby');
    await write(b, name, 'B');
    expect(await writesBy(name, 'B')).toBe(1);
  });

  it('a paused leader whose lease expired with no successor still writes nothing', async () => {
    const name = nextName();
    const a = replica(name, 'A', { ttlMs: 1_000 });
    await a.tick();
    await untilExpired(name);
    await expect(write(a, name, 'A')).rejects.toMatchObject({ reason: 'lease_lost' });
    expect(await writesBy(name, 'A')).toBe(0);
  });

  it('past the local trust deadline (renew start + TTL − margin) the replica stops trusting its lease without asking the database', async () => {
    const name = nextName();
    const clock = new FakeClock({ start: Date.now() });
    const roles: string[] = [];
    const l = new PgLeadership({
      pool: db.pool('trust', 2),
      name,
      holder: 'A',
      clock,
      ttlMs: 15_000,
      renewEveryMs: 5_000,
      marginMs: 2_000,
      onChange: (r) => roles.push(r),
    });
    live.push(l);
    await l.tick();
    const signal = l.signal!;
    expect(l.trustLeftMs()).toBe(13_000);
    await clock.advance(12_999);
    expect(l.role).toBe('leader');
    await clock.advance(1);
    expect(l.role).toBe('standby');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toMatchObject({ reason: 'trust_expired' });
    expect(roles).toEqual(['leader', 'standby']);
    // Stopped before the database fence: nothing was even attempted.
    await expect(write(l, name, 'A')).rejects.toMatchObject({ reason: 'not_leader' });
    expect(await writesBy(name, 'A')).toBe(0);
    // The database still shows the lease (TTL 15 s on its clock): trust ends first, by design.
    expect((await readLease(admin, name))!.expiresInMs).toBeGreaterThan(0);
  });

  it('an external call starts only when the trust left covers its timeout, and is aborted when the term ends', async () => {
    const name = nextName();
    const clock = new FakeClock({ start: Date.now() });
    const l = new PgLeadership({
      pool: db.pool('calls', 2),
      name,
      holder: 'A',
      clock,
      ttlMs: 15_000,
      renewEveryMs: 5_000,
      marginMs: 2_000,
    });
    live.push(l);
    let calls = 0;
    const call = (timeoutMs: number) =>
      l.callWithinTrust(timeoutMs, () => Promise.resolve(void (calls += 1)));
    await expect(call(1_000)).rejects.toMatchObject({ reason: 'not_leader' });
    await l.tick(); // 13 s of trust
    await expect(call(13_000)).rejects.toMatchObject({ reason: 'trust_too_short' });
    await call(12_999);
    expect(calls).toBe(1);
    const hang = (signal: AbortSignal): Promise<void> =>
      new Promise<void>((_resolve, reject) =>
        signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true }),
      );
    // Its own timeout, on the process clock (always inside the trust window, by the check above).
    const timedOut = l.callWithinTrust(10_000, hang);
    await clock.advance(10_000);
    await expect(timedOut).rejects.toThrow(/timed out after 10000 ms/);
    expect(l.role).toBe('leader');
    // The term ending early (a renew found the lease taken) aborts the calls in flight at once.
    const inFlight = l.callWithinTrust(2_000, hang);
    l.stepDown('lease_lost');
    await expect(inFlight).rejects.toMatchObject({ name: 'FencedOut', reason: 'lease_lost' });
  });

  it("a renew moves the trust deadline from the renew's start", async () => {
    const name = nextName();
    const clock = new FakeClock({ start: Date.now() });
    const l = replica(name, 'A', { clock, ttlMs: 15_000 });
    await l.tick();
    await clock.advance(5_000);
    await l.tick(); // renew
    expect(l.term).toMatchObject({ epoch: 1 });
    expect(l.trustLeftMs()).toBe(13_500); // 15 s − 1.5 s margin, from the renew's start
  });

  it("the leader's database connection terminated (pg_terminate_backend): its open transaction is rolled back, the lease survives and the next renew and write succeed", async () => {
    const name = nextName();
    const pool = db.pool('victim', 2);
    const a = replica(name, 'A', { pool });
    await a.tick();
    const g = gate();
    let pid = 0;
    const inFlight = fenced(a, async (s) => {
      pid = (await s.get<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid;
      await s.run('INSERT INTO writes (name, writer, epoch) VALUES (?, ?, 1)', [name, 'A-killed']);
      await g.wait;
      await s.get('SELECT 1');
    });
    await expect.poll(() => pid).toBeGreaterThan(0);
    const killed = await admin.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid]);
    expect(killed.rows[0]!.ok).toBe(true);
    g.open();
    await expect(inFlight).rejects.toThrow();
    expect(await writesBy(name, 'A-killed')).toBe(0);
    // Leadership is a row, not a session: the same term renews on a fresh connection.
    await a.tick();
    expect(a.term).toMatchObject({ holder: 'A', epoch: 1 });
    await write(a, name, 'A');
    expect(await writesBy(name, 'A')).toBe(1);
  });

  it('old leader locked first: the takeover waits for its transaction, which commits before the new epoch; its next write is fenced out', async () => {
    const name = nextName();
    const oldPool = db.pool('old-leader', 2);
    // The server's idle-transaction kill is pushed out here so the old transaction outlives its lease.
    const a = replica(name, 'A', { pool: oldPool, ttlMs: 2_000, fenceIdleTimeoutMs: 60_000 });
    await a.tick();
    const g = gate();
    let locked = false;
    const inFlight = fenced(a, async (s) => {
      locked = true;
      await g.wait; // paused inside its transaction, past its lease
      await s.run('INSERT INTO writes (name, writer, epoch) VALUES (?, ?, 1)', [name, 'A-in-tx']);
    });
    await expect.poll(() => locked).toBe(true);
    await untilExpired(name);
    const newPool = db.pool('new-leader', 2);
    const takeover = acquireLease(newPool, name, 'B', 15_000);
    await untilWaitingOnLock('new-leader');
    g.open();
    await inFlight;
    expect(await takeover).toMatchObject({ epoch: 2 });
    // Ordered before the takeover, so the new leader sees it.
    const seen = await newPool.query('SELECT 1 FROM writes WHERE name = $1 AND writer = $2', [
      name,
      'A-in-tx',
    ]);
    expect(seen.rowCount).toBe(1);
    await expect(write(a, name, 'A-after')).rejects.toBeInstanceOf(FencedOut);
    expect(await writesBy(name, 'A-after')).toBe(0);
  });

  it("a renewal does not wait for the leader's own fenced transaction in progress (a long write never starves the renewals; the takeover still waits: 'old leader locked first')", async () => {
    const name = nextName();
    const a = replica(name, 'A-renew', { ttlMs: 15_000 });
    await a.tick();
    const term = a.term!;
    const g = gate();
    let inside = false;
    const inFlight = fenced(a, async (s) => {
      inside = true;
      await g.wait; // a long page transaction, holding the lease row's fence lock
      await s.run('INSERT INTO writes (name, writer, epoch) VALUES (?, ?, ?)', [name, 'A-long', term.epoch]);
    });
    await expect.poll(() => inside).toBe(true);
    // The renewal, on another connection, commits while the fenced transaction is still open.
    const renewer = db.pool('renewer', 1);
    const renewed = await Promise.race([
      renewLease(renewer, term, 15_000),
      new Promise<'blocked'>((r) => setTimeout(() => r('blocked'), 3_000)),
    ]);
    expect(renewed).toBe(true);
    g.open();
    await inFlight;
    expect(await writesBy(name, 'A-long')).toBe(1);
  });

  it('a leader paused inside a fenced transaction cannot block the takeover: the server ends it after the idle timeout and its write is lost', async () => {
    const name = nextName();
    const a = replica(name, 'A', { ttlMs: 1_000 });
    await a.tick();
    const g = gate();
    let wrote = false;
    const inFlight = fenced(a, async (s) => {
      await s.run('INSERT INTO writes (name, writer, epoch) VALUES (?, ?, 1)', [name, 'A-paused']);
      wrote = true;
      await g.wait; // paused for good
      await s.get('SELECT 1');
    });
    await expect.poll(() => wrote).toBe(true);
    await untilExpired(name);
    // Waits on the paused transaction's row lock until the server ends it (idle timeout = TTL).
    expect(await acquireLease(db.pool('successor', 1), name, 'B', 15_000)).toMatchObject({ epoch: 2 });
    g.open();
    await expect(inFlight).rejects.toThrow();
    expect(await writesBy(name, 'A-paused')).toBe(0);
  });

  it('new leader first: while its takeover is uncommitted and after it commits, the old leader writes nothing', async () => {
    const name = nextName();
    const a = replica(name, 'A', { ttlMs: 1_000 });
    await a.tick();
    await untilExpired(name);
    const pb = db.pool('taker', 1);
    const cb = await pb.connect();
    try {
      await cb.query('BEGIN');
      expect(await acquireLease(cb, name, 'B', 15_000)).toMatchObject({ epoch: 2 });
      await expect(write(a, name, 'A-during')).rejects.toMatchObject({ reason: 'lease_lost' });
      await cb.query('COMMIT');
    } finally {
      cb.release();
    }
    expect(await writesBy(name, 'A-during')).toBe(0);
  });

  it('concurrent fenced writes of an old and a new term, interleaved on row locks: only the current term commits', async () => {
    // Both terms run the fence in explicit transactions on two connections. The new leader's
    // takeover commits while the old one's fence check is queued behind it.
    const name = nextName();
    await acquireLease(admin, name, 'A', 15_000);
    const oldTerm: LeaseTerm = { name, holder: 'A', epoch: 1 };
    const pNew = db.pool('fence-new', 1);
    const pOld = db.pool('fence-old', 1);
    const cNew = await pNew.connect();
    const cOld = await pOld.connect();
    try {
      // The handover: A releases (as a graceful stop would) and B acquires, in one open transaction.
      await cNew.query('BEGIN');
      expect(await releaseLease(cNew, oldTerm)).toBe(true);
      const got = await acquireLease(cNew, name, 'B', 15_000);
      expect(got).toMatchObject({ epoch: 2 });
      // The old term's fence (on its own connection) now queues behind the uncommitted handover.
      await cOld.query('BEGIN');
      const oldFence = cOld
        .query(PG_FENCE_SQL, [oldTerm.name, oldTerm.holder, oldTerm.epoch])
        .then((r) => r.rowCount === 1);
      await untilWaitingOnLock('fence-old');
      await cNew.query('INSERT INTO writes (name, writer, epoch) VALUES ($1, $2, 2)', [name, 'B']);
      await cNew.query('COMMIT');
      // Re-checked against the committed row: the holder and epoch changed, so 0 rows.
      expect(await oldFence).toBe(false);
      await cOld.query('ROLLBACK');
      // And the new term's fence passes.
      await cNew.query('BEGIN');
      expect((await cNew.query(PG_FENCE_SQL, [name, 'B', 2])).rowCount).toBe(1);
      await cNew.query('COMMIT');
    } finally {
      cNew.release();
      cOld.release();
    }
    expect(await writesBy(name, 'B')).toBe(1);
  });

  it('the database lost mid-run: the leader keeps its term until the local deadline, then steps down and aborts its in-flight calls; it leads again (new epoch) when the database returns', async () => {
    const name = nextName();
    const real = db.pool('flaky', 3);
    let down = false;
    const refused = (): Promise<never> => Promise.reject(new Error('connect ECONNREFUSED (database down)'));
    // The real pool behind a switch: while down, every call fails the way an unreachable server does.
    const flaky = {
      query: (...args: Parameters<PgPool['query']>) => (down ? refused() : real.query(...args)),
      connect: () => (down ? refused() : real.connect()),
    } as unknown as PgPool;
    const clock = new FakeClock({ start: Date.now() });
    const l = new PgLeadership({
      pool: flaky,
      name,
      holder: 'A',
      clock,
      ttlMs: 1_500,
      renewEveryMs: 500,
      marginMs: 200,
    });
    live.push(l);
    stores.set(l, storeOn(flaky));
    await l.start();
    expect(l.term).toMatchObject({ epoch: 1 });
    const signal = l.signal!;
    down = true;
    await clock.advance(500); // renew fails
    await clock.advance(500); // and again
    await clock.advance(299);
    expect(l.role).toBe('leader'); // 1 ms of trust left (renew start + 1500 − 200)
    await clock.advance(1);
    expect(l.role).toBe('standby');
    expect(signal.aborted).toBe(true);
    await expect(write(l, name, 'A')).rejects.toMatchObject({ reason: 'not_leader' });
    down = false;
    await untilExpired(name);
    await clock.advance(500); // the next poll takes it again
    await expect.poll(() => l.term?.epoch).toBe(2);
    await write(l, name, 'A');
    expect(await writesBy(name, 'A')).toBe(1);
  });

  it("a standby tries again at the holder's lease expiry, not at its next poll (a dead leader's lease is taken as it expires)", async () => {
    const name = nextName();
    // A takes the lease and then never renews (its clock never moves): a leader killed by -9.
    const a = replica(name, 'A-dead', { ttlMs: 1_500 });
    await a.start();
    expect(a.role).toBe('leader');
    // B polls every 5 s; A's lease expires 1.5 s after it was taken.
    const clockB = new FakeClock({ start: Date.now() });
    const b = replica(name, 'B-wake', { clock: clockB, ttlMs: 15_000 });
    await b.start();
    expect(b.role).toBe('standby');
    expect(b.renewEveryMs).toBe(5_000);
    await untilExpired(name);
    // 2 s on B's clock: before its next poll (5 s), after the expiry it read (≤ 1.5 s + slack).
    await clockB.advance(2_000);
    await expect.poll(() => b.term?.holder, { timeout: 10_000 }).toBe('B-wake');
    expect(b.term?.epoch).toBe(2);
  });

  it('a graceful stop hands over at once: the standby hears the notification (its poll timer never fires here)', async () => {
    const name = nextName();
    const a = replica(name, 'A');
    const b = replica(name, 'B');
    await a.start();
    await b.start();
    expect(a.role).toBe('leader');
    expect(b.role).toBe('standby');
    await a.stop();
    await expect.poll(() => b.role, { timeout: 10_000 }).toBe('leader');
    expect(b.term).toMatchObject({ holder: 'B', epoch: 2 });
  });

  it("a standby's listening connection terminated: no uncaught error, and it still takes over by polling (regression: double release of the LISTEN client)", async () => {
    const name = nextName();
    const a = replica(name, 'A-listen');
    const clockB = new FakeClock({ start: Date.now() });
    const b = replica(name, 'B-listen', { clock: clockB });
    await a.start();
    await b.start();
    expect(b.role).toBe('standby');
    const killed = await admin.query<{ ok: boolean }>(
      "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = 'replica-B-listen' AND query LIKE 'LISTEN%'",
    );
    expect(killed.rows.map((r) => r.ok)).toEqual([true]);
    await a.stop(); // its NOTIFY reaches nobody now
    await clockB.advance(b.renewEveryMs); // the poll (the rule) takes it, and listens again
    await expect.poll(() => b.term?.epoch).toBe(2);
    // A poll that came before B saw its connection drop (a loaded machine) finds it still listening
    // on paper; the next poll listens again. So each look that finds no LISTEN lets one more poll run.
    const listening = async (): Promise<number | null> => {
      const n = (
        await admin.query(
          "SELECT 1 FROM pg_stat_activity WHERE application_name = 'replica-B-listen' AND query LIKE 'LISTEN%'",
        )
      ).rowCount;
      if (n === 0) await clockB.advance(b.renewEveryMs);
      return n;
    };
    await expect.poll(listening, { timeout: 10_000, interval: 200 }).toBe(1);
  });
});
