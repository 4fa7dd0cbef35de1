import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { every, type Clock, type Timer } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { DaemonStatusStore } from '../store/daemon-status.js';
import type { DaemonService } from '../scheduler/daemon.js';
import { watchMappingDir, type ReloadableMapper, type ReloadResult } from '../ops/mapping-reload.js';

export interface EditLoopServiceDeps {
  mapper: ReloadableMapper;
  status: DaemonStatusStore;
  clock: Clock;
  logger: Logger;
  /** mappings.watch: reload on file change too. */
  watch: boolean;
  /** Subscribes to SIGHUP; returns the unsubscribe. */
  onHangup: (fn: () => void) => () => void;
  /** The daemon's early-cycle entry. */
  requestCycle: (reason: string) => void;
  /** How often the daemon row is heartbeaten and polled for an operator's cycle request. Default 2 s. */
  pollMs?: number;
}

export interface EditLoopService extends DaemonService {
  /** Reload now (what SIGHUP and the file watch call). */
  reload(trigger: string): Promise<ReloadResult>;
}

/**
 * The daemon's side of the bank engineer's edit loop: reloads the mapping set on SIGHUP (and on
 * file change with mappings.watch), publishes the version it boards with for CLI commands run
 * beside it, and starts an early cycle when an operator asks for one (`loans retry --all`).
 */
export function createEditLoopService(deps: EditLoopServiceDeps): EditLoopService {
  const log = deps.logger.child({ component: 'edit-loop' });
  const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  let lastRequestSeen: number | null = null;
  let timer: Timer | null = null;
  let watcher: { close(): void } | null = null;
  let unhang: (() => void) | null = null;
  let startedAt = 0;

  async function publish(now: number): Promise<void> {
    const st = deps.mapper.status();
    const reloadError = st.lastReloadError ? st.lastReloadError.message.slice(0, 4000) : null;
    await deps.status.publish({
      owner,
      pid: process.pid,
      host: hostname(),
      startedAt,
      updatedAt: now,
      mappingVersion: st.version,
      mappingDir: st.dir,
      reloadError,
    });
  }

  async function reload(trigger: string): Promise<ReloadResult> {
    const r = await deps.mapper.reload(trigger);
    try {
      await deps.status.touch(owner, deps.clock.now(), {
        mappingVersion: r.version,
        reloadError: r.ok ? null : r.message.slice(0, 4000),
      });
    } catch (err) {
      log.warn({ err: errorMessage(err) }, 'could not record the mapping version in the state database');
    }
    return r;
  }

  async function poll(): Promise<void> {
    try {
      const now = deps.clock.now();
      // An operator's `state` repair may have removed the row: put it back, or CLIs stop seeing us.
      if (!(await deps.status.touch(owner, now))) await publish(now);
      const s = await deps.status.get(owner);
      if (s && s.cycleRequestedAt !== null && s.cycleRequestedAt !== lastRequestSeen) {
        lastRequestSeen = s.cycleRequestedAt;
        log.info({ by: s.cycleRequestedBy }, 'an operator asked for a cycle now');
        deps.requestCycle(`ops request by ${s.cycleRequestedBy ?? 'unknown'}`);
      }
    } catch (err) {
      log.warn({ err: errorMessage(err) }, 'daemon status heartbeat failed; retrying on the next poll');
    }
  }

  return {
    name: 'edit-loop',
    reload,
    async start() {
      const st = deps.mapper.status();
      startedAt = deps.clock.now();
      await publish(startedAt);
      // One poll at a time: a slow database must not pile them up.
      let polling = false;
      timer = every(deps.clock, deps.pollMs ?? 2000, () => {
        if (polling) return;
        polling = true;
        void poll().finally(() => {
          polling = false;
        });
      });
      unhang = deps.onHangup(() => {
        void reload('SIGHUP');
      });
      if (deps.watch) {
        watcher = watchMappingDir(st.dir, deps.clock, (files) => {
          log.info({ files }, 'mapping set changed on disk: reloading');
          void reload('file change');
        });
        log.info({ dir: st.dir }, 'watching the mapping set for changes');
      }
    },
    async stop() {
      timer?.cancel();
      watcher?.close();
      unhang?.();
      try {
        await deps.status.remove(owner);
      } catch (err) {
        log.warn({ err: errorMessage(err) }, 'could not clear the daemon status row');
      }
    },
  };
}
