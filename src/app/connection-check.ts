import type { Config } from '../config/schema.js';
import type { ConnectionCheckDeps } from '../ops/connection-check.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { openStore } from '../store/open.js';
import { createCore } from './core.js';
import { platformClientFromConfig } from './platform.js';
import { mapperOptionsFromConfig } from './runtime.js';
import { storeTarget, storeTargetName } from './store-target.js';

/**
 * What `config check` runs with (the checks themselves are src/ops/connection-check.ts): the state
 * database the daemon shares, a platform client on it with at most one retry (a check is not worth a
 * long wait; every call goes through the shared budget), and the configured core on it.
 */
export function connectionCheckDeps(
  config: Config,
  base: { logger: Logger; clock: Clock; signal?: AbortSignal },
): ConnectionCheckDeps {
  const { logger, clock } = base;
  const checkConfig: Config = {
    ...config,
    platform: { ...config.platform, maxRetries: Math.min(1, config.platform.maxRetries) },
  };
  return {
    ...base,
    mapperOptions: mapperOptionsFromConfig(config),
    storeName: storeTargetName(config),
    openStateDb: () => openStore(storeTarget(config), { onWarning: (m) => logger.warn(m) }),
    platform: (db) => platformClientFromConfig(checkConfig, { logger, db, clock }),
    core: (db) => createCore(config, { logger, clock, db, layout: () => undefined }),
  };
}
