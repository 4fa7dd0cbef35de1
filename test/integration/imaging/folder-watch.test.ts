import { mkdirSync, mkdtempSync, renameSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { watchedDirs } from '../../../src/app/daemon.js';
import { loadConfig } from '../../../src/config/load.js';
import { imagingStaleAfterMs } from '../../../src/config/schema.js';
import { createImagingFolderWatch } from '../../../src/imaging/folder-watch.js';
import { systemClock } from '../../../src/lib/clock.js';
import { createDiskWatch } from '../../../src/observability/disk-space.js';
import { createConnectorMetrics } from '../../../src/observability/metrics.js';
import { runReadiness, standardReadinessChecks } from '../../../src/observability/readiness.js';

function captureLogger() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) =>
    lines.push({ level, obj, msg });
  const logger = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
  return { logger: { ...logger, child: () => logger } as never, lines };
}

/** A batch folder with its ready marker, the marker `ageMs` old. */
function batchFolder(dir: string, id: string, ageMs: number): void {
  mkdirSync(join(dir, id), { recursive: true });
  writeFileSync(join(dir, id, 'index.txt'), 'x');
  writeFileSync(join(dir, id, 'READY'), `${id}\n`);
  const t = (Date.now() - ageMs) / 1000;
  utimesSync(join(dir, id, 'READY'), t, t);
}

/**
 * The imaging folder on /readyz and /metrics (issue 45): a folder that is missing, one the importer
 * does not drain (ready markers older than imaging.staleAfter), and a full one (the disk watch,
 * imaging.dir among its directories), each on a real directory.
 */
