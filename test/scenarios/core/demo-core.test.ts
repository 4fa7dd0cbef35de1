import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { startCliInBackground } from '../../support/cli-run.js';

/**
 * `demo --core fineract|mambu`: the demo boards into the core simulator (held to the vendor's
 * published contract) instead of the file core; the simulator refuses nothing and holds one loan
 * per loan the demo acknowledged; the report ties.
 */
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe.each(['fineract', 'mambu'])('demo --core %s', (core) => {
  it('boards the demo loans into the simulator: every acknowledged loan once, nothing refused', async () => {
    const dir = mkdtempSync(join(tmpdir(), `demo-${core}-`));
    dirs.push(dir);
    const demo = startCliInBackground([
      'demo',
      '--dir',
      dir,
      '--core',
      core,
      '--loans',
      '8',
      '--window-ms',
      '2000',
      '--step-ms',
      '200',
      '--report-after',
      '3',
    ]);
    try {
      const banner = await demo.waitFor(/Ctrl-C stops/, 30_000);
      expect(banner).toMatch(
        new RegExp(`core: (Apache Fineract|Mambu) simulator at http://127\\.0\\.0\\.1:\\d+/`),
      );
      const latest = join(dir, 'reports', 'latest', 'report.json');
      await vi.waitFor(() => expect(existsSync(latest), 'the first report').toBe(true), {
        timeout: 60_000,
        interval: 100,
      });
    } finally {
      await demo.stop();
    }
    const m = new RegExp(
      `stopped\\. boarded (\\d+), quarantined (\\d+); .*${core}: (\\d+) loan\\(s\\), (\\d+) request\\(s\\) refused`,
    ).exec(demo.stdout());
    expect(m, demo.stdout()).not.toBeNull();
    const [, boarded, quarantined, inCore, refused] = m!.map(Number);
    expect(boarded).toBeGreaterThan(0);
    expect(quarantined).toBe(0);
    expect(inCore).toBe(boarded);
    expect(refused).toBe(0);
  }, 120_000);
});
