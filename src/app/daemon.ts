import { createEditLoopService } from '../editloop/edit-loop-service.js';
import { numberSource, type Config } from '../config/schema.js';
import type { NumberPoolName } from '../store/numbers.js';
import type { CycleSummary } from '../boarding/cycle.js';
import { createDaemon, type Daemon, type DaemonJob, type DaemonService } from '../scheduler/daemon.js';
import { batchSealDaemonJob } from './seal-job.js';
import { reconcileDaemonJob } from '../reports/daemon-job.js';
import { createWebhookService } from './webhook-service.js';
import { createDaemonConsole } from './console.js';
import type { Express } from 'express';
import type { BoardingRuntime } from './runtime.js';

export interface ConnectorDaemonOptions {
  /** Subscribes to SIGHUP (the mapping reload); returns the unsubscribe. Without it, no SIGHUP reload. */
  onHangup?: (fn: () => void) => () => void;
  /** Runs after the services' own per-cycle hooks (the demo's narration). */
  onCycle?: (summary: CycleSummary) => void;
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

export function createConnectorDaemon(rt: BoardingRuntime, opts: ConnectorDaemonOptions = {}): ConnectorDaemon {
  let daemon: Daemon | null = null;
  const triggerCycle = (reason: string): void => daemon?.triggerCycle(reason);
  let lastCycleAt: number | null = null;
  let webhooksRef: { readiness(): Promise<unknown> } | null = null;
  // The ops console (console.users): its API and pages on the admin listener, and the executor
  // of approved requests, run after each cycle and when a request is approved.
  const opsConsole = createDaemonConsole(rt, { requestCycle: triggerCycle, readiness: async () => webhooksRef?.readiness() ?? null, lastCycleAt: () => lastCycleAt });
  const editLoop = createEditLoopService({
    mapper: rt.mapper,
    status: rt.store.daemon,
    clock: rt.clock,
    logger: rt.logger,
    watch: rt.config.mappings.watch,
    onHangup: opts.onHangup ?? (() => () => undefined),
    requestCycle: triggerCycle,
  });
  const webhooks = createWebhookService({
    config: rt.config,
    db: rt.db,
    platform: rt.platform,
    logger: rt.logger,
    clock: rt.clock,
    requestCycle: triggerCycle,
    mapping: () => rt.mapper.status(),
    numberPools: () => poolsInUse(rt.config).map((p) => rt.store.numbers.usage(p)),
    customers: () => rt.core.customers?.status() ?? { ok: true, detail: 'the core offers no existing customers: only customers the connector created are matched' },
    ...(opsConsole ? { mountAdmin: (app: Express) => opsConsole.mount(app) } : {}),
  });
  webhooksRef = webhooks;
  const services: DaemonService[] = [editLoop, webhooks];
  if (opsConsole) services.push({ name: 'console', start: () => opsConsole.executor.kick(), stop: () => opsConsole.executor.stop() });
  const jobs: DaemonJob[] = [
    webhooks.endpointCheckJob,
    reconcileDaemonJob({ config: rt.config, platform: rt.platform, reads: rt.store.reports, core: rt.core, logger: rt.logger, clock: rt.clock }),
  ];
  const seal = batchSealDaemonJob(rt.core, rt.logger);
  if (seal) jobs.push(seal);
  daemon = createDaemon({
    runner: rt.runner,
    logger: rt.logger,
    clock: rt.clock,
    drainSchedule: rt.config.schedule.drain,
    shutdownTimeoutMs: rt.config.boarding.shutdownTimeoutMs,
    services,
    jobs,
    onCycle: (summary) => {
      lastCycleAt = rt.clock.now();
      webhooks.onCycle(summary);
      opsConsole?.executor.kick();
      opts.onCycle?.(summary);
    },
    ...(opts.cycleOnStart !== undefined ? { cycleOnStart: opts.cycleOnStart } : {}),
  });
  return Object.assign(daemon, { adminUrl: () => webhooks.adminUrl() });
}
