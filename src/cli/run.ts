import type { Command } from 'commander';
import { buildRuntime } from '../app/runtime.js';
import { openStoreWaiting } from '../app/store-wait.js';
import { storeTarget } from '../app/store-target.js';
import { FatalError } from '../lib/errors.js';
import { fatalStop } from '../ops/sync.js';
import type { CliContext } from './context.js';

export function registerRunCommands(program: Command, ctx: CliContext): void {
  program
    .command('run')
    .description(
      'daemon: scheduled queue drain (schedule.drain), early cycles on webhooks, nightly reconcile; SIGHUP ' +
        'reloads the mapping set; SIGTERM drains and exits 0',
    )
    .addHelpText(
      'after',
      '\nOn SIGTERM/SIGINT it stops taking loans, lets steps in flight finish for up to ' +
        'boarding.shutdownTimeoutMs\n' +
        '(each loan resumes from its persisted state otherwise), closes servers and the database and exits 0.\n' +
        'A second signal exits at once. SIGHUP lints and loads the mapping set on disk (a broken one is ' +
        'refused).\nExit 1 when the platform refuses the API key.\n' +
        'With store.engine postgres, an unreachable server or a refused login at start keeps the process up:\n' +
        '/healthz answers, /readyz answers 503 with the reason, ' +
        'and the store is retried with backoff (1 s to 1 min).',
    )
    .action(async () => {
      const config = ctx.config();
      const logger = ctx.logger();
      // An unreachable PostgreSQL (or a refused login) at start: stay up, /readyz 503 with the
      // reason, retry with backoff; the daemon starts once the database answers.
      const db = await openStoreWaiting(storeTarget(config), {
        clock: ctx.clock,
        logger,
        signal: ctx.shutdown,
        admin: { host: config.admin.host, port: config.admin.port },
        onWarning: (m) => logger.warn(m),
      });
      if (!db) return;
      let rt;
      try {
        rt = await buildRuntime(config, logger, { clock: ctx.clock, db, env: ctx.env });
      } catch (err) {
        await db.close();
        throw err;
      }
      ctx.onClose(() => rt.close());
      // Loaded here: one-shot commands never load the daemon's HTTP stack, metrics and scheduler.
      const { createConnectorDaemon } = await import('../app/daemon.js');
      const daemon = createConnectorDaemon(rt, { onHangup: (fn) => ctx.onHangup(fn) });
      const onShutdown = (): void => {
        void daemon.stop();
      };
      await daemon.start();
      if (ctx.shutdown.aborted) onShutdown();
      else ctx.shutdown.addEventListener('abort', onShutdown, { once: true });
      const exit = await daemon.done;
      await daemon.stop();
      ctx.shutdown.removeEventListener('abort', onShutdown);
      if (exit.kind === 'fatal') throw new FatalError(fatalStop(exit));
    });
}
