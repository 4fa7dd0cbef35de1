/**
 * The status page group: the connector's status (daemon, platform, core bounded to a few seconds,
 * loans by state, pending requests, readiness) and the file core's batches.
 */
import type { Clock } from '../lib/clock.js';
import { listBatchItems } from '../ops/batches.js';
import { runningDaemons } from '../ops/daemon-guard.js';
import type { ConsoleService, StatusView } from './contract.js';
import { iso } from './paging.js';
import type { ServiceContext } from './service-context.js';

/** The core's health, or not ok after CORE_HEALTH_MS (a hung core must not hang the status page). */
const CORE_HEALTH_MS = 3_000;
async function boundedHealth(
  health: () => Promise<{ ok: boolean; detail?: string }>,
  clock: Clock,
): Promise<{ ok: boolean; detail: string | null }> {
  let timer: { cancel(): void } | null = null;
  const late = new Promise<{ ok: boolean; detail: string | null }>((resolve) => {
    timer = clock.timeout(CORE_HEALTH_MS, () =>
      resolve({ ok: false, detail: `no answer within ${CORE_HEALTH_MS / 1000} s` }),
    );
  });
  try {
    return await Promise.race([
      health().then(
        (h) => ({ ok: h.ok, detail: h.detail ?? null }),
        (err: unknown) => ({ ok: false, detail: err instanceof Error ? err.message : String(err) }),
      ),
      late,
    ]);
  } finally {
    (timer as { cancel(): void } | null)?.cancel();
  }
}

/** File batches and the status. */
export function statusMethods(c: ServiceContext): Pick<ConsoleService, 'batches' | 'status'> {
  const { deps, store, cs, clock } = c;
  return {
    batches: () => listBatchItems(deps.batching, 100),

    async status(): Promise<StatusView> {
      const now = clock.now();
      const d = (await runningDaemons(store.daemon, now))[0] ?? null;
      return {
        role: deps.role?.() ?? 'leader',
        daemon: d
          ? {
              pid: d.pid,
              host: d.host,
              startedAt: iso(d.startedAt) as string,
              mappingVersion: d.mappingVersion,
              reloadError: d.reloadError,
            }
          : null,
        lastCycleAt: iso(deps.lastCycleAt?.() ?? null),
        platform: deps.platformHealth?.() ?? null,
        core: deps.coreHealth ? await boundedHealth(deps.coreHealth, clock) : null,
        loansByState: await store.loans.countByState(),
        pendingRequests: await cs.countRequests('pending'),
        readiness: deps.readiness ? await deps.readiness() : null,
      };
    },
  };
}
