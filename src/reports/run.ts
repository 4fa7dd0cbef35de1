import { randomBytes } from 'node:crypto';
import { createReadStream, existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config/schema.js';
import type { CoreSystem } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { PlatformApi } from '../platform/api.js';
import type { ReportReads } from '../store/index.js';
import { batchTieNotes, computeBatchTie } from './batches.js';
import { computeImagingTie, imagingTieNotes } from './imaging.js';
import { computeCustomerDays } from './customers.js';
import { formatWallTime, localDate, localDateTime, wallTimeAt } from '../lib/calendar.js';
import { REVIEW_ITEMS_PER_LOAN, computeReconciliation, type ReconcileSources } from './compute.js';
import { createCsvExceptionWriter } from './csv.js';
import {
  REPORT_FILES,
  createRunDir,
  ensureReportDir,
  openReportStream,
  updateLatest,
  writeFileAtomic,
} from './files.js';
import { UsageError } from '../lib/errors.js';
import { HTML_MAX_ROWS, renderHtml } from './render-html.js';
import { jsonExceptionLine, jsonReportHead, jsonReportTail } from './render-json.js';
import { createReconcileSources, type PlatformWalkStats } from './sources.js';
import type { ReconcileProgress, ReconciliationSummary, ReportException, ReportReviewItem } from './types.js';

export interface RunReconcileDeps {
  config: Pick<Config, 'platform' | 'bank' | 'reports' | 'core'>;
  platform: PlatformApi;
  /** The state database's reads (store.reports). */
  reads: ReportReads;
  core: CoreSystem;
  logger: Logger;
  connectorVersion: string;
  clock: Clock;
  /** ISO lower bound: only loans boarded/acknowledged since (open items always included). */
  since?: string | null;
  /**
   * Write here instead of a new `<reports.dir>/<date>/run-<time>/`; `latest` is then left alone. A
   * folder that already holds a report is refused (reports are never overwritten).
   */
  outDir?: string;
  signal?: AbortSignal;
  onProgress?: (p: ReconcileProgress) => void;
  /** Tests and benchmarks inject sources; by default they are built from platform/db/core. */
  sources?: ReconcileSources;
}

export interface ReconcileRunResult {
  runId: string;
  dir: string;
  files: { json: string; csv: string; html: string };
  /** `<reports.dir>/latest` when it was updated. */
  latest: string | null;
  summary: ReconciliationSummary;
}

export function newRunId(nowMs: number): string {
  const stamp = new Date(nowMs)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return `rec-${stamp}-${randomBytes(3).toString('hex')}`;
}

/** The run's folder: `--out` (never one that holds a report), else a new one per run under the day's. */
function reportDirFor(
  deps: RunReconcileDeps,
  asOfMs: number,
): { dir: string; dayDir: string | null; createdDayDir: boolean; createdDir: boolean } {
  const { config, logger } = deps;
  if (deps.outDir !== undefined) {
    const dir = resolve(deps.outDir);
    if (existsSync(join(dir, REPORT_FILES.json)) || existsSync(join(dir, REPORT_FILES.html))) {
      throw new UsageError(
        `--out ${dir} already holds a report; reports are never overwritten: give another folder`,
      );
    }
    const createdDir = !existsSync(dir);
    for (const w of ensureReportDir(dir)) logger.warn(w);
    return { dir, dayDir: null, createdDayDir: false, createdDir };
  }
  const timeZone = config.bank.timeZone;
  // One folder per run: a second run the same day never replaces the first (it may be signed).
  for (const w of ensureReportDir(resolve(config.reports.dir))) logger.warn(w);
  const dayDir = resolve(config.reports.dir, localDate(asOfMs, timeZone));
  const createdDayDir = !existsSync(dayDir);
  for (const w of ensureReportDir(dayDir)) logger.warn(w);
  const dir = createRunDir(dayDir, formatWallTime(wallTimeAt(asOfMs, timeZone), 'HHmmss'));
  return { dir, dayDir, createdDayDir, createdDir: true };
}

/** The report's header: what run, as of when, against which platform and core. */
function reportHeader(
  deps: RunReconcileDeps,
  runId: string,
  asOfMs: number,
  since: string | null,
  mappingVersions: ReconciliationSummary['header']['mappingVersions'],
): ReconciliationSummary['header'] {
  const { config } = deps;
  const timeZone = config.bank.timeZone;
  let platformOrigin: string | null = null;
  try {
    platformOrigin = new URL(config.platform.baseUrl).origin;
  } catch {
    platformOrigin = null;
  }
  return {
    runId,
    asOf: new Date(asOfMs).toISOString(),
    asOfLocal: localDateTime(asOfMs, timeZone),
    timeZone,
    connectorVersion: deps.connectorVersion,
    mappingVersions,
    environment: config.platform.environment,
    platformOrigin,
    coreAdapter: deps.core.name,
    since,
    fundedNotReleasedDays: config.reports.fundedNotReleasedDays,
    ageBasis: 'business days (Monday–Friday, no holiday calendar) in the bank time zone',
  };
}

/**
 * One reconciliation run: platform (boarded loans), connector state and core compared, three files
 * written. Used by the `reconcile` command and by the daemon's nightly schedule
 * (`config.schedule.reconcile`); throws only when a source fails (the partial files are removed).
 */
export async function runReconcile(deps: RunReconcileDeps): Promise<ReconcileRunResult> {
  const { config, logger } = deps;
  const asOfMs = deps.clock.now();
  const timeZone = config.bank.timeZone;
  const since = deps.since ?? null;
  if (since !== null && Number.isNaN(Date.parse(since)))
    throw new Error(`since: expected an ISO 8601 date-time, got ${JSON.stringify(since)}`);
  const runId = newRunId(asOfMs);
  const { dir, dayDir, createdDayDir, createdDir } = reportDirFor(deps, asOfMs);
  const files = {
    json: join(dir, REPORT_FILES.json),
    csv: join(dir, REPORT_FILES.csv),
    html: join(dir, REPORT_FILES.html),
  };
  const csvTmp = `${files.csv}.tmp-${runId}`;
  const csv = createCsvExceptionWriter(csvTmp, runId);
  // report.json's exception lines, as they are found; the summary goes before them at the end.
  const jsonLinesTmp = `${files.json}.lines-${runId}`;
  const jsonLines = openReportStream(jsonLinesTmp);
  const jsonTmp = `${files.json}.tmp-${runId}`;
  let exceptionIndex = 0;
  const platformStats: PlatformWalkStats = { pages: 0, invalid: 0 };
  const sources =
    deps.sources ??
    createReconcileSources({
      platform: deps.platform,
      reads: deps.reads,
      core: deps.core,
      since,
      platformStats,
      ...(deps.signal ? { signal: deps.signal } : {}),
    });
  const started = deps.clock.now();
  logger.info({ runId, since, dir }, 'reconciliation started');
  try {
    const outcome = await computeReconciliation(sources, {
      asOfMs,
      timeZone,
      fundedNotReleasedDays: config.reports.fundedNotReleasedDays,
      since,
      onException: async (e: ReportException) => {
        await csv.write(e);
        await jsonLines.write(jsonExceptionLine(e, exceptionIndex++));
      },
      // Only what report.html lists stays in memory; the CSV and the JSON get every exception now.
      keepExceptions: HTML_MAX_ROWS,
      ...(deps.signal ? { signal: deps.signal } : {}),
      ...(deps.onProgress ? { onProgress: deps.onProgress } : {}),
    });
    deps.onProgress?.({ phase: 'write', done: 0, total: 3 });
    // From the state database, like the default sources; injected sources (tests, benchmarks) bring no batches.
    const batchTie = deps.sources ? null : computeBatchTie(await deps.reads.batchTie(asOfMs));
    const customers = deps.sources
      ? null
      : await computeCustomerDays(
          deps.reads,
          since !== null ? Date.parse(since) : asOfMs - 30 * 86_400_000,
          asOfMs,
          timeZone,
        );
    const imagingTie = deps.sources ? null : computeImagingTie(await deps.reads.imagingTie());
    const notes = [...outcome.notes, ...batchTieNotes(batchTie), ...imagingTieNotes(imagingTie)];
    if (platformStats.invalid > 0) {
      notes.push(
        `${platformStats.invalid} boarded item(s) from the platform failed ` +
          `validation and are not reconciled (see the connector log).`,
      );
    }
    const summary: ReconciliationSummary = {
      header: reportHeader(deps, runId, asOfMs, since, outcome.mappingVersions),
      totals: outcome.totals,
      tieOut: outcome.tieOut,
      aging: outcome.aging,
      exceptionCount: outcome.exceptionCount,
      exceptionsByReason: outcome.exceptionsByReason,
      notes,
      ...(batchTie ? { batches: batchTie } : {}),
      ...(imagingTie ? { imaging: imagingTie } : {}),
      ...(customers ? { customers } : {}),
    };
    await csv.close();
    renameSync(csvTmp, files.csv);
    deps.onProgress?.({ phase: 'write', done: 1, total: 3 });
    // Review items were streamed to the CSV; the JSON and HTML look them up again, loan by loan.
    // (Read before rendering: the store answers asynchronously, the renderers are synchronous.)
    const reviewed = new Map<string, ReportReviewItem[]>();
    for (const e of outcome.exceptions) {
      if (e.reason === 'boarded_with_review_items' && !reviewed.has(e.loanId))
        reviewed.set(e.loanId, (await sources.reviewItems?.(e.loanId, REVIEW_ITEMS_PER_LOAN)) ?? []);
    }
    const reviewItems = (loanId: string): ReportReviewItem[] => reviewed.get(loanId) ?? [];
    await jsonLines.close();
    await writeJsonReport(jsonTmp, summary, jsonLinesTmp, outcome.exceptionCount);
    renameSync(jsonTmp, files.json);
    rmSync(jsonLinesTmp, { force: true });
    deps.onProgress?.({ phase: 'write', done: 2, total: 3 });
    writeFileAtomic(
      files.html,
      renderHtml(summary, outcome.exceptions, { reviewItems, exceptionCount: outcome.exceptionCount }),
    );
    deps.onProgress?.({ phase: 'write', done: 3, total: 3 });
    const latest = deps.outDir === undefined ? updateLatest(resolve(config.reports.dir), dir) : null;
    logger.info(
      {
        runId,
        dir,
        loans: outcome.loansSeen,
        exceptions: summary.exceptionCount,
        ties: summary.tieOut.every((c) => c.ties),
        ms: deps.clock.now() - started,
      },
      'reconciliation finished',
    );
    return { runId, dir, files, latest, summary };
  } catch (err) {
    await csv.abort();
    await jsonLines.abort();
    rmSync(csvTmp, { force: true });
    rmSync(jsonLinesTmp, { force: true });
    rmSync(jsonTmp, { force: true });
    // Leave no empty dated folder behind: it would look like a report that lost its files.
    if (createdDir && readdirSync(dir).length === 0) rmSync(dir, { recursive: true, force: true });
    if (dayDir !== null && createdDayDir && readdirSync(dayDir).length === 0)
      rmSync(dayDir, { recursive: true, force: true });
    logger.error({ runId, err }, 'reconciliation failed');
    throw err;
  }
}

/** report.json: the summary, then the exception lines streamed during the run (copied, never held whole). */
async function writeJsonReport(
  path: string,
  summary: ReconciliationSummary,
  linesPath: string,
  count: number,
): Promise<void> {
  const out = openReportStream(path);
  try {
    await out.write(jsonReportHead(summary));
    for await (const chunk of createReadStream(linesPath, { encoding: 'utf8', highWaterMark: 1 << 16 }))
      await out.write(chunk as string);
    await out.write(jsonReportTail(count));
    await out.close();
  } catch (err) {
    await out.abort();
    throw err;
  }
}
