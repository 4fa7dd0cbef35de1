import { platformClientFromConfig, type PlatformClient } from '../platform/client.js';
import { openDatabase, type Db } from '../store/db.js';
import type { CliContext } from './context.js';

export interface PlatformSession {
  db: Db;
  platform: PlatformClient;
}

/**
 * The state database and a platform client on it, closed when the command ends. Every command
 * that calls the platform goes through the database: the rate budget and the strike ledger live
 * there, so a CLI command beside the daemon spends from the same budget.
 */
export function openPlatformSession(ctx: CliContext): PlatformSession {
  const config = ctx.config();
  const db = openDatabase(config.store.path, { onWarning: (m) => ctx.logger().warn(m) });
  ctx.onClose(() => {
    db.close();
  });
  const platform = platformClientFromConfig(config, { logger: ctx.logger(), db, clock: ctx.clock });
  ctx.onClose(() => platform.close());
  return { db, platform };
}
