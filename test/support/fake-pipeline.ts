import { BOARDING_LEASE, createCycleRunner, type CycleRunner } from '../../src/pipeline/cycle.js';
import { createAccountNumbers, type NumberSource } from '../../src/identity/account-numbers.js';
import type { CustomerResolver } from '../../src/identity/customer-match.js';
import { Leadership, newHolderId } from '../../src/store/leadership/leadership.js';
import { sqliteLeaseBackend } from '../../src/store/leadership/leases.js';
import { silentLogger, type Logger } from '../../src/lib/logger.js';
import { openDatabase, type Db } from '../../src/store/sqlite/db.js';
import { createBoardingStore, type BoardingStore } from '../../src/store/index.js';
import { FakeClock } from './fake-clock.js';
import { FakeCore } from './fake-core.js';
import { FakeMapper } from './fake-mapper.js';
import { FakePlatform } from './fake-platform.js';
import { sqliteStore } from '../../src/store/sqlite/store.js';

export interface FakePipeline {
  db: Db;
  store: BoardingStore;
  platform: FakePlatform;
  mapper: FakeMapper;
  core: FakeCore;
  clock: FakeClock;
  runner: CycleRunner;
  /** A fresh runner over the same database (a restarted process). */
  restart(): CycleRunner;
}

export function fakePipeline(
  opts: {
    dbPath?: string;
    concurrency?: number;
    maxAttempts?: number;
    leaseTtlMs?: number;
    logger?: Logger;
    /** identity.accountNumbers.source (default pool, the file core's). */
    accountNumbers?: NumberSource;
    /** Customer match before create, built over the pipeline's store (absent: none). */
    customers?: (store: BoardingStore, clock: FakeClock) => CustomerResolver;
  } = {},
): FakePipeline {
  const db = openDatabase(opts.dbPath ?? ':memory:');
  const store = createBoardingStore(sqliteStore(db));
  const platform = new FakePlatform();
  const mapper = new FakeMapper();
  const core = new FakeCore();
  const clock = new FakeClock({ sleep: 'auto' });
  const holder = newHolderId();
  const make = (): CycleRunner =>
    createCycleRunner({
      store,
      platform,
      mapper,
      core,
      fetchDocument: () => Promise.reject(new Error('no documents in fakes')),
      clock,
      logger: opts.logger ?? silentLogger(),
      settings: { maxAttempts: opts.maxAttempts ?? 5, retryBaseMs: 1000, retryMaxMs: 60_000 },
      connectorVersion: 'test',
      accountNumbers: createAccountNumbers({
        store,
        source: opts.accountNumbers ?? 'pool',
        logger: opts.logger ?? silentLogger(),
      }),
      random: () => 0,
      ...(opts.customers ? { customers: opts.customers(store, clock) } : {}),
      pageSize: 2,
      concurrency: opts.concurrency ?? 3,
      leadership: new Leadership(sqliteLeaseBackend(sqliteStore(db)), {
        name: BOARDING_LEASE,
        // One holder for every runner of the pipeline: a restart() takes the lease over at once,
        // as a restarted process on this host does from its dead predecessor (a new epoch).
        holder,
        clock,
        // The fake clock jumps minutes between (and inside) cycles with no renew loop running:
        // a lease far longer than any test, unless a test asks for a short one.
        ttlMs: opts.leaseTtlMs ?? 10 * 365 * 86_400_000,
        ...(opts.leaseTtlMs !== undefined ? { renewEveryMs: Math.floor(opts.leaseTtlMs / 4) } : {}),
      }),
    });
  return { db, store, platform, mapper, core, clock, runner: make(), restart: make };
}
