import { join } from 'node:path';
import { systemClock } from '../../src/lib/clock.js';
import { loadConfig } from '../../src/config/load.js';
import { silentLogger, type Logger } from '../../src/lib/logger.js';
import type { Db } from '../../src/store/sqlite/db.js';
import { createWebhookService, type WebhookService } from '../../src/app/webhook-service.js';
import { sqliteStore } from '../../src/store/sqlite/store.js';

/**
 * The webhook service as `run` composes it (receiver, processor, metrics, admin listener) on `db`,
 * listening on 127.0.0.1 port 0, verifying `secret` (Standard Webhooks), with a platform that is
 * always healthy and lists no endpoints. Started; the caller stops it.
 */
export async function startWebhookService(opts: {
  db: Db;
  dir: string;
  secret: string;
  debounceMs?: number;
  logger?: Logger;
  requestCycle?: (reason: string) => void;
  /** Adjusts the loaded config before the service is built (limits, ports). */
  configure?: (config: ReturnType<typeof loadConfig>) => void;
}): Promise<WebhookService> {
  const config = loadConfig({
    env: { BOARDING_WEBHOOK_SECRETS: opts.secret },
    fileText: `platform: { baseUrl: "http://127.0.0.1:4010/api", apiKey: pk_test_unused, environment: development }\nstore: { path: ${JSON.stringify(join(opts.dir, 'state.sqlite'))} }\n`,
  });
  config.webhooks.port = 0;
  config.webhooks.debounceMs = opts.debounceMs ?? 0;
  config.reports.dir = join(opts.dir, 'reports');
  config.admin.port = 0;
  opts.configure?.(config);
  const svc = createWebhookService({
    clock: systemClock,
    config,
    db: sqliteStore(opts.db),
    platform: {
      health: () =>
        ({ lastSuccessAt: Date.now(), strikes24h: 0, trafficStopped: false, stopped: false }) as never,
      listWebhookEndpoints: () => Promise.resolve([]),
    },
    logger: opts.logger ?? silentLogger(),
    requestCycle: opts.requestCycle ?? (() => undefined),
  });
  await svc.start();
  return svc;
}
