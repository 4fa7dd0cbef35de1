import type { Config } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import { ConfigError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { join } from 'node:path';
import type { Layout } from '../core/file/layout/layout.js';
import type { StoreDb } from '../store/sql.js';
import { createExternalRefStore } from '../store/identity/external-refs.js';
import { FileBatches } from '../core/file/batches.js';
import { FileBatchStore } from '../store/file-batches.js';
import { cutoffRule } from '../core/file/cutoff.js';
import { FileCore } from '../core/file/file-core.js';
import { FineractCore } from '../core/fineract/fineract-core.js';
import { MambuCore } from '../core/mambu/mambu-core.js';
import type { CoreSystem } from '../core/port.js';
import { CustomerExtract } from '../core/file/customer-extract.js';
import type { CustomerKeys } from '../lib/customer-keys.js';

export interface CoreDeps {
  logger: Logger;
  clock: Clock;
  /**
   * The state database and the layout of the mapping set in use (asked at each board: a reload may
   * change it): the file core's sealed batches need both.
   */
  db?: StoreDb;
  layout?: () => Layout | undefined;
  /** The keyed hashes of customer match: the file core's customer extract is indexed by them. */
  customerKeys?: CustomerKeys;
}

/** The file core's batches, when config and mapping set ask for them (undefined otherwise). */
export function fileBatchesFromConfig(config: Config, deps: CoreDeps): FileBatches | undefined {
  const first = deps.layout?.();
  if (!config.core.file.csvBatches || first === undefined || deps.db === undefined) return undefined;
  let layout = first;
  const b = config.core.file.batch;
  const clash = first.files.find((f) => f.name.toLowerCase() === b.triggerFile.toLowerCase());
  if (clash)
    throw new ConfigError(
      `core.file.batch.triggerFile: ${b.triggerFile} is also a file of the layout (layout.yaml); the import job ` +
        `would start before the batch is complete`,
    );
  const current = deps.layout;
  return new FileBatches({
    root: join(config.core.file.dir, 'batches'),
    store: new FileBatchStore(deps.db),
    // A set reloaded without a layout.yaml keeps the last one: batches, once on, stay on until a restart.
    layout: () => (layout = current?.() ?? layout),
    rule: cutoffRule({
      cutoff: b.cutoff,
      intervalMinutes: b.intervalMinutes,
      timeZone: config.bank.timeZone,
    }),
    triggerFile: b.triggerFile,
    logger: deps.logger.child({ component: 'core.file.batches' }),
    clock: deps.clock,
  });
}

/** Builds the configured core adapter (`core.adapter`). */
export function createCore(config: Config, deps: CoreDeps): CoreSystem {
  if (config.core.adapter === 'file') {
    const extract = config.customers.extract;
    // Without the hash key (commands that do not board: reconcile, batches) the extract is not read.
    return new FileCore({
      dir: config.core.file.dir,
      customers:
        extract === undefined || deps.customerKeys === undefined
          ? undefined
          : new CustomerExtract({
              path: extract.path,
              maxAgeHours: extract.maxAgeHours,
              layout: {
                header: extract.layout.header,
                delimiter: extract.layout.delimiter,
                columns: extract.layout.columns,
              },
              keys: deps.customerKeys,
              clock: deps.clock,
              logger: deps.logger.child({ component: 'customers.extract' }),
            }),
      batches: fileBatchesFromConfig(config, deps),
      timeZone: config.bank.timeZone,
      logger: deps.logger,
      clock: deps.clock,
    });
  }
  if (config.core.adapter === 'mambu') {
    const m = config.core.mambu;
    if (m === undefined)
      throw new ConfigError('core.mambu: required when core.adapter is mambu (baseUrl and auth at least)');
    return new MambuCore({
      baseUrl: m.baseUrl,
      auth: m.auth,
      disburseAuth: m.disburseAuth,
      timeoutMs: m.timeoutMs,
      insecureTls: m.insecureTls,
      maxResponseBytes: m.maxResponseBytes,
      approve: m.approve,
      disburse: m.disburse,
      branchKey: m.branchKey,
      taxIdField: m.taxIdField,
      loanRefField: m.loanRefField,
      timeZone: m.timeZone ?? config.bank.timeZone,
      documents: m.documents,
      externalRefs: deps.db ? createExternalRefStore(deps.db) : undefined,
      logger: deps.logger,
      clock: deps.clock,
    });
  }
  const http = config.core.http;
  if (http === undefined) {
    throw new ConfigError(
      'core.http: required when core.adapter is http (baseUrl, username, password at least)',
    );
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
    ...(deps.db ? { externalRefs: createExternalRefStore(deps.db) } : {}),
    insecureTls: http.insecureTls,
    maxResponseBytes: http.maxResponseBytes,
    documents: {
      maxBytes: http.documents.maxBytes,
      refused: http.documents.refused,
      // Keys are matched lower-case: `CSV` and `csv` name the same type.
      refusedByType: Object.fromEntries(
        Object.entries(http.documents.refusedByType).map(([k, v]) => [k.toLowerCase(), v]),
      ),
    },
    logger: deps.logger,
    clock: deps.clock,
  });
}
