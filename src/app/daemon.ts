import { createEditLoopService } from './edit-loop-service.js';
import { imagingStaleAfterMs, numberSource, type Config } from '../config/schema.js';
import type { NumberPoolName } from '../store/identity/numbers.js';
import type { CycleSummary } from '../pipeline/cycle.js';
import { createDaemon, type Daemon, type DaemonJob, type DaemonService } from '../scheduler/daemon.js';
import { batchSealDaemonJob } from './seal-job.js';
import { imagingSealDaemonJob, imagingStagingDir } from './imaging.js';
import { createImagingFolderWatch, type ImagingFolderWatch } from '../imaging/folder-watch.js';
import { reconcileDaemonJob } from '../reports/daemon-job.js';
import { createWebhookService } from './webhook-service.js';
import { createDaemonConsole } from './console.js';
import type { Express } from 'express';
import { every } from '../lib/clock.js';
import { withLinkedSignal } from '../lib/signals.js';
import type { LeadershipView } from '../observability/metrics.js';
import type { BoardingRuntime } from './runtime.js';
import { dirname } from 'node:path';
import { createDiskWatch, type DiskTarget, type DiskWatch } from '../observability/disk-space.js';
import { createClockSkewWatch, type ClockSkewWatch } from '../observability/clock-skew.js';
import type { CoreOutageView } from '../observability/readiness.js';

export interface ConnectorDaemonOptions {
  /** Subscribes to SIGHUP (the mapping reload); returns the unsubscribe. Without it, no SIGHUP reload. */
  onHangup?: (fn: () => void) => () => void;
  /** Runs after the services' own per-cycle hooks (the demo's narration). */
  onCycle?: (summary: CycleSummary) => void | Promise<void>;
  /** Start with a cycle (default true). */
  cycleOnStart?: boolean;
}

/**
 * The daemon `run` starts and `demo` reuses, in one place: the scheduled queue drain and, beside
 * it, in start order,
 * - the edit loop: mapping reload on SIGHUP / mappings.watch, the version other processes see,
 *   operators' early-cycle requests;
 * - the webhook receiver with its inbox processor (early cycles on loan events), the ops pages on
 *   the admin listener, and the endpoint check (schedule.endpointCheck);
 * - the nightly reconcile (schedule.reconcile);
 * - with the file core's batches, the cut-off seal (checked every minute).
 * Services start after the first cycle is scheduled and stop, in reverse order, after in-flight
 * loans settle.
 */
export interface ConnectorDaemon extends Daemon {
  /** The admin listener's base URL once started (ops pages: /healthz, /readyz, /metrics, /reports). */
  adminUrl(): string | null;
}

/** The number pools the connector allocates from (identity.*.source pool). */
export function poolsInUse(config: Pick<Config, 'core' | 'identity'>): NumberPoolName[] {
  const pools: NumberPoolName[] = [];
  if (numberSource(config, 'accountNumbers') === 'pool') pools.push('account');
  if (numberSource(config, 'customerNumbers') === 'pool') pools.push('customer');
  return pools;
}

/**
 * The leader's part of the work, in one place: `work` runs only while this replica leads, with
 * every store write it makes fenced by the current term (store/leadership/leadership.ts guard); on a standby
 * (or once the term has ended) it does not run and `otherwise` is the answer.
 */
export function leaderGate(
  rt: Pick<BoardingRuntime, 'leadership' | 'db'>,
): <T>(work: () => Promise<T>, otherwise: T) => Promise<T> {
  return async (work, otherwise) => {
    if (rt.leadership.term === null) return otherwise;
    return rt.leadership.guard(rt.db, work);
  };
}

/** /readyz's and /metrics' view of this replica's leadership. */
export function leadershipView(rt: Pick<BoardingRuntime, 'leadership'>): LeadershipView {
  const l = rt.leadership;
  return { role: l.role, epoch: l.term?.epoch ?? null, holder: l.holder, acquisitions: l.acquisitions };
}

/** The directories the connector writes to and whose free space it watches (boarding.minFreeDiskMb). */
export function watchedDirs(
  config: Pick<Config, 'store' | 'core'> & Partial<Pick<Config, 'imaging'>>,
): DiskTarget[] {
  const dirs: DiskTarget[] = [];
  if (config.store.engine === 'sqlite') dirs.push({ key: 'store.path', dir: dirname(config.store.path) });
  if (config.core.adapter === 'file') dirs.push({ key: 'core.file.dir', dir: config.core.file.dir });
  if (config.imaging?.enabled) {
    dirs.push({ key: 'imaging.dir', dir: config.imaging.dir });
    dirs.push({ key: 'imaging.stagingDir', dir: imagingStagingDir({ imaging: config.imaging }) });
  }
  return dirs;
}

/** How often the daemon reads the free space (statfs: cheap). */
const DISK_EVERY_MS = 5_000;

