import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';

/**
 * The newest `report.html` in the reports directory: either directly in it or one level down
 * (one folder per run). Returns an absolute path, or null when there is none yet.
 */
export async function latestReportFile(reportsDir: string): Promise<string | null> {
  const root = resolve(reportsDir);
  const candidates = [join(root, 'report.html')];
  try {
    for (const entry of await readdir(root, { withFileTypes: true })) {
      if (entry.isDirectory() && !entry.name.startsWith('.')) candidates.push(join(root, entry.name, 'report.html'));
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
