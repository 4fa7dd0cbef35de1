import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';

/**
 * The newest `report.html` in the reports directory: `latest/report.html` (the stable path every
 * run updates), else the newest found directly in it, one level down (`<date>/`, the layout of
 * older versions) or two (`<date>/run-<time>/`). Returns an absolute path, or null when there is
 * none yet.
 */
export async function latestReportFile(reportsDir: string): Promise<string | null> {
  const root = resolve(reportsDir);
  const stable = join(root, 'latest', 'report.html');
  try {
    if ((await stat(stable)).isFile()) return stable;
  } catch {
    // no `latest` yet (or a --out run only): search
  }
  const candidates = [join(root, 'report.html')];
  const subdirs = async (dir: string): Promise<string[]> =>
    (await readdir(dir, { withFileTypes: true }))
      .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
      .map((e) => join(dir, e.name));
  try {
    for (const day of await subdirs(root)) {
      candidates.push(join(day, 'report.html'));
      for (const run of await subdirs(day).catch(() => [])) candidates.push(join(run, 'report.html'));
    }
  } catch {
    return null;
  }
  let best: { path: string; mtime: number } | null = null;
  for (const path of candidates) {
    try {
      const s = await stat(path);
      if (s.isFile() && (best === null || s.mtimeMs > best.mtime)) best = { path, mtime: s.mtimeMs };
    } catch {
      // not there: fine
    }
  }
  return best?.path ?? null;
}
