import { statfs } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';

/**
 * Free space where the connector writes (issue 37): the state directory (SQLite) and the file
 * core's directory. Boarding into a full disk gains nothing and risks a write that stops half way,
 * so below `minFreeBytes` the daemon starts no cycle (boarding.minFreeDiskMb), /readyz says which
 * directory and how much is left, /metrics carries the free bytes, and one ALERT line a minute is
 * logged while it lasts. A write that still meets ENOSPC (a document bigger than what is left) is
 * cleaned up where it happened (durable-fs temp files, SQLite's rollback) and retried later.
 */
export interface DiskTarget {
  /** The config key the directory comes from, for messages: `store.path`, `core.file.dir`. */
  key: string;
  dir: string;
}

export interface DiskReading {
  key: string;
  dir: string;
  /** Bytes an unprivileged writer may still use; null when the file system could not be asked. */
  freeBytes: number | null;
  error?: string;
}

export interface DiskStatus {
  ok: boolean;
  /** Operator-facing, one line (served on /readyz). */
  detail: string;
  readings: DiskReading[];
  at: number;
}

export interface DiskWatch {
  readonly minFreeBytes: number;
  /** Asks the file systems now. */
  refresh(): Promise<DiskStatus>;
  /** The last reading (ok and empty before the first). */
  last(): DiskStatus;
}

export interface DiskWatchOptions {
  targets: readonly DiskTarget[];
  minFreeBytes: number;
  clock: Clock;
  logger?: Logger;
  /** One ALERT line per this long while space is short. Default 60 s. */
  alertEveryMs?: number;
}

/** statfs of the directory, or of its nearest existing parent (a directory not created yet). */
async function freeBytesOf(dir: string): Promise<number> {
  let d = resolve(dir);
  for (;;) {
    try {
      const s = await statfs(d);
      return s.bavail * s.bsize;
    } catch (err) {
      const parent = dirname(d);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || parent === d) throw err;
      d = parent;
    }
  }
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(1)} GiB`;
}

export function createDiskWatch(opts: DiskWatchOptions): DiskWatch {
  const alertEvery = opts.alertEveryMs ?? 60_000;
  let current: DiskStatus = { ok: true, detail: 'not checked yet', readings: [], at: 0 };
  let lastAlertAt: number | null = null;
  let inFlight: Promise<DiskStatus> | null = null;

  async function read(): Promise<DiskStatus> {
    const readings: DiskReading[] = [];
    for (const t of opts.targets) {
      try {
        readings.push({ key: t.key, dir: t.dir, freeBytes: await freeBytesOf(t.dir) });
      } catch (err) {
        readings.push({ key: t.key, dir: t.dir, freeBytes: null, error: errorMessage(err) });
      }
    }
    const short = readings.filter((r) => r.freeBytes !== null && r.freeBytes < opts.minFreeBytes);
    const min = formatBytes(opts.minFreeBytes);
    const at = opts.clock.now();
    if (short.length === 0) {
      const parts = readings.map((r) =>
        r.freeBytes === null
          ? `${r.key} ${r.dir}: cannot tell (${r.error ?? 'statfs failed'})`
          : `${r.key}: ${formatBytes(r.freeBytes)} free`,
      );
      if (lastAlertAt !== null)
        opts.logger?.info(
          { alert: 'disk.full', resolved: true, readings },
          'disk space is back: boarding resumes',
        );
      lastAlertAt = null;
      return {
        ok: true,
        detail: parts.length === 0 ? 'no directory to watch' : parts.join('; '),
        readings,
        at,
      };
    }
    const where = short.map((r) => `${r.key} ${r.dir} has ${formatBytes(r.freeBytes ?? 0)} free`).join('; ');
    const detail =
      `DISK FULL: ${where} (below boarding.minFreeDiskMb, ${min}): ` +
      'boarding stopped until space is freed';
    if (lastAlertAt === null || at - lastAlertAt >= alertEvery) {
      lastAlertAt = at;
      opts.logger?.error(
        { alert: 'disk.full', readings, minFreeBytes: opts.minFreeBytes },
        `ALERT: ${detail}`,
      );
    }
    return { ok: false, detail, readings, at };
  }

  return {
    minFreeBytes: opts.minFreeBytes,
    refresh() {
      inFlight ??= read().then(
        (s) => {
          current = s;
          inFlight = null;
          return s;
        },
        (err: unknown) => {
          inFlight = null;
          throw err;
        },
      );
      return inFlight;
    },
    last: () => current,
  };
}
