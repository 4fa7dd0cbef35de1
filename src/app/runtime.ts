import { numberSource, type Config } from '../config/schema.js';
import { imagingFromConfig, imagingStep } from './imaging.js';
import type { ImagingExport } from '../imaging/export.js';
import { ConfigError } from '../lib/errors.js';
import { createAccountNumbers, createPoolWatch, type AccountNumbers } from '../identity/account-numbers.js';
import { createCore } from './core.js';
import type { CoreSystem, DocumentFetcher } from '../core/port.js';
import { createDocumentFetcher } from '../core/documents.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { MapperOptions } from '../mapping/compile.js';
import { loadMapper, type SetMapper as Mapper } from '../mapping-sets/loader.js';
import { createReloadableMapper, type ReloadableMapper } from '../ops/mapping-reload.js';
import type { PlatformApi } from '../platform/api.js';
import { platformClientFromConfig } from './platform.js';
import { CONNECTOR_VERSION } from '../version.js';
import { openStore } from '../store/open.js';
import type { StoreDb } from '../store/sql.js';
import { storeTarget } from './store-target.js';
import { createBoardingStore, type BoardingStore } from '../store/index.js';
import { numberPoolsOf } from '../store/identity/numbers.js';
import { CustomerKeys } from '../lib/customer-keys.js';
import { createCustomerResolver, type CustomerResolver } from '../identity/customer-match.js';
import { tinHashKey } from './tin-key.js';
import { BOARDING_LEASE, createCycleRunner, type CycleRunner } from '../pipeline/cycle.js';
import { openLeadership } from '../store/leadership/leases.js';
import type { Leadership } from '../store/leadership/leadership.js';
import { startTracing, tracingSettings, type Tracing } from '../observability/tracing.js';

/** Everything a boarding command needs, built from the config in one place (sync, run, demo). */
export interface BoardingRuntime {
  config: Config;
  db: StoreDb;
  store: BoardingStore;
  platform: PlatformApi;
  /** The mapping set in use; `run` reloads it on SIGHUP / file change (mapping-reload.ts). */
  mapper: ReloadableMapper;
  core: CoreSystem;
  fetchDocument: DocumentFetcher;
  runner: CycleRunner;
  /**
   * Who boards among the processes sharing this state (store.leadership): a cycle runs only on the
   * leader, fenced. `run` starts its renew/poll loop; `sync --once` tries once per cycle.
   */
  leadership: Leadership;
  /** The loan's core account number: the pool or the core (identity.accountNumbers). */
  accountNumbers: AccountNumbers;
  /** Customer match before create (identity/customer-match.ts). */
  customers: CustomerResolver;
  /** The imaging export (imaging.enabled; src/imaging): undefined when off. */
  imaging?: ImagingExport | undefined;
  clock: Clock;
  logger: Logger;
  /** OpenTelemetry traces (telemetry.*, OTEL_EXPORTER_OTLP_*): null when off. */
  tracing: Tracing | null;
  /** Closes the platform client, the core and the database (in that order), then flushes the traces. */
  close(): Promise<void>;
}

