import { watch, type FSWatcher } from 'node:fs';
import { sep } from 'node:path';
import type { Clock, Timer } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { MappingInput, MappingOutcome } from '../mapping/types.js';
import type { SetMapper as Mapper } from '../mapping-sets/loader.js';

/** What /readyz, /metrics, `loans show` and the startup log say about the mapping in use. */
export interface LoadedMappingStatus {
  version: string;
  dir: string;
  loadedAt: number;
  /** The last reload that failed lint, while the version above kept boarding. Cleared by a good reload. */
  lastReloadError: { at: number; trigger: string; message: string } | null;
}

export type ReloadResult =
  | { ok: true; changed: boolean; version: string; previous: string }
  | { ok: false; version: string; message: string };

/**
 * The mapper the pipeline holds for the life of a daemon. Each `map()` call runs on one compiled
 * set from start to end (the swap replaces the reference, never a set in use), so a loan is
 * mapped by one version only; loans mapped after a reload get the new one.
 */
export interface ReloadableMapper extends Mapper {
  status(): LoadedMappingStatus;
  /** Lints and compiles the set on disk; swaps only when it is clean, else keeps the loaded one. */
  reload(trigger: string): Promise<ReloadResult>;
  /** Calls fn after each successful swap (e.g. to record the version for other processes). */
  onSwap(fn: (status: LoadedMappingStatus) => void): void;
}

export interface ReloadableMapperOptions {
  initial: Mapper;
  dir: string;
  /** Loads and lints the set on disk; throws (ConfigError with every problem) when it does not compile. */
  load: () => Promise<Mapper>;
  logger: Logger;
  clock: Clock;
}

export function createReloadableMapper(opts: ReloadableMapperOptions): ReloadableMapper {
  const log = opts.logger.child({ component: 'mapping' });
  let current = opts.initial;
  let status: LoadedMappingStatus = {
    version: current.version,
    dir: opts.dir,
    loadedAt: opts.clock.now(),
    lastReloadError: null,
  };
  let inFlight: Promise<ReloadResult> | null = null;
  const swapListeners: Array<(s: LoadedMappingStatus) => void> = [];

  async function doReload(trigger: string): Promise<ReloadResult> {
    const previous = current.version;
    let next: Mapper;
    try {
      next = await opts.load();
    } catch (err) {
      const message = errorMessage(err);
      status = { ...status, lastReloadError: { at: opts.clock.now(), trigger, message } };
      log.error(
        { trigger, version: previous, dir: opts.dir, problems: message },
        `mapping reload refused: the set on disk does not lint; still boarding with ${previous}`,
      );
      return { ok: false, version: previous, message };
    }
    const changed = next.version !== previous;
    if (changed) current = next;
    status = changed
      ? { version: next.version, dir: opts.dir, loadedAt: opts.clock.now(), lastReloadError: null }
      : { ...status, lastReloadError: null };
    if (changed) {
      log.info(
        { trigger, version: next.version, previous, dir: opts.dir },
        `mapping reloaded: loans mapped from now on use ${next.version}`,
      );
      for (const fn of swapListeners) {
        try {
          fn(status);
        } catch (err) {
          log.warn({ err: errorMessage(err) }, 'mapping swap listener failed');
        }
      }
    } else {
      log.info(
        { trigger, version: previous },
        'mapping reload: the set on disk is the one loaded; nothing to do',
      );
    }
    return { ok: true, changed, version: current.version, previous };
  }

  return {
    get version() {
      return current.version;
    },
    get name() {
      return current.name;
    },
    get layout() {
      return current.layout;
    },
    map(input: MappingInput): Promise<MappingOutcome> {
      // One reference read per loan: a swap during this call does not touch it.
      return current.map(input);
    },
    status: () => status,
    reload(trigger) {
      // Two triggers at once (a save fires several file events, plus a SIGHUP) share one lint.
      inFlight ??= doReload(trigger).finally(() => {
        inFlight = null;
      });
      return inFlight;
    },
    onSwap(fn) {
      swapListeners.push(fn);
    },
  };
}

/**
 * `mappings.watch: true`: a reload shortly after the files stop changing (an editor's save is a
 * burst of events; a half-written file would only fail lint and be retried on the next event).
 * onChange gets the files that changed in the burst (relative to dir), for the log.
 */
export function watchMappingDir(
  dir: string,
  clock: Clock,
  onChange: (files: string[]) => void,
  debounceMs = 300,
): { close(): void } {
  let timer: Timer | null = null;
  let files = new Set<string>();
  const fire = (file: string): void => {
    files.add(file);
    timer?.cancel();
    timer = clock.timeout(debounceMs, () => {
      timer = null;
      const changed = [...files];
      files = new Set();
      onChange(changed);
    });
  };
  // Fixtures are not part of the set's version: `mappings test --update` or `preview --save-fixture`
  // writing there must not make the daemon lint the set again.
  const watcher: FSWatcher = watch(dir, { recursive: true, persistent: false }, (_event, file) => {
    if (typeof file === 'string' && (file === 'fixtures' || file.startsWith(`fixtures${sep}`))) return;
    fire(typeof file === 'string' ? file : '(unknown file)');
  });
  return {
    close() {
      timer?.cancel();
      watcher.close();
    },
  };
}