describe('imaging folder: missing, not drained, full', () => {
  it('reports a missing folder and a folder not drained on /readyz and /metrics, with one ALERT each time it turns bad', async () => {
    const root = mkdtempSync(join(tmpdir(), 'imaging-watch-'));
    const dir = join(root, 'dip');
    const { logger, lines } = captureLogger();
    const watch = createImagingFolderWatch({
      dir,
      readyFile: 'READY',
      staleAfterMs: imagingStaleAfterMs('30m'),
      clock: systemClock,
      logger,
    });
    const checks = standardReadinessChecks({ clock: systemClock, imaging: () => watch.last() });
    const metrics = createConnectorMetrics({
      clock: systemClock,
      processMetrics: false,
      imaging: () => watch.last(),
    });

    // Missing.
    await watch.refresh();
    let z = await runReadiness(checks);
    expect(z.ready).toBe(false);
    expect(z.checks['imaging']?.detail).toMatch(/^IMAGING FOLDER MISSING: imaging\.dir .*dip does not exist/);
    expect(await metrics.render()).toMatch(/^boarding_imaging_folder_missing 1$/m);

    // Present, one folder waiting for a few minutes, one folder still being written (no marker).
    mkdirSync(dir);
    batchFolder(dir, '2026-12-02-0001', 5 * 60_000);
    mkdirSync(join(dir, '2026-12-02-0002'));
    await watch.refresh();
    z = await runReadiness(checks);
    expect(z.checks['imaging']).toEqual({
      ok: true,
      detail: expect.stringMatching(
        /1 batch folder\(s\) waiting for the importer \(oldest 5 min\)$/,
      ) as string,
    });
    let text = await metrics.render();
    expect(text).toMatch(/^boarding_imaging_folder_missing 0$/m);
    expect(text).toMatch(/^boarding_imaging_batches_waiting 1$/m);
    expect(text).toMatch(/^boarding_imaging_stale_batches 0$/m);
    expect(lines.filter((l) => l.level === 'error')).toHaveLength(1);
    expect(lines.filter((l) => l.obj['resolved'] === true)).toHaveLength(1);

    // Not drained: a marker older than imaging.staleAfter.
    batchFolder(dir, '2026-12-01-0007', 45 * 60_000);
    await watch.refresh();
    z = await runReadiness(checks);
    expect(z.ready).toBe(false);
    expect(z.checks['imaging']?.detail).toMatch(
      /^IMAGING NOT DRAINED: 1 of 2 batch folder\(s\) .* waited longer than imaging\.staleAfter \(30 min; oldest 45 min\): is the importer running\?$/,
    );
    text = await metrics.render();
    expect(text).toMatch(/^boarding_imaging_stale_batches 1$/m);
    expect(text).toMatch(/^boarding_imaging_batches_waiting 2$/m);
    const oldest = Number(/^boarding_imaging_oldest_waiting_seconds (\S+)$/m.exec(text)?.[1]);
    expect(oldest).toBeGreaterThanOrEqual(2700);
    expect(oldest).toBeLessThan(2760);
    expect(lines.filter((l) => l.level === 'error').map((l) => l.obj['alert'])).toEqual([
      'imaging.folder',
      'imaging.folder',
    ]);

    // Drained again, then the share goes away.
    renameSync(join(dir, '2026-12-01-0007'), join(root, 'taken'));
    await watch.refresh();
    expect((await runReadiness(checks)).ready).toBe(true);
    renameSync(dir, join(root, 'unmounted'));
    await watch.refresh();
    expect((await runReadiness(checks)).checks['imaging']?.ok).toBe(false);
  });

  it('watches imaging.dir and its staging directory for free space, named by config key', async () => {
    const root = mkdtempSync(join(tmpdir(), 'imaging-disk-'));
    const fileText = [
      'platform: { baseUrl: "https://platform.example.test/api", apiKey: "pk_test_abc", environment: staging }',
      `store: { path: ${JSON.stringify(join(root, 'state.sqlite'))} }`,
      `core: { adapter: file, file: { dir: ${JSON.stringify(join(root, 'core'))} } }`,
      `imaging: { enabled: true, dir: ${JSON.stringify(join(root, 'dip'))}, staleAfter: 2h }`,
      '',
    ].join('\n');
    const config = loadConfig({ fileText, filePath: join(root, 'config.yaml'), env: {} });
    expect(imagingStaleAfterMs(config.imaging.staleAfter)).toBe(7_200_000);
    const targets = watchedDirs(config);
    expect(targets.map((t) => t.key)).toEqual([
      'store.path',
      'core.file.dir',
      'imaging.dir',
      'imaging.stagingDir',
    ]);
    expect(targets[3]?.dir).toBe(join(root, '.imaging-staging'));
    // No file system has this much free: the watch sees "full" on a real statfs.
    const s = await createDiskWatch({
      targets: targets.filter((t) => t.key === 'imaging.dir'),
      minFreeBytes: Number.MAX_SAFE_INTEGER,
      clock: systemClock,
    }).refresh();
    expect(s.detail).toMatch(/^DISK FULL: imaging\.dir .*dip has .* free \(below boarding\.minFreeDiskMb/);
  });

  it('imaging.staleAfter: a duration, 30m by default; anything else is refused naming the key', () => {
    const root = mkdtempSync(join(tmpdir(), 'imaging-cfg-'));
    const write = (imaging: string) => ({
      fileText: `platform: { baseUrl: "https://platform.example.test/api", apiKey: "pk_test_abc", environment: staging }\nimaging: ${imaging}\n`,
      filePath: join(root, 'config.yaml'),
    });
    expect(loadConfig({ ...write('{ enabled: false }'), env: {} }).imaging.staleAfter).toBe('30m');
    expect(imagingStaleAfterMs('30m')).toBe(1_800_000);
    expect(imagingStaleAfterMs('90s')).toBe(90_000);
    expect(() => loadConfig({ ...write('{ staleAfter: 30 }'), env: {} })).toThrow(/imaging\.staleAfter/);
    expect(() => loadConfig({ ...write('{ staleAfter: "half an hour" }'), env: {} })).toThrow(
      /imaging\.staleAfter.*duration such as "30m"/s,
    );
  });
});
