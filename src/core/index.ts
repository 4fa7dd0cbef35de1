import type { Config } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import { ConfigError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { FileCore } from './file/file-core.js';
import { FineractCore } from './fineract/fineract-core.js';
import type { CoreSystem } from './port.js';

export { createDocumentFetcher } from './documents.js';
export { verifyPackage, readManifest, type PackageManifest } from './file/manifest.js';
export { FileCore } from './file/file-core.js';
export { FineractCore } from './fineract/fineract-core.js';
export * from './port.js';

export interface CoreDeps {
  logger: Logger;
  clock?: Clock;
}

/** Builds the configured core adapter (`core.adapter`). */
export function createCore(config: Config, deps: CoreDeps): CoreSystem {
  const clock = deps.clock ? { clock: deps.clock } : {};
  if (config.core.adapter === 'file') {
    return new FileCore({
      dir: config.core.file.dir,
      csvBatches: config.core.file.csvBatches,
      timeZone: config.bank.timeZone,
      logger: deps.logger,
      ...clock,
    });
  }
  const http = config.core.http;
  if (http === undefined) {
    throw new ConfigError('core.http: required when core.adapter is http (baseUrl, username, password at least)');
  }
  return new FineractCore({
    baseUrl: http.baseUrl,
    username: http.username,
    password: http.password,
    tenantId: http.tenantId,
    officeId: http.officeId,
    timeoutMs: http.timeoutMs,
    approve: http.approve,
    disburse: http.disburse,
    insecureTls: http.insecureTls,
    documents: {
      maxBytes: http.documents.maxBytes,
      refused: http.documents.refused,
      // Keys are matched lower-case: `CSV` and `csv` name the same type.
      refusedByType: Object.fromEntries(Object.entries(http.documents.refusedByType).map(([k, v]) => [k.toLowerCase(), v])),
    },
    logger: deps.logger,
    ...clock,
  });
}
