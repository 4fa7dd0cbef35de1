import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../config/schema.js';
import { cutoffRule } from '../core/file/cutoff.js';
import type { DocumentFetcher } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import { ConfigError, errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { ImagingExport } from '../imaging/export.js';
import { compileImagingLayout, type ImagingLayout } from '../imaging/layout.js';
import type { DaemonJob } from '../scheduler/daemon.js';
import { ImagingStore } from '../store/imaging.js';
import type { StoreDb } from '../store/sql.js';
import type { BoardingStore } from '../store/index.js';
import type { PlatformApi } from '../platform/api.js';
import type { MappingInput } from '../mapping/types.js';
import { readerFor } from '../mapping-sets/loader.js';
import { createImagingStep, type ImagingStep } from '../imaging/step.js';
import { fetchMappingInput, storedItemOrLoan } from '../pipeline/mapping-input.js';
import { createDocumentFetcher } from '../core/documents.js';
import { openPlatformSession, openState, type CommandScope } from './session.js';

/** The index layout `imaging.layout` of the mapping set; ConfigError with file:line:column for each problem. */
export function loadImagingLayout(mappingsDir: string, file: string): ImagingLayout {
  const read = readerFor(mappingsDir);
  const text = read(file);
  if (text === undefined)
    throw new ConfigError(`imaging.layout: ${join(mappingsDir, file)} not found (a file of the mapping set)`);
  const r = compileImagingLayout(file, text, read);
  if (r.layout === undefined) {
    const problems = r.problems.map(
      (p) => `${join(mappingsDir, p.file)}:${p.line}:${p.column}: ${p.message}`,
    );
    throw new ConfigError(
      `imaging layout ${join(mappingsDir, file)} has ${problems.length} problem(s):\n  ${problems.join('\n  ')}`,
      problems,
    );
  }
  return r.layout;
}

export function imagingStagingDir(config: Pick<Config, 'imaging'>): string {
  return config.imaging.stagingDir ?? join(dirname(resolve(config.imaging.dir)), '.imaging-staging');
}

/** The imaging export when `imaging.enabled` (undefined otherwise). */
export function imagingFromConfig(
  config: Config,
  deps: { db: StoreDb; fetchDocument: DocumentFetcher; clock: Clock; logger: Logger; force?: boolean },
): ImagingExport | undefined {
  if (!config.imaging.enabled && deps.force !== true) return undefined;
  const layout = loadImagingLayout(config.mappings.dir, config.imaging.layout);
  if (layout.indexFile.toLowerCase() === config.imaging.readyFile.toLowerCase())
    throw new ConfigError(
      `imaging.readyFile: ${config.imaging.readyFile} is also the layout's index file; the importer would ` +
        `take the folder before it is complete`,
    );
  if (deps.force !== true) {
    // Created once at start; afterwards a folder that disappears is reported (/readyz imaging) and
    // loans wait for it, rather than a local folder being made where a share should be.
    try {
      mkdirSync(config.imaging.dir, { recursive: true, mode: 0o750 });
    } catch (err) {
      throw new ConfigError(
        `imaging.dir: cannot create ${resolve(config.imaging.dir)}: ${errorMessage(err)}`,
      );
    }
  }
  const b = config.imaging.batch;
  return new ImagingExport({
    dir: config.imaging.dir,
    stagingDir: imagingStagingDir(config),
    store: new ImagingStore(deps.db),
    layout: () => layout,
    mode: b.mode,
    rule: cutoffRule({
      cutoff: b.cutoff,
      intervalMinutes: b.intervalMinutes,
      timeZone: config.bank.timeZone,
    }),
    maxDocuments: b.maxDocuments,
    readyFile: config.imaging.readyFile,
    fetchDocument: deps.fetchDocument,
    logger: deps.logger.child({ component: 'imaging' }),
    clock: deps.clock,
  });
}

/** The daemon's imaging job: a batch past its cut-off is written, and any a crash left is finished. */
export function imagingSealDaemonJob(
  exporter: ImagingExport | undefined,
  logger: Logger,
): DaemonJob | undefined {
  if (exporter === undefined) return undefined;
  return {
    name: 'imaging.seal',
    schedule: '* * * * *',
    async run() {
      const written = await exporter.sealDue();
      if (written.length > 0) logger.info({ batches: written }, 'imaging batches written');
    },
  };
}

/** The pipeline's imaging step over an export (the loan read again from the platform when needed). */
export function imagingStep(
  exporter: ImagingExport,
  deps: { platform: PlatformApi; store: BoardingStore; clock: Clock; logger: Logger },
): ImagingStep {
  const { platform } = deps;
  return createImagingStep({
    exporter,
    fetchInput: async (row, signal) =>
      fetchMappingInput(platform, await storedItemOrLoan(platform, row.id, row.queueItem, signal), signal),
    store: deps.store,
    clock: deps.clock,
    logger: deps.logger,
  });
}

/** A loan's mapping input read again for a re-export, with its account number and the CIFs it was boarded with. */
export async function reexportInput(
  deps: { platform: PlatformApi; store: BoardingStore },
  loanId: string,
  signal?: AbortSignal,
): Promise<MappingInput> {
  const row = await deps.store.loans.get(loanId);
  const item = await storedItemOrLoan(deps.platform, loanId, row?.queueItem ?? null, signal);
  const input = await fetchMappingInput(deps.platform, item, signal);
  const customers: Record<string, { cif: string | null; matchedBy: string; existing: boolean }> = {};
  for (const c of await deps.store.customers.forLoan(loanId))
    customers[c.entityId] = { cif: c.cif, matchedBy: c.matchedBy, existing: c.existing };
  return {
    ...input,
    identity: { accountNumber: row?.accountNumber ?? null, customers } as NonNullable<
      MappingInput['identity']
    >,
  };
}

/**
 * The imaging export of a CLI command (`imaging list|show|reexport`), on the command's state
 * database; with the platform for a re-export. Works whether or not `imaging.enabled` is on now
 * (batches written while it was stay listable).
 */
export async function openImagingSession(
  scope: CommandScope,
  opts: { platform: boolean },
): Promise<{
  exporter: ImagingExport;
  store: BoardingStore;
  fetchInput?: (loanId: string) => Promise<MappingInput>;
}> {
  const config = scope.config();
  if (!opts.platform) {
    const { db, store } = await openState(scope);
    const exporter = imagingFromConfig(config, {
      db,
      fetchDocument: () => Promise.reject(new Error('imaging: no platform in this command')),
      clock: scope.clock,
      logger: scope.logger(),
      force: true,
    }) as ImagingExport;
    return { exporter, store };
  }
  const { db, store, platform } = await openPlatformSession(scope);
  const fetchDocument = createDocumentFetcher(platform, {
    maxBytes: config.boarding.documentMaxBytes,
    deadlineMs: config.boarding.documentDeadlineMs,
    logger: scope.logger(),
  });
  const exporter = imagingFromConfig(config, {
    db,
    fetchDocument,
    clock: scope.clock,
    logger: scope.logger(),
    force: true,
  }) as ImagingExport;
  return { exporter, store, fetchInput: (loanId) => reexportInput({ platform, store }, loanId) };
}
