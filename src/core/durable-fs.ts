import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * Crash-safe file primitives. A rename is atomic on POSIX file systems, but only durable once the
 * file's data and the directory entry are fsynced: without both, a power cut can leave an empty or
 * missing file behind a rename that "happened".
 */

/** Packages and batches hold tax ids and documents: owner and group only (the umask may narrow further). */
export const FILE_MODE = 0o640;
export const DIR_MODE = 0o750;

export async function fsyncPath(path: string): Promise<void> {
  const fh = await open(path, constants.O_RDONLY);
  try {
    await fh.sync();
  } catch (err) {
    // Some file systems refuse fsync on a directory (EINVAL/EISDIR); nothing more can be done there.
    const code = (err as { code?: string }).code;
    if (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EBADF') throw err;
  } finally {
    await fh.close();
  }
}

export const fsyncDir = fsyncPath;

/** Writes a file and fsyncs it (the caller fsyncs the directory once for many files). */
export async function writeFileSynced(path: string, data: string | Uint8Array): Promise<void> {
  const fh = await open(path, 'w', FILE_MODE);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
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
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  const tmp = join(dir, `${TEMP_PREFIX}${uniqueSuffix()}`);
  try {
    await writeFileSynced(tmp, data);
    await rename(tmp, path);
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
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  const staged: Array<{ tmp: string; path: string }> = [];
  try {
    for (const [name, content] of files) {
      const f = { tmp: join(dir, `${TEMP_PREFIX}${uniqueSuffix()}`), path: join(dir, name) };
      staged.push(f);
      if (typeof content === 'function') await content(f.tmp);
      else await writeFileSynced(f.tmp, content);
    }
    for (const f of staged) await rename(f.tmp, f.path);
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
