import type { Config } from '../config/schema.js';
import { adminHostNames } from '../http/allowed-hosts.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { PlatformApi } from '../platform/api.js';
import type { PlatformStats } from '../platform/client.js';
import type { StoreDb } from '../store/sql.js';
import type { PoolUsage } from '../store/identity/numbers.js';
import { createApp } from '../http/app.js';
import {
  checkEndpoints,
  createEndpointWatch,
  type EndpointWatch,
} from '../platform/endpoint/endpoint-check.js';
import { createFundedTimeBackfill } from '../store/funded-time.js';
import {
  INBOX_PRUNE_AFTER_MS,
  UNKNOWN_LOAN_MAX_ROWS,
  createWebhookInbox,
  type WebhookInbox,
} from '../store/inbox.js';
import {
  createConnectorMetrics,
  platformMetricsSources,
  type ConnectorMetrics,
  type CycleOutcome,
  type LeadershipView,
  type MetricsSources,
} from '../observability/metrics.js';
import { createWebhookProcessor, type WebhookProcessor } from '../webhooks/processor.js';
import {
  runReadiness,
  standardReadinessChecks,
  type CheckResult,
  type StandardChecksInput,
} from '../observability/readiness.js';
import type { TraceExportStats } from '../observability/tracing.js';
import type { ClockSkewStatus } from '../observability/clock-skew.js';
import type { ImagingFolderStatus } from '../imaging/folder-watch.js';
import type { Express } from 'express';
import type { LoadedMappingStatus } from '../ops/mapping-reload.js';
import { receiverLimits, startHttpServer, type RunningServer } from '../http/server.js';

export interface WebhookServiceDeps {
  config: Pick<Config, 'webhooks' | 'admin' | 'schedule' | 'reports'>;
  /** The state store (a better-sqlite3 handle is taken as its StoreDb). */
  db: StoreDb;
  platform: Pick<PlatformApi, 'health' | 'listWebhookEndpoints'> & { stats?: () => PlatformStats };
  logger: Logger;
  clock: Clock;
  /** The daemon's early-cycle entry (`daemon.triggerCycle`); may be bound after construction. */
  requestCycle: (reason: string) => void;
  onFunded?: (loanId: string, fundedAt: number) => void;
  metrics?: ConnectorMetrics;
  /** The daemon's mapping set (version, refused reload) for /readyz and /metrics. */
  mapping?: () => LoadedMappingStatus;
  /** Usage of the bank's number pools in use, for /readyz and /metrics. */
  numberPools?: () => Promise<readonly PoolUsage[]>;
  /** The core's customer source for /readyz (customer match). */
  customers?: () => { ok: boolean; detail: string };
  /** Adds routes to the admin listener (the ops console, src/console). */
  mountAdmin?: (app: Express) => void;
  /** This replica's role for /readyz and /metrics (several replicas on one state). */
  leadership?: () => LeadershipView;
  /**
   * Runs the leader's part where it may (on the leader, fenced): inbox passes and the daily
   * housekeeping. Every replica receives and stores deliveries (deduplicated by id in the shared
   * inbox); the leader works them.
   */
  gate?: <T>(work: () => Promise<T>, otherwise: T) => Promise<T>;
  /** Free space, core outage and clock skew for /readyz and /metrics (the daemon's fault watches). */
  faults?: Pick<StandardChecksInput, 'disk' | 'coreOutage' | 'clockSkew'> & {
    clockSkewLast?: () => ClockSkewStatus | null;
  };
  /** The imaging folder's last reading (imaging.enabled). */
  imagingFolder?: () => ImagingFolderStatus;
  /** The trace exporter's counts for /metrics (absent when traces are off). */
  traces?: () => TraceExportStats;
}

/** Shape of the daemon's `DaemonService` and `DaemonJob` (kept structural: no import cycle). */
export interface WebhookService {
  readonly name: string;
  readonly inbox: WebhookInbox;
  readonly processor: WebhookProcessor;
  readonly metrics: ConnectorMetrics;
  readonly endpointWatch: EndpointWatch;
  /** Base URL the receiver is bound to, once started (the platform posts to `${url}/webhooks/platform`). */
  url(): string | null;
  /** Base URL of the ops listener (/readyz, /metrics, /reports/latest), once started. */
  adminUrl(): string | null;
  /** The /readyz checks, run now (the console's status page). */
  readiness(): Promise<{ ready: boolean; checks: Record<string, CheckResult> }>;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** For `createDaemon({ jobs })`: checks our endpoint on `schedule.endpointCheck`. */
  readonly endpointCheckJob: { name: string; schedule: string; run(signal: AbortSignal): Promise<void> };
  /** For `createDaemon({ onCycle })`: records the cycle duration metric, copies funded times onto new loans. */
  onCycle(summary: {
    reason: string;
    durationMs: number;
    fatal: unknown;
    interrupted: number;
  }): Promise<void>;
}