export interface RuntimeOverrides {
  clock: Clock;
  /** Replace an adapter (tests, the demo). */
  platform?: PlatformApi;
  core?: CoreSystem;
  mapper?: Mapper;
  /** The state store, already open (`run` waits for it: src/app/store-wait.ts); closed with the runtime. */
  db?: StoreDb;
  /** The environment the OTEL_* variables are read from; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
}

/** The bank's mapping options from config (fixtures use their own). */
export function mapperOptionsFromConfig(config: Pick<Config, 'bank' | 'mappings'>): MapperOptions {
  return {
    timeZone: config.bank.timeZone,
    allowLast4Tin: config.mappings.allowLast4Tin,
    defaults: config.mappings.defaults,
    timeoutMs: config.mappings.timeoutMs,
    allowUnknownInput: config.mappings.allowUnknownInput,
  };
}

/** Loads (lints and compiles) the mapping set the config names; throws ConfigError listing every problem. */
export function loadMapperFromConfig(config: Config): Promise<Mapper> {
  return loadMapper(config.mappings.dir, mapperOptionsFromConfig(config));
}

/**
 * The pool's numbers must fit wherever the mapping set puts `$accountNumber()` (a fixed-width
 * column, a field's maxLength): otherwise every loan would be refused. Checked at start-up.
 */
export function assertAccountNumbersFit(config: Config, mapper: Pick<Mapper, 'accountNumberSinks'>): void {
  if (numberSource(config, 'accountNumbers') !== 'pool') return;
  const width = config.identity.accountNumbers.pool.width;
  const tight = (mapper.accountNumberSinks ?? []).filter((s) => s.size < width);
  if (tight.length > 0) {
    throw new ConfigError(
      `identity.accountNumbers.pool.width: ${width} characters do not fit ` +
        `${tight.map((t) => `${t.where} (${t.size})`).join(', ')}; narrow the pool (width) or widen the column`,
    );
  }
}

/** Traces first (the first platform and core calls are traced too), then the state database. */
async function tracedStore(
  config: Config,
  logger: Logger,
  overrides: RuntimeOverrides,
): Promise<{ tracing: Tracing | null; db: StoreDb; closeStore: () => Promise<void> }> {
  const settings = tracingSettings(config.telemetry, overrides.env ?? process.env, CONNECTOR_VERSION);
  const tracing = settings && (await startTracing(settings, logger.child({ component: 'traces' })));
  try {
    const db =
      overrides.db ?? (await openStore(storeTarget(config), { onWarning: (m) => logger.warn(m), logger }));
    // The database, then the last spans (those of the shutdown itself too), within a short bound.
    const closeStore = async (): Promise<void> => {
      await db.close();
      await tracing?.shutdown(2_000);
    };
    return { tracing, db, closeStore };
  } catch (err) {
    await tracing?.shutdown();
    throw err;
  }
}

/** Opens the state database and builds the adapters; a broken mapping set fails before anything runs. */
export async function buildRuntime(
  config: Config,
  logger: Logger,
  overrides: RuntimeOverrides,
): Promise<BoardingRuntime> {
  const clock = overrides.clock;
  // A set whose fixed-size places cannot hold the pool's numbers is refused at start and at a reload.
  const load = async (): Promise<Mapper> => {
    const m = await loadMapperFromConfig(config);
    assertAccountNumbersFit(config, m);
    return m;
  };
  const mapper = createReloadableMapper({
    initial: overrides.mapper ?? (await load()),
    dir: config.mappings.dir,
    load: overrides.mapper
      ? () =>
          Promise.reject(new Error('this runtime was given its mapper; there is nothing on disk to reload'))
      : load,
    logger,
    clock,
  });
  // The first thing a bank engineer looks for after an edit: which version this process boards with.
  logger.info(
    { mapping: { version: mapper.version, dir: config.mappings.dir } },
    `mapping set loaded: ${mapper.version}`,
  );
  if (config.core.adapter === 'file' && config.core.file.csvBatches && mapper.layout === undefined) {
    logger.warn(
      { mappingsDir: config.mappings.dir },
      'core.file.csvBatches: the mapping set declares no layout.yaml, so no batch files are written',
    );
  }
  const { tracing, db, closeStore } = await tracedStore(config, logger, overrides);
  let platform: PlatformApi | undefined;
  let core: CoreSystem | undefined;
  let store: BoardingStore;
  let customerKeys: CustomerKeys;
  try {
    store = createBoardingStore(db, { numberPools: numberPoolsOf(config.identity) });
    customerKeys = new CustomerKeys(
      tinHashKey(config, logger, { mayGenerate: !(await store.customers.hasKey()) }),
    );
    if ((await store.customers.checkKey(customerKeys.fingerprint(), clock.now())) === 'different') {
      throw new ConfigError(
        "customers.tinHashKey: not the key this state database hashed its customers' tax ids with; with another " +
          'key no repeat borrower would match and each would become a second customer. Restore the original key ' +
          '(or BOARDING_TIN_HASH_KEY)',
      );
    }
    platform = overrides.platform ?? platformClientFromConfig(config, { logger, db, clock });
    core =
      overrides.core ?? createCore(config, { logger, clock, db, layout: () => mapper.layout, customerKeys });
  } catch (err) {
    await platform?.close();
    await closeStore();
    throw err;
  }
  const accountNumbers = createAccountNumbers({
    store,
    source: numberSource(config, 'accountNumbers'),
    logger: logger.child({ component: 'identity' }),
  });
  if (core.customers === undefined) {
    logger.warn(
      'customer match: the core offers no existing customers (file core without customers.extract): only ' +
        'customers the connector created are matched',
    );
  }
  const customerSource = numberSource(config, 'customerNumbers');
  const s = store;
  const watchPools = createPoolWatch(store, logger.child({ component: 'identity' }));
  const customers = createCustomerResolver({
    store,
    directory: core.customers,
    keys: customerKeys,
    newCif: async (key, now) => {
      if (customerSource === 'core') return null;
      const { number, fresh } = await s.numbers.allocate('customer', key, now);
      if (fresh) await watchPools('customer');
      return number;
    },
    onAmbiguous: config.customers.onAmbiguous,
    allowLast4Tin: config.mappings.allowLast4Tin,
    clock,
    logger: logger.child({ component: 'customers' }),
  });
  const leadership = await openLeadership(db, {
    name: BOARDING_LEASE,
    clock,
    logger: logger.child({ component: 'leadership' }),
    ttlMs: config.store.leadership.ttlMs,
    renewEveryMs: config.store.leadership.renewEveryMs,
  });
  const fetchDocument = createDocumentFetcher(platform, {
    maxBytes: config.boarding.documentMaxBytes,
    deadlineMs: config.boarding.documentDeadlineMs,
    logger,
  });
  const imaging = imagingFromConfig(config, { db, fetchDocument, clock, logger });
  const runner = createCycleRunner({
    ...(imaging ? { imaging: imagingStep(imaging, { platform, store, clock, logger }) } : {}),
    store,
    leadership,
    platform,
    mapper,
    core,
    fetchDocument: imaging ? imaging.spoolingFetcher(fetchDocument) : fetchDocument, // one download (imaging)
    clock,
    logger: logger.child({ component: 'boarding' }),
    settings: {
      maxAttempts: config.boarding.maxAttempts,
      retryBaseMs: config.boarding.retryBaseMs,
      retryMaxMs: config.boarding.retryMaxMs,
    },
    connectorVersion: CONNECTOR_VERSION,
    accountNumbers,
    customers,
    pageSize: config.platform.pageSize,
    concurrency: config.boarding.concurrency,
  });
  let closed = false;
  const p = platform;
  const c = core;
  return {
    config,
    db,
    store,
    platform: p,
    mapper,
    core: c,
    fetchDocument,
    runner,
    leadership,
    accountNumbers,
    customers,
    imaging,
    clock,
    logger,
    tracing,
    async close() {
      if (closed) return;
      closed = true;
      // First: the lease is released at once (a standby takes over now, not after the TTL).
      await leadership.stop();
      await Promise.allSettled([p.close(), c.close()]);
      await closeStore();
    },
  };
}