/**
 * Faults of the data centre (issue 37): a full disk stops cycles before they start; a host clock
 * off the database's is reported on /readyz and /metrics.
 */
interface FaultWatches {
  disk: DiskWatch | null;
  clockSkew: ClockSkewWatch | null;
  /** The imaging folder: missing, or not drained (imaging.enabled). */
  imagingFolder: ImagingFolderWatch | null;
}

function faultWatches(rt: BoardingRuntime): FaultWatches {
  const minFree = Math.round(rt.config.boarding.minFreeDiskMb * 1024 * 1024);
  const disk: DiskWatch | null =
    minFree > 0
      ? createDiskWatch({
          targets: watchedDirs(rt.config),
          minFreeBytes: minFree,
          clock: rt.clock,
          logger: rt.logger,
        })
      : null;
  const clockSkew = rt.db.dialect.hasServerClock
    ? createClockSkewWatch({
        db: rt.db,
        clock: rt.clock,
        maxSkewMs: rt.config.store.maxClockSkewMs,
        logger: rt.logger,
      })
    : null;
  const imagingFolder = rt.imaging
    ? createImagingFolderWatch({
        dir: rt.imaging.dir,
        readyFile: rt.imaging.readyFile,
        staleAfterMs: imagingStaleAfterMs(rt.config.imaging.staleAfter),
        clock: rt.clock,
        logger: rt.logger,
      })
    : null;
  return { disk, clockSkew, imagingFolder };
}

/** Reads the free space every DISK_EVERY_MS (and the clock skew with it) while the daemon runs. */
function faultWatchService(
  rt: BoardingRuntime,
  watches: FaultWatches,
  triggerCycle: (reason: string) => void,
): DaemonService {
  const { disk, clockSkew, imagingFolder } = watches;
  const readFolder = (): void => {
    void imagingFolder
      ?.refresh()
      .catch((err: unknown) => rt.logger.warn({ err }, 'imaging folder check failed'));
  };
  let diskTimer: { cancel(): void } | null = null;
  return {
    name: 'fault watch',
    start: async () => {
      if (clockSkew) await clockSkew.check();
      readFolder();
      if (!disk) {
        if (imagingFolder) diskTimer = every(rt.clock, DISK_EVERY_MS, readFolder);
        return;
      }
      await disk.refresh().catch((err: unknown) => rt.logger.warn({ err }, 'disk space check failed'));
      diskTimer = every(rt.clock, DISK_EVERY_MS, () => {
        const wasOk = disk.last().ok;
        void disk.refresh().then(
          (s) => {
            // Space is back: board now rather than at the next scheduled drain.
            if (s.ok && !wasOk) triggerCycle('disk space back');
          },
          (err: unknown) => rt.logger.warn({ err }, 'disk space check failed'),
        );
        if (clockSkew) void clockSkew.check();
        readFolder();
      });
    },
    stop: () => {
      diskTimer?.cancel();
    },
  };
}

/** The scheduled jobs: each runs once per schedule, on the leader, fenced. */
function leaderJobs(
  rt: BoardingRuntime,
  endpointCheckJob: DaemonJob,
  gate: ReturnType<typeof leaderGate>,
): DaemonJob[] {
  // Reports, seals, reconciliation and the endpoint check: once per schedule, on the leader, fenced.
  const onLeader = (job: DaemonJob): DaemonJob => ({
    ...job,
    run: (signal) =>
      gate(async () => {
        const term = rt.leadership.signal;
        await (term ? withLinkedSignal([signal, term], (s) => job.run(s)) : job.run(signal));
      }, undefined),
  });
  const jobs: DaemonJob[] = [
    endpointCheckJob,
    reconcileDaemonJob({
      config: rt.config,
      platform: rt.platform,
      reads: rt.store.reports,
      core: rt.core,
      logger: rt.logger,
      clock: rt.clock,
    }),
  ].map(onLeader);
  const seal = batchSealDaemonJob(rt.core, rt.logger);
  if (seal) jobs.push(onLeader(seal));
  const imagingSeal = imagingSealDaemonJob(rt.imaging, rt.logger);
  if (imagingSeal) jobs.push(onLeader(imagingSeal));
  return jobs;
}

