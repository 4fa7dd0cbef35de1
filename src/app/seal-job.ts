import type { CoreSystem } from '../core/port.js';
import type { Logger } from '../lib/logger.js';
import type { DaemonJob } from '../scheduler/daemon.js';

/**
 * The daemon's cut-off job: the open batch is sealed at its cut-off, checked every minute (a board
 * past the cut-off seals too). None when the core has no batches to seal (asked of the core port,
 * not of a concrete adapter).
 */
export function batchSealDaemonJob(core: CoreSystem, logger: Logger): DaemonJob | undefined {
  const batching = core.batching;
  if (batching === undefined) return undefined;
  return {
    name: 'batches.seal',
    schedule: '* * * * *',
    async run() {
      const sealed = await batching.sealDue();
      if (sealed.length > 0) logger.info({ batches: sealed }, 'batches sealed at their cut-off');
    },
  };
}
