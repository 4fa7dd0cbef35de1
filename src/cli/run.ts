import type { Command } from 'commander';
import { refusedBy } from '../boarding/board-loan.js';
import type { CycleSummary } from '../boarding/cycle.js';
import type { DaemonJob, DaemonService } from '../boarding/daemon.js';
import { buildRuntime, createBoardingDaemon, type BoardingRuntime } from '../boarding/wiring.js';
import { FatalError } from '../lib/errors.js';
import type { CliContext } from './context.js';
import { webhooksDaemonPlugin } from './webhooks.js';
import { reconcilePlugin } from './reconcile.js';
import { batchesDaemonPlugin } from './batches.js';

/** What a plugin may use: the runtime, and a way to ask for an early queue cycle. */
export interface DaemonHooks {
  triggerCycle(reason: string): void;
}

/**
 * Something that runs beside the queue drain in `run`: the webhook receiver (+ inbox processor,
 * endpoint check) and the nightly reconcile add themselves to DAEMON_PLUGINS below. Services start
 * after the first cycle is scheduled and stop, in reverse order, after in-flight loans settle.
 */
export interface DaemonPluginParts {
  services?: DaemonService[];
  jobs?: DaemonJob[];
  /** Called after each cycle (e.g. the cycle-duration metric). */
  onCycle?: (summary: CycleSummary) => void;
}
export type DaemonPlugin = (rt: BoardingRuntime, hooks: DaemonHooks, ctx: CliContext) => DaemonPluginParts | Promise<DaemonPluginParts>;

/** Plugins of `run`, in start order. Add yours here (one line). */
export const DAEMON_PLUGINS: DaemonPlugin[] = [webhooksDaemonPlugin, reconcilePlugin, batchesDaemonPlugin];

/**
 * The daemon with every plugin attached: what `run` starts and what `demo` reuses. `onCycle`
 * runs after the plugins' own per-cycle hooks.
 */
export async function createPluggedDaemon(
  rt: BoardingRuntime,
  ctx: CliContext,
  opts: { onCycle?: (summary: CycleSummary) => void } = {},
): Promise<ReturnType<typeof createBoardingDaemon>> {
  let daemonRef: { triggerCycle(reason: string): void } | null = null;
  const hooks: DaemonHooks = { triggerCycle: (reason) => daemonRef?.triggerCycle(reason) };
  const services: DaemonService[] = [];
  const jobs: DaemonJob[] = [];
  const onCycles: Array<(summary: CycleSummary) => void> = [];
  for (const plugin of DAEMON_PLUGINS) {
    const part = await plugin(rt, hooks, ctx);
    services.push(...(part.services ?? []));
    jobs.push(...(part.jobs ?? []));
    if (part.onCycle) onCycles.push(part.onCycle);
  }
  if (opts.onCycle) onCycles.push(opts.onCycle);
  const daemon = createBoardingDaemon(rt, {
    services,
    jobs,
    onCycle: (summary) => {
      for (const f of onCycles) f(summary);
    },
  });
  daemonRef = daemon;
  return daemon;
}

export function registerRunCommands(program: Command, ctx: CliContext): void {
  program
    .command('run')
    .description('daemon: scheduled queue drain (schedule.drain), early cycles on webhooks, nightly reconcile; SIGTERM drains and exits 0')
    .addHelpText(
      'after',
      '\nOn SIGTERM/SIGINT it stops taking loans, lets steps in flight finish for up to boarding.shutdownTimeoutMs\n(each loan resumes from its persisted state otherwise), closes servers and the database and exits 0.\nA second signal exits at once. Exit 1 when the platform refuses the API key.',
    )
    .action(async () => {
      const config = ctx.config();
      const logger = ctx.logger();
      const rt = await buildRuntime(config, logger, { clock: ctx.clock });
      ctx.onClose(() => rt.close());
      const daemon = await createPluggedDaemon(rt, ctx);
      const onShutdown = (): void => {
        void daemon.stop();
      };
      await daemon.start();
      if (ctx.shutdown.aborted) onShutdown();
      else ctx.shutdown.addEventListener('abort', onShutdown, { once: true });
      const exit = await daemon.done;
      await daemon.stop();
      ctx.shutdown.removeEventListener('abort', onShutdown);
      if (exit.kind === 'fatal') throw new FatalError(`the ${refusedBy(exit.code)} refused the connector (${exit.code}): ${exit.message}`);
    });
}
