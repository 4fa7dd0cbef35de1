import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import type { Logger } from '../../src/lib/logger.js';
import { silentLogger } from '../../src/lib/logger.js';
import type { Db } from '../../src/store/db.js';
import { createWebhookService, type WebhookService } from '../../src/webhooks/service.js';

/**
 * The webhook service exactly as `run` composes it (inbox thread, checkpointer, processor,
 * metrics) on `db`, listening on 127.0.0.1 port 0, verifying `secret` (Standard Webhooks), with a
 * platform that is always healthy and lists no endpoints. Started; the caller stops it.
 */
export async function startWebhookService(opts: {
  db: Db;
  dir: string;
  secret: string;
  debounceMs?: number;
  logger?: Logger;
  requestCycle?: (reason: string) => void;
}): Promise<WebhookService> {
  const config = loadConfig({ env: { BOARDING_WEBHOOK_SECRETS: opts.secret } });
  config.webhooks.port = 0;
  config.webhooks.debounceMs = opts.debounceMs ?? 0;
  config.reports.dir = join(opts.dir, 'reports');
  const svc = createWebhookService({
    config,
    db: opts.db,
    platform: { health: () => ({ lastSuccessAt: Date.now(), strikes: 0 }) as never, listWebhookEndpoints: () => Promise.resolve([]) },
    logger: opts.logger ?? silentLogger(),
    requestCycle: opts.requestCycle ?? (() => undefined),
  });
  await svc.start();
  return svc;
}
