import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock, type Clock } from '../../../src/lib/clock.js';
import { createDiskWatch } from '../../../src/observability/disk-space.js';
import { createClockSkewWatch, measureClockOffset } from '../../../src/observability/clock-skew.js';
import { clockSkewCheck, coreOutageCheck, diskSpaceCheck } from '../../../src/observability/readiness.js';
import { openStore } from '../../../src/store/open.js';
import { createTestDatabase, pgSkipReason, type TestDatabase } from '../../support/pg.js';
import { pgStore } from '../../../src/store/pg/store.js';

/** A logger that keeps what it was told (the ALERT lines are what an operator's log search sees). */
function captureLogger(): {
  logger: never;
  lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }>;
} {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) =>
    lines.push({ level, obj, msg });
  const logger = {
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    debug: at('debug'),
    child: () => logger,
  };
  return { logger: logger as never, lines };
}

function steppedClock(start: number): Clock & { advance(ms: number): void } {
  let t = start;
  return { ...systemClock, now: () => t, advance: (ms: number) => (t += ms) };
}

describe('disk watch (boarding.minFreeDiskMb)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'disk-watch-'));

  it('says which directory is short, fails readiness, and logs one ALERT a minute while it lasts', async () => {
    const { logger, lines } = captureLogger();
    const clock = steppedClock(1_000_000);
    // No file system has this much free: the watch sees "full" on a real statfs.
    const watch = createDiskWatch({
      targets: [{ key: 'core.file.dir', dir: join(dir, 'not-created-yet') }],
      minFreeBytes: Number.MAX_SAFE_INTEGER,
      clock,
      logger,
    });
    const s = await watch.refresh();
    expect(s.ok).toBe(false);
    expect(s.detail).toMatch(
      /^DISK FULL: core\.file\.dir .*not-created-yet has .* free \(below boarding\.minFreeDiskMb/,
    );
    expect(s.readings[0]?.freeBytes).toBeGreaterThan(0);
    expect(await diskSpaceCheck(() => watch.last())()).toEqual({ ok: false, detail: s.detail });
    clock.advance(30_000);
    await watch.refresh();
    clock.advance(31_000);
    await watch.refresh();
    expect(lines.filter((l) => l.level === 'error').map((l) => l.obj['alert'])).toEqual([
      'disk.full',
      'disk.full',
    ]);
  });

  it('is ok with space to spare, and logs the recovery once after an alert', async () => {
    const { logger, lines } = captureLogger();
    const s = await createDiskWatch({
      targets: [{ key: 'store.path', dir }],
      minFreeBytes: 1,
      clock: systemClock,
      logger,
    }).refresh();
    expect(s.ok).toBe(true);
    expect(s.detail).toMatch(/^store\.path: [\d.]+ (B|[KMG]iB) free$/);
    expect(lines).toEqual([]);
  });
});

describe('core outage readiness', () => {
  it('fails while the last pass stopped on the core and names why', () => {
    let outage: { since: number; failures: number; message: string } | null = {
      since: Date.parse('2026-03-01T12:00:00Z'),
      failures: 3,
      message: 'file core: ENOSPC: no space left on device',
    };
    const check = coreOutageCheck(() => outage);
    expect(check()).toEqual({
      ok: false,
      detail: expect.stringMatching(
        /^CORE OUTAGE since 2026-03-01T12:00:00\.000Z: 3 writes in a row failed \(file core: ENOSPC/,
      ),
    });
    outage = null;
    expect(check()).toEqual({ ok: true });
  });
});

describe('clock skew on SQLite', () => {
  it('has nothing to compare', async () => {
    const db = await openStore({
      engine: 'sqlite',
      path: join(mkdtempSync(join(tmpdir(), 'skew-')), 'state.sqlite'),
    });
    try {
      expect(await measureClockOffset(db, systemClock)).toBeNull();
      const watch = createClockSkewWatch({ db, clock: systemClock, maxSkewMs: 1000 });
      expect(await clockSkewCheck(() => watch.check())()).toEqual({
        ok: true,
        detail: expect.stringMatching(/^SQLite/),
      });
    } finally {
      await db.close();
    }
  });
});

describe.skipIf(pgSkipReason !== null)('clock skew against PostgreSQL', () => {
  let tdb: TestDatabase;
  afterAll(async () => {
    await tdb?.drop();
  });

  it('measures a host clock minutes ahead or behind the database, and fails readiness at store.maxClockSkewMs', async () => {
    tdb = await createTestDatabase({ migrate: false });
    const db = pgStore(tdb.pool('skew', 1), 'test');
    const shifted = (ms: number): Clock => ({ ...systemClock, now: () => Date.now() + ms });
    const same = await measureClockOffset(db, systemClock);
    expect(Math.abs(same!.offsetMs)).toBeLessThan(1000);
    const ahead = await measureClockOffset(db, shifted(5 * 60_000));
    expect(ahead!.offsetMs).toBeLessThan(-5 * 60_000 + 1000);
    expect(ahead!.offsetMs).toBeGreaterThan(-5 * 60_000 - 1000);
    const { logger, lines } = captureLogger();
    const behind = createClockSkewWatch({ db, clock: shifted(-3 * 60_000), maxSkewMs: 30_000, logger });
    const r = await clockSkewCheck(() => behind.check())();
    expect(r.ok).toBe(false);
    expect(r.detail).toMatch(
      /^CLOCK SKEW: this host's clock is 3\.0 min behind the database's \(store\.maxClockSkewMs 30000\)/,
    );
    expect(lines.filter((l) => l.level === 'error').map((l) => l.obj['alert'])).toEqual(['clock.skew']);
    const fine = createClockSkewWatch({ db, clock: shifted(2_000), maxSkewMs: 30_000 });
    expect(await fine.check()).toMatchObject({
      ok: true,
      detail: expect.stringMatching(/ahead of the database's/),
    });
  });
});
