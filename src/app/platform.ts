import type { Config } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { createPlatformClient, type PlatformClient } from '../platform/client.js';
import { createMemoryRateState, rateStateFor, type RateStateStore } from '../store/rate-state.js';
import { toStoreDb, type AnyDb } from '../store/sql.js';

export interface PlatformClientDeps {
  logger: Logger;
  /** State database: the budget and strike ledger persist there (in memory otherwise). */
  db?: AnyDb;
  /** The rate ledger already opened (PostgreSQL: openRateStateFor); else the SQLite db's. */
  rateState?: RateStateStore;
  clock: Clock;
}

/** Builds the client from `config.platform` (environment guard already applied by the loader). */
export function platformClientFromConfig(config: Pick<Config, 'platform'> & { boarding?: Pick<Config['boarding'], 'documentHosts'> }, deps: PlatformClientDeps): PlatformClient {
  const p = config.platform;
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
    documentHosts: { allow: config.boarding?.documentHosts.allow ?? [], allowLoopback: p.environment === 'development' },
    logger: deps.logger,
    rateState: deps.rateState ?? (deps.db ? rateStateFor(toStoreDb(deps.db)) : createMemoryRateState()),
    clock: deps.clock,
  });
}