const DAY_MS = 24 * 60 * 60_000;
const PASS_ROWS = 50;
const PRUNE_ROWS = 100;
const PRUNE_PAUSE_MS = 20;
function triggerLabel(reason: string): string {
  if (reason.startsWith('webhook')) return 'webhook';
  if (reason === 'schedule' || reason === 'startup' || reason === 'retry due')
    return reason.replace(' ', '_');
  return 'other';
}

/** What /metrics reads (the store, the inbox, and the gauges the daemon hands in). */
function metricsSources(deps: WebhookServiceDeps, inbox: WebhookInbox): MetricsSources {
  const { stats } = deps.platform;
  return {
    db: deps.db,
    inbox,
    logger: deps.logger.child({ component: 'metrics' }),
    ...(deps.mapping ? { mapping: deps.mapping } : {}),
    ...(deps.numberPools ? { numberPools: deps.numberPools } : {}),
    ...(stats
      ? platformMetricsSources({
          health: () => deps.platform.health(),
          stats: () => stats.call(deps.platform),
        })
      : { platformHealth: () => deps.platform.health() }),
    ...(deps.leadership ? { leadership: deps.leadership } : {}),
    ...(deps.faults?.disk ? { disk: deps.faults.disk } : {}),
    ...(deps.faults?.coreOutage ? { coreOutage: () => deps.faults?.coreOutage?.() != null } : {}),
    ...(deps.faults?.clockSkewLast ? { clockSkew: deps.faults.clockSkewLast } : {}),
    ...(deps.imagingFolder ? { imaging: deps.imagingFolder } : {}),
    ...(deps.traces ? { traces: deps.traces } : {}),
  };
}

/** The /readyz checks (the console's status page runs them too). */
function readinessChecks(deps: WebhookServiceDeps, endpointWatch: EndpointWatch, clock: Clock) {
  return standardReadinessChecks({
    db: deps.db,
    platformHealth: () => deps.platform.health(),
    endpointWatch,
    clock,
    ...(deps.leadership ? { standby: () => deps.leadership?.().role === 'standby' } : {}),
    ...(deps.mapping ? { mapping: deps.mapping } : {}),
    ...(deps.numberPools ? { numberPools: deps.numberPools } : {}),
    ...(deps.customers ? { customers: deps.customers } : {}),
    ...(deps.faults?.disk ? { disk: deps.faults.disk } : {}),
    ...(deps.faults?.coreOutage ? { coreOutage: deps.faults.coreOutage } : {}),
    ...(deps.faults?.clockSkew ? { clockSkew: deps.faults.clockSkew } : {}),
    ...(deps.imagingFolder ? { imaging: deps.imagingFolder } : {}),
  });
}

/**
 * A day's worth of old rows, deleted PRUNE_ROWS at a time with a pause between: a single DELETE
 * would hold the write lock and the event loop for its whole run, and deliveries would wait.
 */
async function pruneInbox(
  ctx: { inbox: WebhookInbox; clock: Clock; logger: Logger; signal: AbortSignal },
  before: number,
): Promise<void> {
  const { inbox, clock, logger, signal } = ctx;
  let total = 0;
  try {
    for (;;) {
      if (signal.aborted) break;
      const n = await inbox.prune(before, PRUNE_ROWS);
      total += n;
      if (n < PRUNE_ROWS) break;
      await clock.sleep(PRUNE_PAUSE_MS);
    }
    const capped = await inbox.capUnknownFunded(UNKNOWN_LOAN_MAX_ROWS);
    if (capped > 0)
      logger.warn(
        { rows: capped, max: UNKNOWN_LOAN_MAX_ROWS },
        'webhook inbox: loan.funded rows of loans the connector ' +
          'never saw were over the bound; the oldest were deleted',
      );
    if (total > 0)
      logger.info({ rows: total, retentionDays: INBOX_PRUNE_AFTER_MS / DAY_MS }, 'webhook inbox pruned');
  } catch (err) {
    logger.warn({ err, rows: total }, 'webhook inbox prune failed; will try tomorrow');
  }
}

/**
 * Everything the `run` command needs for webhooks, in one daemon service: the inbox processor
 * (pending rows from before a restart first), the HTTP server on webhooks.host/port with
 * /webhooks/platform, /healthz, /readyz, /metrics and /reports/latest, and the endpoint check job.
 */
