import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fsync,
  mkdirSync,
  openSync,
  renameSync,
  writeFile,
  writeFileSync,
} from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';

/**
 * Crash-safe file primitives. A rename is atomic on POSIX file systems, but only durable once the
 * file's data and the directory entry are fsynced: without both, a power cut can leave an empty or
 * missing file behind a rename that "happened".
 *
 * What works in the page cache (open, write, close, rename, mkdir, stat) runs synchronously: it
 * takes microseconds, less than the thread-pool round trip of an asynchronous call (issue 44: about
 * 30 µs of CPU each, the futex and eventfd wake-ups of both threads, 35 of them per board). Only
 * fsync, which waits for the disk, goes to the pool, and writes past SYNC_WRITE_MAX (a sealed
 * batch file) so one large write never holds the event loop. On a network file system (a shared
 * core.file.dir) each synchronous call is a round trip to the server that the event loop waits
 * for: a few ms per board, the price of one directory every replica reaches.
 */

/** Packages and batches hold tax ids and documents: owner and group only (the umask may narrow further). */
export const FILE_MODE = 0o640;
export const DIR_MODE = 0o750;

/** Larger writes go to the thread pool (a batch file of many loans), smaller ones are written at once. */
export const SYNC_WRITE_MAX = 1024 * 1024;

const fsyncFd = promisify(fsync);
const writeFd = promisify(writeFile);

/** fsyncs an open descriptor on the thread pool. A directory some file systems refuse to fsync is let be. */
export async function fsyncOpen(fd: number, what: 'file' | 'dir' = 'file'): Promise<void> {
  try {
    await fsyncFd(fd);
  } catch (err) {
    // Some file systems refuse fsync on a directory (EINVAL/EISDIR); nothing more can be done there.
    const code = (err as { code?: string }).code;
    if (what === 'file' || (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EBADF')) throw err;
  }
}

export async function fsyncPath(path: string): Promise<void> {
  const fd = openSync(path, constants.O_RDONLY);
  try {
    await fsyncOpen(fd, 'dir');
  } finally {
    closeSync(fd);
  }
}

export const fsyncDir = fsyncPath;

/** Writes a file and fsyncs it (the caller fsyncs the directory once for many files). */
export async function writeFileSynced(path: string, data: string | Uint8Array): Promise<void> {
  const fd = openSync(path, 'w', FILE_MODE);
  try {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (bytes.byteLength > SYNC_WRITE_MAX) await writeFd(fd, bytes);
    else writeFileSync(fd, bytes); // from the descriptor's position, every byte (short writes retried)
    await fsyncOpen(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * A new file (`wx`: never an existing one) written as a stream: each chunk is written at once and
 * hashed, the end fsyncs it (the stream finishes only when its bytes are on the disk), and the
 * descriptor is closed when the stream is destroyed (after its end, or on a failure). sha256 and
 * bytes are what was written. The caller fsyncs the directory.
 */
export class SyncedFileSink extends Writable {
  bytes = 0;
  private readonly hash = createHash('sha256');
  private fd: number | null;

  constructor(path: string) {
    super();
    this.fd = openSync(path, 'wx', FILE_MODE);
  }

  /** The hex sha256 of every byte written (once the stream has finished). */
  sha256(): string {
    return this.hash.copy().digest('hex');
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    try {
      writeFileSync(this.openFd(), chunk);
    } catch (err) {
      cb(err as Error);
      return;
    }
    this.hash.update(chunk);
    this.bytes += chunk.length;
    cb();
  }

  override _final(cb: (err?: Error | null) => void): void {
    fsyncOpen(this.openFd()).then(() => cb(), cb);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    if (this.fd !== null) {
      const fd = this.fd;
      this.fd = null;
      try {
        closeSync(fd);
      } catch (closeErr) {
        cb(err ?? (closeErr as Error));
        return;
      }
    }
    cb(err);
  }

  private openFd(): number {
    if (this.fd === null) throw new Error('file sink already closed');
    return this.fd;
  }
}

/** Temp files of writeFileAtomic / writeFilesAtomic: `.tmp-<pid>-<time>-<random>` beside their target. */
export const TEMP_PREFIX = '.tmp-';

export function uniqueSuffix(): string {
  return `${process.pid}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

/** Replaces one file atomically: temp file in the same directory, fsync, rename, fsync dir. */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  const tmp = join(dir, `${TEMP_PREFIX}${uniqueSuffix()}`);
  try {
    await writeFileSynced(tmp, data);
    renameSync(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await fsyncDir(dir);
}

export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * What a file of writeFilesAtomic holds: its bytes, or a writer that creates the temp file at the
 * path it is given, writes it and fsyncs it (a file streamed from the store, too big for memory).
 */
export type FileContent = string | Uint8Array | ((tmpPath: string) => Promise<void>);

/**
 * Replaces several files of one directory: every temp file is written and fsynced (one after the
 * other, in order), then all are renamed, then the directory is fsynced once. Each file is
 * replaced atomically (readers see the old or the new content); the set is not atomic as a whole.
 * A failure removes the temp files and leaves every target as it was.
 */
export async function writeFilesAtomic(
  dir: string,
  files: ReadonlyArray<readonly [name: string, content: FileContent]>,
): Promise<void> {
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  const staged: Array<{ tmp: string; path: string }> = [];
  try {
    for (const [name, content] of files) {
      const f = { tmp: join(dir, `${TEMP_PREFIX}${uniqueSuffix()}`), path: join(dir, name) };
      staged.push(f);
      if (typeof content === 'function') await content(f.tmp);
      else await writeFileSynced(f.tmp, content);
    }
    for (const f of staged) renameSync(f.tmp, f.path);
  } catch (err) {
    await Promise.all(staged.map((f) => rm(f.tmp, { force: true })));
    throw err;
  }
  await fsyncDir(dir);
}

/**
 * Removes the temp files (`.tmp-<pid>-…`) that writes a crash cut short left in `dir`: never
 * renamed, never read by anyone. A temp file of another process still running (a `batches seal`
 * beside the daemon) is in use and stays; one with this process's id is a leftover (an earlier
 * process with the same id, or a failed clean-up), so the caller must not have a write of its own
 * in flight in `dir`. Returns the names removed; a missing directory has none.
 */
export async function sweepTempFiles(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return [];
    throw err;
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(TEMP_PREFIX) || ownedByLiveProcess(name)) continue;
    await rm(join(dir, name), { force: true });
    removed.push(name);
  }
  return removed;
}

/** `.tmp-<pid>-…` of another process still running: not a leftover. */
function ownedByLiveProcess(tmpName: string): boolean {
  const pid = Number(/^\.tmp-(\d+)-/.exec(tmpName)?.[1]);
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === 'EPERM';
  }
}
