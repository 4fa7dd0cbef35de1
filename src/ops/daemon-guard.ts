import { hostname } from 'node:os';
import { ConfigError } from '../lib/errors.js';
import { liveDaemons, type DaemonStatus, type DaemonStatusStore } from '../store/daemon-status.js';
import { processAlive } from '../store/leadership/leases.js';

/** The daemons running on this state database (rows of dead processes left by kill -9 do not count). */
export async function runningDaemons(status: DaemonStatusStore, now: number): Promise<DaemonStatus[]> {
  return liveDaemons(await status.all(), now, hostname(), processAlive);
}

/**
 * A command that boards beside a running daemon (`sync --once`, `loans reboard`) must board with
 * the daemon's mapping version: otherwise two versions board at once and nothing says so.
 */
export async function assertSameMappingAsDaemon(
  status: DaemonStatusStore,
  mine: { version: string; dir: string },
  now: number,
  command: string,
): Promise<void> {
  const myVersion = mine.version;
  const d = (await runningDaemons(status, now)).find((s) => s.mappingVersion !== myVersion);
  if (!d) return;
  throw new ConfigError(
    `${command}: a running daemon (pid ${d.pid} on ${d.host}) boards with mapping ${d.mappingVersion}, but this ` +
      `command loaded ${myVersion} from ${mine.dir}; ` +
      `reload the daemon first (kill -HUP ${d.pid}, or mappings.watch: true) so one version boards at a ` +
      `time${d.reloadError ? ` (its last reload was refused: ${d.reloadError.split('\n')[0] ?? ''})` : ''}`,
  );
}

/**
 * After a retry: a running daemon polls for this request and starts a cycle at once, so the
 * operator does not wait for the schedule. The pids asked; empty when no daemon runs.
 */
export async function askDaemonForCycle(
  status: DaemonStatusStore,
  by: string,
  now: number,
): Promise<number[]> {
  const daemons = await runningDaemons(status, now);
  if (daemons.length === 0 || (await status.requestCycle(by, now)) === 0) return [];
  return daemons.map((d) => d.pid);
}
