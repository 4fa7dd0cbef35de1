import { once } from 'node:events';
import {
  chmodSync,
  createWriteStream,
  existsSync,
  lstatSync,
  mkdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  cpSync,
} from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Report folder layout: one folder per run, never overwritten (a report may already be signed):
 * `<reports.dir>/<YYYY-MM-DD>/run-<HHMMSS>/report.{json,csv,html}` (date and time in the bank's
 * zone; a second run in the same second gets `run-<HHMMSS>-2`, …), and `<reports.dir>/latest`, a
 * relative symlink to the newest run's folder (a copy where symlinks are not allowed). The admin
 * listener serves `/reports/latest` from there (src/http/reports-route.ts).
 */
export const REPORT_FILES = { json: 'report.json', csv: 'report.csv', html: 'report.html' } as const;
export type ReportFileKind = keyof typeof REPORT_FILES;

export const LATEST = 'latest';

/** Reports hold loan data: the owner and the ops group read them, nobody else (like core packages). */
export const REPORT_FILE_MODE = 0o640;
export const REPORT_DIR_MODE = 0o750;

/**
 * Creates a reports directory 0750, and tightens one that an older version (or umask) left open to
 * everybody; returns a warning for each one tightened.
 */
export function ensureReportDir(dir: string): string[] {
  mkdirSync(dir, { recursive: true, mode: REPORT_DIR_MODE });
  const mode = statSync(dir).mode & 0o777;
  if ((mode & 0o007) === 0) return [];
  chmodSync(dir, REPORT_DIR_MODE);
  return [`reports directory ${dir} was open to others (mode ${mode.toString(8)}); tightened to 750`];
}

/** Writes a whole file under a temporary name, then renames it: readers never see half a report. */
export function writeFileAtomic(path: string, data: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, data, { encoding: 'utf8', mode: REPORT_FILE_MODE });
  renameSync(tmp, path);
}

/**
 * Creates the folder of a new run inside `dayDir`: `run-<stamp>`, or `run-<stamp>-2`, `-3`… when
 * that exists (two runs in one second, or two processes): an existing run is never reused.
 */
export function createRunDir(dayDir: string, stamp: string): string {
  for (let n = 1; ; n++) {
    const dir = join(dayDir, n === 1 ? `run-${stamp}` : `run-${stamp}-${n}`);
    try {
      mkdirSync(dir, { mode: REPORT_DIR_MODE });
      return dir;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || n >= 1000) throw err;
    }
  }
}

/** Points `<reportsDir>/latest` at `dir` (a folder inside reportsDir, e.g. `<date>/run-<time>`). */
export function updateLatest(reportsDir: string, dir: string): string {
  const latest = join(reportsDir, LATEST);
  const target = relative(reportsDir, dir);
  const tmp = join(reportsDir, `.${LATEST}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  try {
    symlinkSync(target, tmp, 'dir');
    // rename over an existing symlink is atomic; over a real directory (an old copy) it is not
    // allowed, so the copy is removed first.
    if (existsSync(latest) && !lstatSync(latest).isSymbolicLink())
      rmSync(latest, { recursive: true, force: true });
    renameSync(tmp, latest);
  } catch {
    rmSync(tmp, { recursive: true, force: true });
    rmSync(latest, { recursive: true, force: true });
    cpSync(dir, latest, { recursive: true });
  }
  return latest;
}

/** Path of a file of the latest report, or null when no report has been written yet. */
export function latestReportFile(reportsDir: string, kind: ReportFileKind = 'html'): string | null {
  const path = join(reportsDir, LATEST, REPORT_FILES[kind]);
  return existsSync(path) ? path : null;
}

/** A report file written as it is computed (exceptions streamed as they are found); honours back-pressure. */
export interface ReportStream {
  write(text: string): Promise<void>;
  close(): Promise<void>;
  /** Destroys the stream and resolves once its file is closed (so it can then be removed); never rejects. */
  abort(): Promise<void>;
}

export function openReportStream(path: string): ReportStream {
  const stream = createWriteStream(path, { encoding: 'utf8', mode: REPORT_FILE_MODE });
  let failure: Error | null = null;
  stream.on('error', (err) => {
    failure = err;
  });
  return {
    async write(text) {
      if (failure) throw failure;
      if (!stream.write(text)) await once(stream, 'drain');
    },
    async close() {
      if (failure) throw failure;
      stream.end();
      await once(stream, 'finish');
    },
    async abort() {
      // The file is opened asynchronously: destroying before the open completes still creates it
      // afterwards, so wait for 'close' before the caller removes it (regression: a reconcile that
      // failed at once left its dated folder behind with a stray temp file).
      // Waits on 'close' alone: events.once would reject on the error a destroy mid-write emits
      // (ERR_STREAM_DESTROYED), and abort runs while the caller is reporting its real error.
      if (!stream.closed) {
        const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
        stream.destroy();
        await closed;
      }
    },
  };
}