export function createWebhookService(input: WebhookServiceDeps): WebhookService {
  const deps = input;
  const clock = deps.clock;
  const logger = deps.logger.child({ component: 'webhooks' });
  const inbox = createWebhookInbox(deps.db);
  const metrics = deps.metrics ?? createConnectorMetrics({ clock });
  metrics.setSources(metricsSources(deps, inbox));
  const gate = deps.gate ?? (<T>(work: () => Promise<T>) => work());
  const endpointWatch = createEndpointWatch();
  const processor = createWebhookProcessor({
    db: deps.db,
    inbox,
    logger,
    clock,
    debounceMs: deps.config.webhooks.debounceMs,
    requestCycle: (reason) => deps.requestCycle(reason),
    ...(deps.onFunded ? { onFunded: deps.onFunded } : {}),
    // A pass holds the event loop (deliveries wait behind it): ~50 rows keep that near 2 ms.
    batchSize: PASS_ROWS,
    gate: (pass) => gate(pass, 0),
  });
  const appDeps = {
    config: deps.config.webhooks,
    inbox,
    logger,
    clock,
    metrics,
    processor,
    readiness: readinessChecks(deps, endpointWatch, clock),
    reportsDir: deps.config.reports.dir,
    ...(deps.leadership ? { leadership: deps.leadership } : {}),
  };
  // Two listeners: the receiver the platform reaches, and the ops pages on the admin listener.
  const app = createApp({ ...appDeps, surface: 'public' });
  const adminApp = createApp({
    ...appDeps,
    surface: 'admin',
    allowedHosts: adminHostNames(deps.config.admin),
    ...(deps.mountAdmin ? { mountOps: deps.mountAdmin } : {}),
  });
  let server: RunningServer | null = null;
  let adminServer: RunningServer | null = null;
  let firstCheck: Promise<void> = Promise.resolve();
  const stopping = new AbortController();
  const backfill = createFundedTimeBackfill(deps.db, inbox);
  let lastPruneAt = 0;
  let pruning: Promise<void> | null = null;

  return {
    name: 'webhooks',
    inbox,
    processor,
    metrics,
    endpointWatch,
    url: () => server?.url ?? null,
    adminUrl: () => adminServer?.url ?? null,
    readiness: () => runReadiness(appDeps.readiness),
    async start() {
      try {
        await processor.start();
        server = await startHttpServer(
          app,
          deps.config.webhooks.host,
          deps.config.webhooks.port,
          receiverLimits(deps.config.webhooks),
          { host: 'webhooks.host', port: 'webhooks.port' },
        );
        adminServer = await startHttpServer(
          adminApp,
          deps.config.admin.host,
          deps.config.admin.port,
          undefined,
          { host: 'admin.host', port: 'admin.port' },
        );
      } catch (err) {
        await server?.close(0);
        server = null;
        await processor.stop();
        throw err;
      }
      logger.info(
        {
          url: `${server.url}/webhooks/platform`,
          scheme: deps.config.webhooks.scheme,
          secretCount: deps.config.webhooks.secrets.length,
        },
        'webhook receiver listening',
      );
      logger.info(
        { url: adminServer.url, pages: ['/healthz', '/readyz', '/metrics', '/reports/latest'] },
        'admin listener (ops pages) listening',
      );
      // Check our endpoint once now rather than only at the first endpointCheck tick (up to 15 min).
      if (deps.config.webhooks.publicUrl) {
        firstCheck = checkEndpoints(deps.platform, deps.config, logger, {
          watch: endpointWatch,
          clock,
          signal: stopping.signal,
        }).then(() => undefined);
      }
    },
    async stop() {
      stopping.abort(new Error('webhook service stopping'));
      await Promise.all([server?.close(), adminServer?.close()]);
      server = null;
      adminServer = null;
      await pruning;
      await processor.stop();
      await firstCheck;
    },
    endpointCheckJob: {
      name: 'endpointCheck',
      schedule: deps.config.schedule.endpointCheck,
      run: async (signal) => {
        await checkEndpoints(deps.platform, deps.config, logger, { watch: endpointWatch, clock, signal });
      },
    },
    async onCycle(summary) {
      const outcome: CycleOutcome = summary.fatal ? 'error' : summary.interrupted > 0 ? 'aborted' : 'ok';
      metrics.observeCycle(summary.durationMs / 1000, outcome, triggerLabel(summary.reason));
      try {
        const n = await gate(() => backfill.run(clock.now()), 0);
        if (n > 0) logger.debug({ loans: n }, 'funded times copied from the webhook inbox onto new loans');
      } catch (err) {
        logger.warn({ err }, 'funded-time backfill failed; will try after the next cycle');
      }
      // Once a day: drop processed deliveries older than the redelivery window we keep for dedupe.
      const now = clock.now();
      if (now - lastPruneAt >= DAY_MS && !pruning) {
        lastPruneAt = now;
        pruning = gate(
          () => pruneInbox({ inbox, clock, logger, signal: stopping.signal }, now - INBOX_PRUNE_AFTER_MS),
          undefined,
        ).finally(() => {
          pruning = null;
        });
      }
    },
  };
}
