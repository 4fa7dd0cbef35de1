import { schedule as cronSchedule, validate as cronValidate, type ScheduledTask } from 'node-cron';
import type { Clock, Timer } from '../lib/clock.js';
import { ConfigError, errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { fatalSentence } from '../pipeline/board-loan.js';
import type { CycleRunner, CycleSummary } from '../pipeline/cycle.js';

/**
 * Something the daemon runs beside the drain: the webhook receiver, the endpoint check… Started
 * in order after the first cycle is scheduled, stopped in reverse order on shutdown.
 */
export interface DaemonService {
  name: string;
  start(): Promise<void> | void;
  stop(): Promise<void> | void;
}

/** A scheduled job other than the drain (the nightly reconcile, the webhook endpoint check). */
export interface DaemonJob {
  name: string;
  /** cron expression (5 fields, or 6 with seconds). */
  schedule: string;
  timeZone?: string;
  run(signal: AbortSignal): Promise<void>;
}

export interface DaemonDeps {
  runner: CycleRunner;
  logger: Logger;
  clock: Clock;
  /** cron expression of the queue drain (config.schedule.drain). */
  drainSchedule: string;
  shutdownTimeoutMs: number;
  services?: DaemonService[];
  jobs?: DaemonJob[];
  /** Run a cycle right after start (default true): a restart resumes without waiting a tick. */
  cycleOnStart?: boolean;
  /** Called after each cycle (metrics, tests). */
  onCycle?: (summary: CycleSummary) => void | Promise<void>;
  /**
   * Whether this process may run cycles now (it leads: store/leadership/leadership.ts). A standby's ticks and
   * requests are dropped; its leadership loop asks for a cycle when it takes over.
   */
  mayCycle?: () => boolean;
}

const MIN_RETRY_TIMER_MS = 1000;

export type DaemonExit = { kind: 'stopped' } | { kind: 'fatal'; code: string; message: string };

export interface Daemon {
  start(): Promise<void>;
  /** Asks for a cycle now (e.g. a loan.funded webhook). Coalesced: one follow-up cycle at most. */
  triggerCycle(reason: string): void;
  /** Graceful stop: no new loans, in-flight steps get shutdownTimeoutMs, then are aborted. */
  stop(): Promise<void>;
  /** Resolves when the daemon stops on its own (fatal platform error) or after stop(). */
  readonly done: Promise<DaemonExit>;
  lastSummary(): CycleSummary | null;
  /** Resolves when the current cycle (if any) has finished. */
  idle(): Promise<void>;
}

export function assertCron(expr: string, key: string): void {
  if (!cronValidate(expr))
    throw new ConfigError(
      `${key}: expected a cron expression (5 fields, or 6 with seconds), got ${JSON.stringify(expr)}`,
    );
}

/**
 * The long-running service: a node-cron drain schedule that never overlaps cycles, early cycles on
 * request, a timer for the earliest persisted retry, extra services and jobs, graceful shutdown.
 */
export function createDaemon(deps: DaemonDeps): Daemon {
  assertCron(deps.drainSchedule, 'schedule.drain');
  for (const j of deps.jobs ?? []) assertCron(j.schedule, `schedule.${j.name}`);
  const log = deps.logger.child({ component: 'daemon' });
  let resolveDone!: (e: DaemonExit) => void;
  const done = new Promise<DaemonExit>((r) => {
    resolveDone = r;
  });
  const d: DaemonState = {
    deps,
    log,
    cronLogger: {
      info: (m: string) => log.debug({ cron: m }, 'cron'),
      warn: (m: string) => log.debug({ cron: m }, 'cron warning'),
      error: (m: string | Error) => log.warn({ cron: errorMessage(m) }, 'cron error'),
      debug: () => undefined,
    },
    stopCtl: new AbortController(),
    abortCtl: new AbortController(),
    tasks: [],
    startedServices: [],
    jobRuns: new Set(),
    current: null,
    pending: null,
    retryTimer: null,
    last: null,
    stopping: null,
    resolveDone,
  };

  return {
    async start() {
      scheduleDrain(d);
      scheduleJobs(d);
      await startServices(d);
      if (deps.cycleOnStart ?? true) requestCycle(d, 'startup');
      log.info(
        { drain: deps.drainSchedule, jobs: (deps.jobs ?? []).map((j) => `${j.name} ${j.schedule}`) },
        'daemon running',
      );
    },
    triggerCycle: (reason) => requestCycle(d, reason),
    stop: () => stopDaemon(d),
    done,
    lastSummary: () => d.last,
    idle: async () => {
      while (d.current) await d.current;
    },
  };
}

/** One daemon's moving parts, shared by its jobs: the drain, the retry timer, the jobs, the services, the stop. */
interface DaemonState {
  readonly deps: DaemonDeps;
  readonly log: Logger;
  readonly cronLogger: {
    info(m: string): void;
    warn(m: string): void;
    error(m: string | Error): void;
    debug(): void;
  };
  /** Aborted on stop: no new loans, cycles or jobs. */
  readonly stopCtl: AbortController;
  /** Aborted when the shutdown timeout passes (then after the stop): steps in flight give up. */
  readonly abortCtl: AbortController;
  readonly tasks: ScheduledTask[];
  readonly startedServices: DaemonService[];
  readonly jobRuns: Set<Promise<void>>;
  /** The cycles running now (a follow-up included). */
  current: Promise<void> | null;
  /** Why a follow-up cycle was asked for while one ran. */
  pending: string | null;
  retryTimer: Timer | null;
  last: CycleSummary | null;
  stopping: Promise<void> | null;
  readonly resolveDone: (e: DaemonExit) => void;
}

// --- the drain -----------------------------------------------------------------------------------

function scheduleDrain(d: DaemonState): void {
  const drain = cronSchedule(d.deps.drainSchedule, () => requestCycle(d, 'schedule'), {
    name: 'drain',
    noOverlap: true,
    logger: d.cronLogger,
  });
  d.tasks.push(drain);
}

function requestCycle(d: DaemonState, reason: string): void {
  if (d.stopCtl.signal.aborted) return;
  if (d.deps.mayCycle !== undefined && !d.deps.mayCycle()) {
    d.log.debug({ reason }, 'standby: no cycle (the leader boards)');
    return;
  }
  if (d.current) {
    // One follow-up cycle picks up whatever arrived meanwhile; more requests add nothing.
    d.pending ??= reason;
    return;
  }
  d.current = runCycles(d, reason).finally(() => {
    d.current = null;
    armRetryTimer(d).catch((err: unknown) =>
      d.log.warn({ err }, 'could not read the next retry time; the cron ticks pick retries up'),
    );
  });
}

async function runCycles(d: DaemonState, reason: string): Promise<void> {
  const { deps, log, stopCtl } = d;
  let why: string | null = reason;
  while (why !== null && !stopCtl.signal.aborted) {
    d.pending = null;
    try {
      const summary = await deps.runner.run({ reason: why, stop: stopCtl.signal, abort: d.abortCtl.signal });
      d.last = summary;
      logCycle(log, summary);
      await deps.onCycle?.(summary);
      if (summary.fatal) {
        log.fatal(
          { code: summary.fatal.code },
          `${fatalSentence(summary.fatal.code, summary.fatal.message)}; stopping`,
        );
        d.resolveDone({ kind: 'fatal', code: summary.fatal.code, message: summary.fatal.message });
        void stopDaemon(d);
        return;
      }
    } catch (err) {
      log.error({ err }, 'boarding cycle failed; the next cycle resumes from the persisted state');
    }
    why = d.pending;
  }
}

function logCycle(log: Logger, summary: CycleSummary): void {
  const quarantined = Object.values(summary.quarantined).reduce((a, b) => a + b, 0);
  log.info(
    {
      cycle: {
        reason: summary.reason,
        durationMs: summary.durationMs,
        walked: summary.walk.items,
        newLoans: summary.walk.newLoans,
        walkComplete: summary.walk.complete,
        attempted: summary.attempted,
        acknowledged: summary.acknowledged,
        retryWait: summary.retryWait,
        quarantined: summary.quarantined,
        interrupted: summary.interrupted,
        trafficStopped: summary.trafficStopped,
        ...(summary.busy ? { busy: summary.busy } : {}),
        ...(summary.coreOutage ? { coreOutage: summary.coreOutage } : {}),
        ...(summary.leaseLost ? { leaseLost: true } : {}),
        ...(summary.walk.stillListedAfterAck > 0
          ? {
              stillListedAfterAck: summary.walk.stillListedAfterAck,
              stillListedChanged: summary.walk.stillListedChanged,
            }
          : {}),
      },
      states: summary.states,
    },
    `cycle: ${summary.acknowledged} boarded, ${summary.retryWait} to retry, ` +
      `${quarantined} quarantined in ${summary.durationMs} ms`,
  );
}

// --- retries due before the next tick ------------------------------------------------------------

async function armRetryTimer(d: DaemonState): Promise<void> {
  const { deps, last } = d;
  d.retryTimer?.cancel();
  d.retryTimer = null;
  // While writes are stopped, or the core is down, a cycle boards nothing: leave retries to the
  // cron ticks, or an overdue retry (or the loans a stopped pass left queued) would spin cycles
  // (each one a queue read).
  if (d.stopCtl.signal.aborted || last?.trafficStopped === true || (last?.coreOutage ?? null) !== null)
    return;
  if (deps.mayCycle !== undefined && !deps.mayCycle()) return;
  const at = await deps.runner.nextDueAt();
  if (at === null) return;
  // Cron ticks pick retries up anyway; the timer only matters when a retry is due sooner. Never
  // sooner than a second after the last cycle, whatever the clock says.
  const delay = Math.max(MIN_RETRY_TIMER_MS, at - deps.clock.now() + 25);
  if (delay > 2 ** 31 - 1) return;
  d.retryTimer = deps.clock.timeout(delay, () => requestCycle(d, 'retry due'));
}

// --- the other scheduled jobs and the services ---------------------------------------------------

function scheduleJobs(d: DaemonState): void {
  const { log, stopCtl, jobRuns } = d;
  for (const job of d.deps.jobs ?? []) {
    const task = cronSchedule(
      job.schedule,
      async () => {
        const p = job
          .run(stopCtl.signal)
          .catch((err: unknown) => log.error({ job: job.name, err }, 'scheduled job failed'));
        jobRuns.add(p);
        await p.finally(() => jobRuns.delete(p));
      },
      {
        name: job.name,
        noOverlap: true,
        logger: d.cronLogger,
        ...(job.timeZone ? { timezone: job.timeZone } : {}),
      },
    );
    d.tasks.push(task);
  }
}

async function startServices(d: DaemonState): Promise<void> {
  for (const s of d.deps.services ?? []) {
    try {
      await s.start();
    } catch (err) {
      // E.g. the webhook port is taken: undo what started so the process can exit (code 1).
      d.log.error({ service: s.name, err }, 'service failed to start; stopping');
      await stopDaemon(d);
      throw err;
    }
    d.startedServices.push(s);
    d.log.info({ service: s.name }, 'service started');
  }
}

// --- the stop ------------------------------------------------------------------------------------

function stopDaemon(d: DaemonState): Promise<void> {
  const { deps, log } = d;
  d.stopping ??= (async () => {
    log.info({ timeoutMs: deps.shutdownTimeoutMs }, 'stopping: no new loans; waiting for steps in flight');
    d.stopCtl.abort(new Error('daemon stopping'));
    d.retryTimer?.cancel();
    for (const t of d.tasks) await t.destroy();
    const inFlight = d.current;
    if (inFlight) await finishOrAbort(d, inFlight);
    d.abortCtl.abort(new Error('daemon stopped'));
    await Promise.allSettled([...d.jobRuns]);
    for (const s of d.startedServices.reverse()) {
      try {
        await s.stop();
      } catch (err) {
        log.warn({ service: s.name, err }, 'service failed to stop cleanly');
      }
    }
    d.resolveDone({ kind: 'stopped' });
    log.info('stopped');
  })();
  return d.stopping;
}

/** Steps in flight get shutdownTimeoutMs to finish, then are aborted (each resumes from its state). */
async function finishOrAbort(d: DaemonState, inFlight: Promise<void>): Promise<void> {
  let timer: Timer | undefined;
  const timedOut = await Promise.race([
    inFlight.then(() => false),
    new Promise<boolean>((r) => {
      timer = d.deps.clock.timeout(d.deps.shutdownTimeoutMs, () => r(true));
    }),
  ]);
  timer?.cancel();
  if (timedOut) {
    d.log.warn('shutdown timeout: aborting steps in flight (each loan resumes from its persisted state)');
    d.abortCtl.abort(new Error('shutdown timeout'));
    await inFlight;
  }
}
