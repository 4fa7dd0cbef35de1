import { join } from 'node:path';
import type { Logger } from '../../src/lib/logger.js';
import type { Db } from '../../src/store/db.js';
import type { WebhookService } from '../../src/webhooks/service.js';
import type * as ConfigModule from '../../src/config/load.js';
import type * as LoggerModule from '../../src/lib/logger.js';
import type * as ServiceModule from '../../src/webhooks/service.js';

/**
 * The webhook service exactly as `run` composes it (inbox thread, checkpointer, processor,
 * metrics) on `db`, listening on 127.0.0.1 port 0, verifying `secret` (Standard Webhooks), with a
 * platform that is always healthy and lists no endpoints. Started; the caller stops it.
 *
 * `build: 'dist'` takes the service from the compiled `dist/` (what `run` ships, no TypeScript
 * loader in the request path or the inbox threads; the benchmark measures that); the default is
 * the sources. `db` must then come from `dist/store/db.js` too.
 */
export async function startWebhookService(opts: {
  db: Db;
  dir: string;
  secret: string;
  debounceMs?: number;
  logger?: Logger;
  requestCycle?: (reason: string) => void;
  build?: 'src' | 'dist';
  /** Adjusts the loaded config before the service is built (limits, ports). */
  configure?: (config: ReturnType<typeof ConfigModule.loadConfig>) => void;
}): Promise<WebhookService> {
  const base = opts.build === 'dist' ? '../../dist' : '../../src';
  const [{ createWebhookService }, { loadConfig }, { silentLogger }] = (await Promise.all([
    import(`${base}/webhooks/service.js`),
    import(`${base}/config/load.js`),
    import(`${base}/lib/logger.js`),
  ])) as [typeof ServiceModule, typeof ConfigModule, typeof LoggerModule];
  const config = loadConfig({ env: { BOARDING_WEBHOOK_SECRETS: opts.secret } });
  config.webhooks.port = 0;
  config.webhooks.debounceMs = opts.debounceMs ?? 0;
  config.reports.dir = join(opts.dir, 'reports');
  config.admin.port = 0;
  opts.configure?.(config);
  const svc = createWebhookService({
    config,
    db: opts.db,
    platform: { health: () => ({ lastSuccessAt: Date.now(), strikes24h: 0, writesStopped: false, stopped: false }) as never, listWebhookEndpoints: () => Promise.resolve([]) },
    logger: opts.logger ?? silentLogger(),
    requestCycle: opts.requestCycle ?? (() => undefined),
  });
  await svc.start();
  return svc;
}
