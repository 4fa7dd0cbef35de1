import type { Config } from '../config/schema.js';
import { FatalError, UsageError } from '../lib/errors.js';
import { loadLayout } from '../mapping-sets/loader.js';
import type { FileBatches } from '../core/file/batches.js';
import type { CoreSystem } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { Layout } from '../core/file/layout/layout.js';
import type { PlatformClient } from '../platform/client.js';
import { createBoardingStore, type BoardingStore } from '../store/index.js';
import { numberPoolsOf } from '../store/identity/numbers.js';
import { openDatabase } from '../store/sqlite/db.js';
import { openStore } from '../store/open.js';
import type { StoreDb } from '../store/sql.js';
import { createDaemonStatusStore } from '../store/daemon-status.js';
import { createCustomerStore } from '../store/identity/customers.js';
import type { MigrationEnds } from '../ops/state.js';
import { storeTarget } from './store-target.js';
import { BOARDING_LEASE } from '../pipeline/cycle.js';
import { openLeadership } from '../store/leadership/leases.js';
import type { LeaseRow } from '../store/leadership/leadership.js';
import { createCore, fileBatchesFromConfig } from './core.js';
import { platformClientFromConfig, rateAdminFor, type RateAdmin } from './platform.js';
import { sqliteStore } from '../store/sqlite/store.js';

/**
 * What a command runs in: its config, logger and clock, and where to register what must be closed
 * when it ends. The CLI context is one; commands ask this module for what they need, so every
 * adapter is built here, in the composition root.
 */
export interface CommandScope {
  config(): Config;
  logger(): Logger;
  readonly clock: Clock;
  onClose(fn: () => Promise<void> | void): void;
}

export interface StateSession {
  db: StoreDb;
  store: BoardingStore;
}

export interface PlatformSession extends StateSession {
  platform: PlatformClient;
}

/** The state database (store.path) and its repositories, closed when the command ends. */
export async function openState(scope: CommandScope): Promise<StateSession> {
  const db = await openStore(storeTarget(scope.config()), {
    onWarning: (m) => scope.logger().warn(m),
    logger: scope.logger(),
  });
  scope.onClose(() => db.close());
  return { db, store: createBoardingStore(db, { numberPools: numberPoolsOf(scope.config().identity) }) };
}

/**
 * The state database and a platform client on it, closed when the command ends. Every command
 * that calls the platform goes through the database: the rate budget and the strike ledger live
 * there, so a CLI command beside the daemon spends from the same budget (on PostgreSQL the one
 * every replica shares).
 */
export async function openPlatformSession(scope: CommandScope): Promise<PlatformSession> {
  const state = await openState(scope);
  const platform = platformClientFromConfig(scope.config(), {
    logger: scope.logger(),
    db: state.db,
    clock: scope.clock,
  });
  scope.onClose(() => platform.close());
  return { ...state, platform };
}

/**
 * Who leads on this state now (the boarding lease as the database sees it), for `state leader`;
 * null when no process ever led. Reads only: it never takes the lease.
 */
export async function readLeader(scope: CommandScope): Promise<(LeaseRow & { ttlMs: number }) | null> {
  const { db } = await openState(scope);
  const l = await openLeadership(db, {
    name: BOARDING_LEASE,
    clock: scope.clock,
    ttlMs: scope.config().store.leadership.ttlMs,
    renewEveryMs: scope.config().store.leadership.renewEveryMs,
  });
  const row = await l.read();
  return row === null ? null : { ...row, ttlMs: l.ttlMs };
}

/**
 * The strike ledger and pauses without a client: `platform status`, `strikes clear`. On
 * PostgreSQL the ledger every replica shares.
 */
export async function openRateAdmin(scope: CommandScope): Promise<RateAdmin> {
  const { db } = await openState(scope);
  const admin = rateAdminFor(scope.config(), db, { clock: scope.clock, logger: scope.logger() });
  scope.onClose(() => admin.close());
  return admin;
}

/**
 * The configured core adapter, closed when the command ends. With the state database, Fineract
 * maps a digested externalId it lists back to the platform id (core_external_refs).
 */
export function openCore(scope: CommandScope, db?: StoreDb): CoreSystem {
  const core = createCore(scope.config(), {
    logger: scope.logger(),
    clock: scope.clock,
    ...(db ? { db } : {}),
  });
  scope.onClose(() => core.close());
  return core;
}

/** The file core's batches over the state database in the given layout; undefined when the config writes none. */
export async function openFileBatches(scope: CommandScope, layout: Layout): Promise<FileBatches | undefined> {
  const { db } = await openState(scope);
  return fileBatchesFromConfig(scope.config(), {
    logger: scope.logger(),
    clock: scope.clock,
    db,
    layout: () => layout,
  });
}

/**
 * The two ends of `state migrate`: the SQLite state at `path` (brought to this connector's schema
 * first, as any command does, so both sides have the same tables) and a PostgreSQL store at `url`
 * with store.postgres's password and TLS settings. Both are closed with the command.
 */
export async function openStateMigration(
  scope: CommandScope,
  path: string,
  url: string,
): Promise<MigrationEnds> {
  const src = openDatabase(path, { onWarning: (m) => scope.logger().warn(m) });
  scope.onClose(() => {
    if (src.open) src.close();
  });
  const pgConf = scope.config().store.postgres;
  const target = await openStore(
    {
      engine: 'postgres',
      url,
      ...(pgConf.password !== undefined ? { password: pgConf.password } : {}),
      ssl: pgConf.ssl,
      ...(pgConf.sslRootCert !== undefined ? { sslRootCert: pgConf.sslRootCert } : {}),
      poolSize: 2,
      connectTimeoutMs: pgConf.connectTimeoutMs,
    },
    { logger: scope.logger(), applicationName: 'boarding-connector state migrate' },
  );
  scope.onClose(() => target.close());
  const srcStore = sqliteStore(src);
  return {
    src,
    target,
    srcDaemons: createDaemonStatusStore(srcStore),
    srcCustomers: createCustomerStore(srcStore),
  };
}

/** `batches …`: the file core's batches in the mapping set's layout; refused when the config writes none. */
export async function openBatches(ctx: CommandScope): Promise<FileBatches> {
  const config = ctx.config();
  if (config.core.adapter !== 'file') throw new UsageError('batches: core.adapter is not file');
  const layout = loadLayout(config.mappings.dir, { timeZone: config.bank.timeZone });
  if (layout === undefined)
    throw new FatalError(
      `batches: the mapping set ${config.mappings.dir} declares no layout.yaml, so the file core writes no batches`,
    );
  const batches = await openFileBatches(ctx, layout);
  if (batches === undefined) throw new FatalError('batches: core.file.csvBatches is false');
  return batches;
}
