import { createHash } from 'node:crypto';
import { DEFAULT_PLATFORM_TIMEOUTS, type Config } from '../config/schema.js';
import { isMissingPlatform } from '../config/load.js';
import { ConfigError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { callFlightMs } from '../lib/rate-window.js';
import { allowedPerWindow, STRIKE_WINDOW_MS } from '../platform/rate-budget/budget.js';
import { createPlatformClient, type PlatformClient } from '../platform/client.js';
import { PgSharedRateBudget } from '../store/rate-budget/pg.js';
import type { PgPool } from '../store/pg/pool.js';
import {
  createMemoryRateState,
  type RateBucketName,
  type RateStateStore,
  type StrikeRecord,
} from '../platform/rate-budget/ledger.js';
import { InProcessRateSpend } from '../platform/rate-budget/in-process.js';
import { SharedLedgerRateSpend } from '../platform/rate-budget/shared-ledger.js';
import type { RateSpend } from '../platform/rate-budget/spend.js';
import { rateStateFor } from '../store/rate-budget/sqlite.js';
import type { StoreDb } from '../store/sql.js';

export interface PlatformClientDeps {
  logger: Logger;
  /**
   * State database: the budget and strike ledger persist there (in memory otherwise). With
   * store.engine postgres every process on the API key spends from its shared ledger.
   */
  db?: StoreDb;
  /** The rate state already opened (SQLite); else the db's. */
  rateState?: RateStateStore;
  clock: Clock;
}

/**
 * Whose budget a shared ledger row is: the platform counts limits and strikes per API key, so
 * the ledger is keyed by a fingerprint of the key (never the key itself). Two replicas with the
 * same key share one budget; a new key starts a ledger of its own, as it does on the platform.
 */
export function rateLedgerKey(apiKey: string): string {
  return `key-sha256:${createHash('sha256').update(apiKey, 'utf8').digest('hex').slice(0, 16)}`;
}

/**
 * The rate ledger every process on the API key shares on PostgreSQL (issue 26): the limits are
 * the ones the client's RateBudget would apply alone (documented limit × headroom per window,
 * half of that while a strike counts: allowedPerWindow), so the documented limit holds in every
 * window of its length whatever the number of replicas. A call counts until its answer (at most
 * the client's three timeouts together when its process never books one).
 */
export function sharedRateLedger(
  platform: Pick<Config['platform'], 'apiKey' | 'rateLimit'> & { timeouts?: Config['platform']['timeouts'] },
  pool: PgPool,
  deps: { clock: Clock; logger?: Logger },
): PgSharedRateBudget {
  const r = platform.rateLimit;
  const limits = (perWindow: number): { limit: number; slowLimit: number; windowMs: number } => ({
    limit: allowedPerWindow(perWindow, r.headroom, 0),
    slowLimit: allowedPerWindow(perWindow, r.headroom, 1),
    windowMs: r.windowMs,
  });
  return new PgSharedRateBudget({
    pool,
    key: rateLedgerKey(platform.apiKey),
    limits: { read: limits(r.readsPerWindow), write: limits(r.writesPerWindow) },
    flightMs: callFlightMs(platform.timeouts ?? DEFAULT_PLATFORM_TIMEOUTS),
    clock: deps.clock,
    ...(deps.logger ? { logger: deps.logger } : {}),
  });
}

/** Which store a config keeps its state in: `store.engine` (sqlite when the config names none). */
type StoreKind = { store?: Pick<Config['store'], 'engine'> };

function sharesLedger(config: StoreKind): boolean {
  if (config.store === undefined) return false;
  return config.store.engine === 'postgres';
}

/** The pool of a PostgreSQL state (store.engine postgres), with a clear error when it is not one. */
function ledgerPool(db: StoreDb | undefined): PgPool {
  if (!db?.pool)
    throw new ConfigError(
      `store.engine: postgres, but the state database given is ${db ? db.engine : 'missing'}: ` +
        'the shared rate ledger lives on the PostgreSQL state',
    );
  return db.pool;
}

/**
 * The rate budget's spend strategy, chosen from config (issue 44): with store.engine postgres
 * every process on the API key spends from the ledger they share; else this process decides on its
 * own spend log, kept in the state database (SQLite) or, with none, in memory.
 */
export function rateSpendFor(
  config: Pick<Config, 'platform'> & StoreKind,
  deps: Pick<PlatformClientDeps, 'db' | 'rateState' | 'clock' | 'logger'>,
): RateSpend {
  const flight = { flightMs: callFlightMs(config.platform.timeouts) };
  if (deps.rateState) return new InProcessRateSpend(deps.rateState, flight);
  if (sharesLedger(config))
    return new SharedLedgerRateSpend(
      sharedRateLedger(config.platform, ledgerPool(deps.db), { clock: deps.clock, logger: deps.logger }),
    );
  return new InProcessRateSpend(deps.db ? rateStateFor(deps.db) : createMemoryRateState(), flight);
}

/** Builds the client from `config.platform` (environment guard already applied by the loader). */
export function platformClientFromConfig(
  config: Pick<Config, 'platform'> & StoreKind & { boarding?: Pick<Config['boarding'], 'documentHosts'> },
  deps: PlatformClientDeps,
): PlatformClient {
  const p = config.platform;
  // A config loaded without `platform` (a read-only command's) never gets a client.
  if (isMissingPlatform(p))
    throw new ConfigError('platform: required (this command calls the Loan Platform); the config has none');
  return createPlatformClient({
    baseUrl: p.baseUrl,
    apiKey: p.apiKey,
    rateLimit: p.rateLimit,
    timeouts: p.timeouts,
    maxRetries: p.maxRetries,
    pageSize: p.pageSize,
    httpsDownloadsOnly: p.environment === 'production',
    // The rule of docs/deploy.md "Document downloads": public addresses only, plus the allow-list;
    // development (the local sandbox on 127.0.0.1) adds loopback, never private ranges.
    documentHosts: {
      allow: config.boarding?.documentHosts.allow ?? [],
      allowLoopback: p.environment === 'development',
    },
    logger: deps.logger,
    rateSpend: rateSpendFor(config, deps),
    clock: deps.clock,
  });
}

/** The strike ledger and pauses as an operator sees them: `platform status`, `platform strikes clear`, the console. */
export interface RateAdmin {
  /** Whether every process on the key, on any host, shares this ledger (PostgreSQL). */
  readonly shared: boolean;
  /** Uncleared strikes of the last 24 h, oldest first, and the pauses in force (epoch ms). */
  status(): Promise<{ strikes: StrikeRecord[]; pauses: Array<{ bucket: RateBucketName; until: number }> }>;
  clearStrikes(by: string): Promise<number>;
  close(): void;
}

/**
 * The strike ledger of the state database: on SQLite its per-host tables, on PostgreSQL
 * (store.engine postgres) the ledger shared by every replica (a clear there resumes every replica
 * at its next call).
 */
export function rateAdminFor(
  config: { platform: Pick<Config['platform'], 'apiKey' | 'rateLimit'> } & StoreKind,
  db: StoreDb,
  deps: { clock: Clock; logger?: Logger },
): RateAdmin {
  if (sharesLedger(config)) {
    const ledger = sharedRateLedger(config.platform, ledgerPool(db), deps);
    return {
      shared: true,
      status: async () => ({
        strikes: await ledger.strikeList(),
        pauses: (await ledger.pauseList()).map(({ bucket, until }) => ({ bucket, until })),
      }),
      clearStrikes: (by) => ledger.clearStrikes(by),
      close: () => {},
    };
  }
  const state = rateStateFor(db);
  return {
    shared: false,
    status: () => {
      const now = deps.clock.now();
      const pauses = (['read', 'write'] as const).flatMap((bucket) => {
        const until = state.loadPause(bucket);
        return until !== null && until > now ? [{ bucket, until }] : [];
      });
      return Promise.resolve({ strikes: state.activeStrikes(now - STRIKE_WINDOW_MS), pauses });
    },
    clearStrikes: (by) => Promise.resolve(state.clearStrikes(by, deps.clock.now())),
    close: () => state.close?.(),
  };
}
