import type { DaemonJob } from '../../boarding/daemon.js';
import type { Logger } from '../../lib/logger.js';
import type { CoreSystem } from '../port.js';
import { FileCore } from './file-core.js';

/**
 * The daemon's cut-off job: the open batch is sealed at its cut-off, checked every minute (a board
 * past the cut-off seals too). None when the core is not a file core with batches.
 */
export function batchSealDaemonJob(core: CoreSystem, logger: Logger): DaemonJob | undefined {
  if (!(core instanceof FileCore) || core.batches === undefined) return undefined;
  return {
    name: 'batches.seal',
    schedule: '* * * * *',
    async run() {
      const sealed = await core.sealDue();
      if (sealed.length > 0) logger.info({ batches: sealed }, 'batches sealed at their cut-off');
    },
  };
}
