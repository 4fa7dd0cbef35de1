import { schedule as cronSchedule, validate as cronValidate, type ScheduledTask } from 'node-cron';
import type { Clock, Timer } from '../lib/clock.js';
import { ConfigError, errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { fatalSentence } from '../boarding/board-loan.js';
import type { CycleRunner, CycleSummary } from '../boarding/cycle.js';

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
   * Whether this process may run cycles now (it leads: store/leadership.ts). A standby's ticks and
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
  const { runner, logger, clock } = deps;
  const log = logger.child({ component: 'daemon' });
  assertCron(deps.drainSchedule, 'schedule.drain');
  for (const j of deps.jobs ?? []) assertCron(j.schedule, `schedule.${j.name}`);

  const stopCtl = new AbortController();
  const abortCtl = new AbortController();
  const tasks: ScheduledTask[] = [];
  const startedServices: DaemonService[] = [];
  let current: Promise<void> | null = null;
  let pending: string | null = null;
  let retryTimer: Timer | null = null;
  let last: CycleSummary | null = null;
  let stopping: Promise<void> | null = null;
  let resolveDone!: (e: DaemonExit) => void;
  const done = new Promise<DaemonExit>((r) => {
    resolveDone = r;
  });
  const jobRuns = new Set<Promise<void>>();

  const cronLogger = {
    info: (m: string) => log.debug({ cron: m }, 'cron'),
    warn: (m: string) => log.debug({ cron: m }, 'cron warning'),
    error: (m: string | Error) => log.warn({ cron: errorMessage(m) }, 'cron error'),
    debug: () => undefined,
  };

  async function armRetryTimer(): Promise<void> {
    retryTimer?.cancel();
    retryTimer = null;
    // While writes are stopped, or the core is down, a cycle boards nothing: leave retries to the
    // cron ticks, or an overdue retry (or the loans a stopped pass left queued) would spin cycles
    // (each one a queue read).
    if (stopCtl.signal.aborted || last?.trafficStopped === true || (last?.coreOutage ?? null) !== null)
      return;
    if (deps.mayCycle !== undefined && !deps.mayCycle()) return;
    const at = await runner.nextDueAt();
    if (at === null) return;
    // Cron ticks pick retries up anyway; the timer only matters when a retry is due sooner. Never
    // sooner than a second after the last cycle, whatever the clock says.
    const delay = Math.max(MIN_RETRY_TIMER_MS, at - clock.now() + 25);
    if (delay > 2 ** 31 - 1) return;
    retryTimer = clock.timeout(delay, () => requestCycle('retry due'));
  }

  async function runCycles(reason: string): Promise<void> {
    let why: string | null = reason;
    while (why !== null && !stopCtl.signal.aborted) {
      pending = null;
      try {
        const summary = await runner.run({ reason: why, stop: stopCtl.signal, abort: abortCtl.signal });
        last = summary;
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
          `cycle: ${summary.acknowledged} boarded, ${summary.retryWait} to retry, ${Object.values(summary.quarantined).reduce((a, b) => a + b, 0)} quarantined in ${summary.durationMs} ms`,
        );
        await deps.onCycle?.(summary);
        if (summary.fatal) {
          log.fatal(
            { code: summary.fatal.code },
            `${fatalSentence(summary.fatal.code, summary.fatal.message)}; stopping`,
          );
          resolveDone({ kind: 'fatal', code: summary.fatal.code, message: summary.fatal.message });
          void stop();
          return;
        }
      } catch (err) {
        log.error({ err }, 'boarding cycle failed; the next cycle resumes from the persisted state');
      }
      why = pending;
    }
  }

  function requestCycle(reason: string): void {
    if (stopCtl.signal.aborted) return;
    if (deps.mayCycle !== undefined && !deps.mayCycle()) {
      log.debug({ reason }, 'standby: no cycle (the leader boards)');
      return;
    }
    if (current) {
      // One follow-up cycle picks up whatever arrived meanwhile; more requests add nothing.
      pending ??= reason;
      return;
    }
    current = runCycles(reason).finally(() => {
      current = null;
      armRetryTimer().catch((err: unknown) =>
        log.warn({ err }, 'could not read the next retry time; the cron ticks pick retries up'),
      );
    });
  }

  async function stop(): Promise<void> {
    stopping ??= (async () => {
      log.info({ timeoutMs: deps.shutdownTimeoutMs }, 'stopping: no new loans; waiting for steps in flight');
      stopCtl.abort(new Error('daemon stopping'));
      retryTimer?.cancel();
      for (const t of tasks) await t.destroy();
      const inFlight = current;
      if (inFlight) {
        let timer: Timer | undefined;
        const timedOut = await Promise.race([
          inFlight.then(() => false),
          new Promise<boolean>((r) => {
            timer = clock.timeout(deps.shutdownTimeoutMs, () => r(true));
          }),
        ]);
        timer?.cancel();
        if (timedOut) {
          log.warn('shutdown timeout: aborting steps in flight (each loan resumes from its persisted state)');
          abortCtl.abort(new Error('shutdown timeout'));
          await inFlight;
        }
      }
      abortCtl.abort(new Error('daemon stopped'));
      await Promise.allSettled([...jobRuns]);
      for (const s of startedServices.reverse()) {
        try {
          await s.stop();
        } catch (err) {
          log.warn({ service: s.name, err }, 'service failed to stop cleanly');
        }
      }
      resolveDone({ kind: 'stopped' });
      log.info('stopped');
    })();
    return stopping;
  }

  return {
    async start() {
      const drain = cronSchedule(deps.drainSchedule, () => requestCycle('schedule'), {
        name: 'drain',
        noOverlap: true,
        logger: cronLogger,
      });
      tasks.push(drain);
      for (const job of deps.jobs ?? []) {
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
            logger: cronLogger,
            ...(job.timeZone ? { timezone: job.timeZone } : {}),
          },
        );
        tasks.push(task);
      }
      for (const s of deps.services ?? []) {
        try {
          await s.start();
        } catch (err) {
          // E.g. the webhook port is taken: undo what started so the process can exit (code 1).
          log.error({ service: s.name, err }, 'service failed to start; stopping');
          await stop();
          throw err;
        }
        startedServices.push(s);
        log.info({ service: s.name }, 'service started');
      }
      if (deps.cycleOnStart ?? true) requestCycle('startup');
      log.info(
        { drain: deps.drainSchedule, jobs: (deps.jobs ?? []).map((j) => `${j.name} ${j.schedule}`) },
        'daemon running',
      );
    },
    triggerCycle: (reason) => requestCycle(reason),
    stop,
    done,
    lastSummary: () => last,
    idle: async () => {
      while (current) await current;
    },
  };
}
