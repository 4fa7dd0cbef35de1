import type { Config } from '../config/schema.js';
import type { FileBatches } from '../core/file/batches.js';
import type { CoreSystem } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { Layout } from '../core/file/layout/layout.js';
import type { PlatformClient } from '../platform/client.js';
import { openDatabase, type Db } from '../store/db.js';
import { createBoardingStore, type BoardingStore } from '../store/index.js';
import { numberPoolsOf } from '../store/numbers.js';
import { createSqliteRateState, type RateStateStore } from '../store/rate-state.js';
import { createCore, fileBatchesFromConfig } from './core.js';
import { platformClientFromConfig } from './platform.js';

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
  db: Db;
  store: BoardingStore;
}

export interface PlatformSession extends StateSession {
  platform: PlatformClient;
}

/** The state database (store.path) and its repositories, closed when the command ends. */
export function openState(scope: CommandScope): StateSession {
  const db = openDatabase(scope.config().store.path, { onWarning: (m) => scope.logger().warn(m) });
  scope.onClose(() => {
    db.close();
  });
  return { db, store: createBoardingStore(db, { numberPools: numberPoolsOf(scope.config().identity) }) };
}

/**
 * The state database and a platform client on it, closed when the command ends. Every command
 * that calls the platform goes through the database: the rate budget and the strike ledger live
 * there, so a CLI command beside the daemon spends from the same budget.
 */
export function openPlatformSession(scope: CommandScope): PlatformSession {
  const state = openState(scope);
  const platform = platformClientFromConfig(scope.config(), { logger: scope.logger(), db: state.db, clock: scope.clock });
  scope.onClose(() => platform.close());
  return { ...state, platform };
}

/** The rate budget's persisted state (strikes, pauses) without a client: `platform status`, `strikes clear`. */
export function openRateState(scope: CommandScope): RateStateStore {
  const { db } = openState(scope);
  const state = createSqliteRateState(db);
  scope.onClose(() => state.close?.());
  return state;
}

/**
 * The configured core adapter, closed when the command ends. With the state database, Fineract
 * maps a digested externalId it lists back to the platform id (core_external_refs).
 */
export function openCore(scope: CommandScope, db?: Db): CoreSystem {
  const core = createCore(scope.config(), { logger: scope.logger(), clock: scope.clock, ...(db ? { db } : {}) });
  scope.onClose(() => core.close());
  return core;
}

/** The file core's batches over the state database in the given layout; undefined when the config writes none. */
export function openFileBatches(scope: CommandScope, layout: Layout): FileBatches | undefined {
  const { db } = openState(scope);
  return fileBatchesFromConfig(scope.config(), { logger: scope.logger(), clock: scope.clock, db, layout: () => layout });
}
