import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';

/**
 * The imaging folder as the importer should keep it (issue 45): present, and drained. A folder
 * that is missing (an unmounted share, a deleted directory) makes every loan wait; batch folders
 * whose ready marker is older than `imaging.staleAfter` mean the importer (OnBase DIP and the like)
 * has stopped taking them. Both are reported on /readyz (`imaging`) and /metrics; a full folder is
 * the disk watch's (`imaging.dir` among its directories, boarding.minFreeDiskMb). One ALERT line
 * when the folder turns bad, one when it is fine again.
 */
export interface ImagingFolderStatus {
  ok: boolean;
  /** Operator-facing, one line. */
  detail: string;
  missing: boolean;
  /** Batch folders with their ready marker, waiting for the importer. */
  waiting: number;
  /** Age of the oldest waiting folder's marker, ms; null when none waits. */
  oldestWaitingMs: number | null;
  /** Waiting folders older than staleAfter. */
  stale: number;
  at: number;
}

export interface ImagingFolderWatch {
  refresh(): Promise<ImagingFolderStatus>;
  last(): ImagingFolderStatus;
}

export interface ImagingFolderWatchOptions {
  dir: string;
  readyFile: string;
  staleAfterMs: number;
  clock: Clock;
  logger?: Logger;
}

function minutes(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}

/** Reads the folder once: missing, or its waiting batch folders and their age. */
export async function readImagingFolder(o: ImagingFolderWatchOptions): Promise<ImagingFolderStatus> {
  const at = o.clock.now();
  const dir = resolve(o.dir);
  let names: string[];
  try {
    if (!(await stat(dir)).isDirectory())
      throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
    names = await readdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'does not exist' : `cannot be read (${errorMessage(err)})`;
    return {
      ok: false,
      missing: true,
      detail:
        `IMAGING FOLDER MISSING: imaging.dir ${dir} ${why}: ` + 'loans wait for it (an unmounted share?)',
      waiting: 0,
      oldestWaitingMs: null,
      stale: 0,
      at,
    };
  }
  let waiting = 0;
  let stale = 0;
  let oldest: number | null = null;
  for (const name of names) {
    if (name.startsWith('.')) continue;
    let markedAt: number;
    try {
      markedAt = (await stat(join(dir, name, o.readyFile))).mtimeMs;
    } catch {
      continue; // not a batch folder, or not complete yet, or taken meanwhile
    }
    waiting += 1;
    const age = Math.max(0, at - markedAt);
    if (oldest === null || age > oldest) oldest = age;
    if (age > o.staleAfterMs) stale += 1;
  }
  const base = { missing: false, waiting, oldestWaitingMs: oldest, stale, at };
  if (stale > 0)
    return {
      ...base,
      ok: false,
      detail:
        `IMAGING NOT DRAINED: ${stale} of ${waiting} batch folder(s) in imaging.dir ${dir} waited longer than ` +
        `imaging.staleAfter (${minutes(o.staleAfterMs)}; oldest ${minutes(oldest ?? 0)}): is the importer running?`,
    };
  return {
    ...base,
    ok: true,
    detail:
      waiting === 0
        ? `imaging.dir ${dir}: drained`
        : `imaging.dir ${dir}: ${waiting} batch folder(s) waiting for the importer (oldest ${minutes(oldest ?? 0)})`,
  };
}

export function createImagingFolderWatch(o: ImagingFolderWatchOptions): ImagingFolderWatch {
  let current: ImagingFolderStatus = {
    ok: true,
    detail: 'not checked yet',
    missing: false,
    waiting: 0,
    oldestWaitingMs: null,
    stale: 0,
    at: 0,
  };
  return {
    async refresh() {
      const s = await readImagingFolder(o);
      if (!s.ok && current.ok) o.logger?.error({ alert: 'imaging.folder', ...s }, `ALERT: ${s.detail}`);
      else if (s.ok && !current.ok && current.at !== 0)
        o.logger?.info({ alert: 'imaging.folder', resolved: true }, `imaging folder fine again: ${s.detail}`);
      current = s;
      return s;
    },
    last: () => current,
  };
}
