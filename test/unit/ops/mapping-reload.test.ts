import { appendFileSync, cpSync, mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { createReloadableMapper, watchMappingDir } from '../../../src/ops/mapping-reload.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { loadMapper } from '../../../src/mapping-sets/loader.js';
import { FakeClock } from '../../support/fake-clock.js';

const repo = join(import.meta.dirname, '../../..');

function copySet(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'reload-unit-')), 'generic');
  cpSync(join(repo, 'mappings/generic'), dir, { recursive: true });
  return dir;
}

describe('reloadable mapper', () => {
  it('swaps to a clean set, keeps the loaded one when the set on disk does not lint, and shares concurrent reloads', async () => {
    const dir = copySet();
    let loads = 0;
    const mapper = createReloadableMapper({
      initial: await loadMapper(dir),
      dir,
      load: () => {
        loads += 1;
        return loadMapper(dir);
      },
      logger: silentLogger(),
      clock: new FakeClock({ start: Date.parse('2026-11-25T10:00:00Z') }),
    });
    const a = mapper.version;
    const swaps: string[] = [];
    mapper.onSwap((s) => swaps.push(s.version));

    expect(await mapper.reload('SIGHUP')).toMatchObject({ ok: true, changed: false, version: a });
    appendFileSync(join(dir, 'mapping.yaml'), '\n# edited\n');
    // A save fires several events, plus a SIGHUP: one lint serves them all.
    const [r1, r2] = await Promise.all([mapper.reload('file change'), mapper.reload('SIGHUP')]);
    expect(r1).toBe(r2);
    expect(loads).toBe(2);
    const b = mapper.version;
    expect(b).not.toBe(a);
    expect(swaps).toEqual([b]);

    const good = readFileSync(join(dir, 'mapping.yaml'), 'utf8');
    writeFileSync(
      join(dir, 'mapping.yaml'),
      good.replace('termMonths: { expr: monthsTerm,', 'termMonths: { expr: monthTerm,'),
    );
    const refused = await mapper.reload('SIGHUP');
    expect(refused).toMatchObject({ ok: false, version: b });
    expect(refused.ok ? '' : refused.message).toMatch(
      /mapping\.yaml:\d+:\d+: .*unknown input field "monthTerm"/,
    );
    expect(mapper.version).toBe(b);
    expect(mapper.status().lastReloadError).toMatchObject({ trigger: 'SIGHUP' });
    // The loaded set keeps mapping loans.
    const input = JSON.parse(
      readFileSync(join(dir, 'fixtures/business-monthly-fixed/input.json'), 'utf8'),
    ) as Parameters<typeof mapper.map>[0];
    expect(await mapper.map(input)).toMatchObject({ ok: true, mappingVersion: b });

    writeFileSync(join(dir, 'mapping.yaml'), good);
    expect(await mapper.reload('SIGHUP')).toMatchObject({ ok: true });
    expect(mapper.status().lastReloadError).toBeNull();
  });

  /** Advances the clock each time the watcher has armed its debounce, until `done`. */
  async function settleWatcher(clock: FakeClock, done: () => boolean): Promise<void> {
    while (!done()) {
      await vi.waitFor(() => expect(clock.pendingSleepers()).toBeGreaterThan(0), {
        timeout: 5000,
        interval: 10,
      });
      await clock.advance(50);
    }
  }

  it('mappings.watch: an edit on disk triggers a reload once the files are quiet', async () => {
    const dir = copySet();
    const clock = new FakeClock();
    const batches: string[][] = [];
    const w = watchMappingDir(dir, clock, (files) => batches.push(files), 50);
    try {
      appendFileSync(join(dir, 'mapping.yaml'), '\n# one\n');
      await vi.waitFor(() => expect(clock.pendingSleepers()).toBe(1), { timeout: 5000, interval: 10 });
      // Quiet for less than the debounce: nothing yet.
      await clock.advance(49);
      expect(batches).toEqual([]);
      await settleWatcher(clock, () => batches.length > 0);
      expect(batches[0]).toContain('mapping.yaml');
    } finally {
      w.close();
    }
  });

  it('mappings.watch: writing fixtures (mappings test --update, preview --save-fixture) does not reload the set', async () => {
    const dir = copySet();
    const clock = new FakeClock();
    const batches: string[][] = [];
    const w = watchMappingDir(dir, clock, (files) => batches.push(files), 50);
    try {
      const fixture = join(dir, 'fixtures', 'business-monthly-fixed', 'expected.json');
      writeFileSync(fixture, readFileSync(fixture, 'utf8'));
      // The fixture's event comes before the edit's (one watcher, events in order): once the edit
      // has been reported, the fixture's event has been seen and must not be among the changes.
      appendFileSync(join(dir, 'mapping.yaml'), '\n# edit\n');
      await settleWatcher(clock, () => batches.flat().includes('mapping.yaml'));
      expect(batches.flat().filter((f) => f.startsWith('fixtures'))).toEqual([]);
    } finally {
      w.close();
    }
  });
});
