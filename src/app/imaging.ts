import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, normalize, resolve, sep } from 'node:path';
import { durationMs, type Config } from '../config/schema.js';
import { cutoffRule } from '../core/file/cutoff.js';
import type { DocumentFetcher } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import { ConfigError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { ImagingExport } from '../imaging/export.js';
import { compileImagingLayout, type ImagingLayout } from '../imaging/layout.js';
import type { DaemonJob } from '../scheduler/daemon.js';
import { ImagingStore } from '../store/imaging.js';
import type { StoreDb } from '../store/sql.js';

/** Reads a file of the mapping set (never outside it). */
export function setReader(dir: string): (rel: string) => string | undefined {
  const root = resolve(dir);
  return (rel) => {
    if (isAbsolute(rel)) return undefined;
    const full = resolve(root, normalize(rel));
    if (full !== root && !full.startsWith(root + sep)) return undefined;
    try {
      return readFileSync(full, 'utf8');
    } catch {
      return undefined;
    }
  };
}

/** The index layout `imaging.layout` of the mapping set; ConfigError with file:line:column for each problem. */
export function loadImagingLayout(mappingsDir: string, file: string): ImagingLayout {
  const read = setReader(mappingsDir);
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

export function imagingStaleAfterMs(config: Pick<Config, 'imaging'>): number {
  return durationMs(config.imaging.staleAfter);
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