export function createConnectorDaemon(
  rt: BoardingRuntime,
  opts: ConnectorDaemonOptions = {},
): ConnectorDaemon {
  let daemon: Daemon | null = null;
  const triggerCycle = (reason: string): void => daemon?.triggerCycle(reason);
  const gate = leaderGate(rt);
  let lastCycleAt: number | null = null;
  let webhooksRef: { readiness(): Promise<unknown> } | null = null;
  // The ops console (console.users): its API and pages on the admin listener, and the executor
  // of approved requests, run after each cycle and when a request is approved.
  // Faults of the data centre (issue 37): a full disk stops cycles before they start; a core
  // outage and a host clock off the database's are reported on /readyz and /metrics.
  const watches = faultWatches(rt);
  const { disk, clockSkew, imagingFolder } = watches;
  let coreOutage: CoreOutageView | null = null;
  const opsConsole = createDaemonConsole(rt, {
    requestCycle: triggerCycle,
    readiness: async () => webhooksRef?.readiness() ?? null,
    lastCycleAt: () => lastCycleAt,
    gate: (pass) => gate(pass, 0),
    role: () => rt.leadership.role,
  });
  const editLoop = createEditLoopService({
    mapper: rt.mapper,
    status: rt.store.daemon,
    clock: rt.clock,
    logger: rt.logger,
    watch: rt.config.mappings.watch,
    onHangup: opts.onHangup ?? (() => () => undefined),
    requestCycle: triggerCycle,
  });
  const tracing = rt.tracing;
  const webhooks = createWebhookService({
    config: rt.config,
    db: rt.db,
    platform: rt.platform,
    logger: rt.logger,
    clock: rt.clock,
    requestCycle: triggerCycle,
    mapping: () => rt.mapper.status(),
    numberPools: () => Promise.all(poolsInUse(rt.config).map((p) => rt.store.numbers.usage(p))),
    customers: () =>
      rt.core.customers?.status() ?? {
        ok: true,
        detail: 'the core offers no existing customers: only customers the connector created are matched',
      },
    ...(opsConsole ? { mountAdmin: (app: Express) => opsConsole.mount(app) } : {}),
    leadership: () => leadershipView(rt),
    gate,
    ...(tracing ? { traces: () => tracing.stats() } : {}),
    faults: {
      ...(disk ? { disk: () => disk.last() } : {}),
      coreOutage: () => coreOutage,
      ...(clockSkew ? { clockSkew: () => clockSkew.check(), clockSkewLast: () => clockSkew.last() } : {}),
    },
    ...(imagingFolder ? { imagingFolder: () => imagingFolder.last() } : {}),
  });
  webhooksRef = webhooks;
  opsConsole?.registerMetrics(webhooks.metrics.registry);
  // Leadership first: the startup cycle finds this replica leading (or standing by), and the lease
  // is released last, after in-flight loans settled, so a standby takes over at once.
  const leaderWork = (): void => {
    // Deliveries another replica stored, and requests approved on another replica's console,
    // wait in the shared state: the leader looks every renew interval.
    webhooks.processor.kick();
    opsConsole?.executor.kick();
  };
  let poll: { cancel(): void } | null = null;
  let running = false;
  const offRole = rt.leadership.onChange((role) => {
    if (role !== 'leader' || !running) return;
    // A takeover (the start's own acquisition is followed by the startup cycle).
    rt.logger.info({ epoch: rt.leadership.term?.epoch }, 'took over: boarding from here');
    triggerCycle('leadership acquired');
    leaderWork();
  });
  const leadershipService: DaemonService = {
    name: 'leadership',
    start: async () => {
      await rt.leadership.start();
      poll = every(rt.clock, rt.leadership.renewEveryMs, () => {
        if (rt.leadership.role === 'leader') leaderWork();
      });
      running = true;
    },
    stop: async () => {
      poll?.cancel();
      offRole();
      await rt.leadership.stop();
    },
  };
  const faultWatch = faultWatchService(rt, watches, triggerCycle);
  const services: DaemonService[] = [faultWatch, leadershipService, editLoop, webhooks];
  if (opsConsole)
    services.push({
      name: 'console',
      start: () => opsConsole.executor.kick(),
      stop: () => opsConsole.executor.stop(),
    });
  const jobs = leaderJobs(rt, webhooks.endpointCheckJob, gate);
  daemon = createDaemon({
    runner: rt.runner,
    logger: rt.logger,
    clock: rt.clock,
    drainSchedule: rt.config.schedule.drain,
    shutdownTimeoutMs: rt.config.boarding.shutdownTimeoutMs,
    services,
    jobs,
    mayCycle: () => rt.leadership.role === 'leader' && (disk === null || disk.last().ok),
    onCycle: async (summary) => {
      lastCycleAt = rt.clock.now();
      if (summary.coreOutage)
        coreOutage = {
          since: coreOutage?.since ?? lastCycleAt,
          failures: summary.coreOutage.failures,
          message: summary.coreOutage.message,
        };
      else if (summary.acknowledged > 0 || summary.attempted > 0) coreOutage = null;
      await webhooks.onCycle(summary);
      opsConsole?.executor.kick();
      await opts.onCycle?.(summary);
    },
    ...(opts.cycleOnStart !== undefined ? { cycleOnStart: opts.cycleOnStart } : {}),
  });
  return Object.assign(daemon, { adminUrl: () => webhooks.adminUrl() });
}
