import { appendFileSync, cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCliContext, createHangupSource } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import { createBoardingStore } from '../../../src/store/index.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const addr = srv.address();
  await new Promise<void>((r) => srv.close(() => r()));
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

/** `run` in-process as main.ts starts it, with the test holding SIGTERM and SIGHUP. */
function startRun(configPath: string) {
  const shutdown = new AbortController();
  const hangup = createHangupSource();
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const { program, ctx } = buildProgram((p) =>
    createCliContext({
      clock: systemClock,
      env: {},
      stdout: sink,
      stderr: sink,
      getConfigOption: () => p.opts<{ config?: string }>().config,
      shutdown: shutdown.signal,
      hangup,
    }),
  );
  const done = program
    .parseAsync(['node', 'boarding-connector', '--config', configPath, 'run'])
    .finally(() => ctx.close());
  return { done, sighup: () => hangup.dispatch(), sigterm: () => shutdown.abort(new Error('SIGTERM')) };
}

describe('run reloads its mapping set (SIGHUP)', () => {
  let p: TestPlatform;
  beforeAll(async () => {
    p = await startTestPlatform({
      loans: 6,
      releaseRatio: 1,
      seed: 5,
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
    });
  });
  afterAll(async () => {
    await p.close();
  });

  it('boards with A, reloads to B between loans, refuses a broken edit (keeping B, saying why on /readyz and /metrics), and a CLI beside it refuses another version', async () => {
    const mappingsDir = join(mkdtempSync(join(tmpdir(), 'reload-mappings-')), 'generic');
    cpSync(join(process.cwd(), 'mappings/generic'), mappingsDir, { recursive: true });
    const port = await freePort();
    const adminPort = await freePort();
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 100,
      writesPerWindow: 30,
      mappingsDir,
      extra: {
        webhooks: { host: '127.0.0.1', port },
        admin: { host: '127.0.0.1', port: adminPort },
        schedule: { drain: '*/1 * * * * *' },
        reports: { dir: join(tmpdir(), 'reload-reports') },
      },
    });
    const db = openDatabase(cfg.dbPath);
    const store = createBoardingStore(sqliteStore(db));
    const readyz = async (): Promise<{
      ready: boolean;
      checks: Record<string, { ok: boolean; detail?: string }>;
    }> => (await (await fetch(`http://127.0.0.1:${adminPort}/readyz`)).json()) as never;
    const acknowledged = () => store.loans.list({ state: 'acknowledged' });
    const daemon = startRun(cfg.configPath);
    try {
      // Version A boards the first loans (some of the seed's loans are quarantined by the generic set: not counted).
      await vi.waitFor(async () => expect((await acknowledged()).length).toBeGreaterThanOrEqual(3), {
        timeout: 30_000,
        interval: 100,
      });
      // Every loan of the seed settled: none is mapped with A and acknowledged after the reload.
      await vi.waitFor(
        async () =>
          expect(
            (await store.loans.list()).filter((r) => r.state === 'acknowledged' || r.state === 'quarantined'),
          ).toHaveLength(6),
        { timeout: 30_000, interval: 100 },
      );
      const versionA = (await acknowledged())[0]?.mappingVersion ?? '';
      expect(versionA).toMatch(/\+[0-9a-f]{12}$/);
      expect(new Set((await acknowledged()).map((r) => r.mappingVersion))).toEqual(new Set([versionA]));
      await vi.waitFor(() => readyz(), { timeout: 10_000, interval: 50 });
      const before = (await readyz()).checks['mapping'];
      expect(before).toMatchObject({ ok: true });
      expect(before?.detail).toContain(versionA);

      // The engineer's edit, then SIGHUP: loans mapped from now on use B.
      appendFileSync(join(mappingsDir, 'mapping.yaml'), '\n# reviewed: tighten codes\n');
      expect(daemon.sighup()).toBe(true);
      await vi.waitFor(
        async () => expect((await readyz()).checks['mapping']?.detail).not.toContain(versionA),
        { timeout: 10_000, interval: 50 },
      );
      const versionB =
        /mapping (\S+) loaded/.exec((await readyz()).checks['mapping']?.detail ?? '')?.[1] ?? '';
      expect(versionB).not.toBe(versionA);
      expect(versionB).toMatch(/\+[0-9a-f]{12}$/);
      const boardedWithA = new Set((await acknowledged()).map((r) => r.id));
      const fresh = (await p.admin('POST', '/loans', { count: 4, release: true })) as { ids: string[] };
      const settled = async (ids: string[]): Promise<string[]> => {
        const out: string[] = [];
        for (const id of ids)
          if (['acknowledged', 'quarantined'].includes((await store.loans.get(id))?.state ?? ''))
            out.push(id);
        return out;
      };
      await vi.waitFor(async () => expect(await settled(fresh.ids)).toHaveLength(4), {
        timeout: 30_000,
        interval: 100,
      });
      const newlyBoarded = (await acknowledged()).filter((r) => !boardedWithA.has(r.id));
      expect(newlyBoarded.length).toBeGreaterThan(0);
      for (const r of newlyBoarded) {
        expect(r.mappingVersion).toBe(versionB);
        const pkg = JSON.parse(
          readFileSync(join(cfg.coreDir, r.coreReference ?? '', 'records.json'), 'utf8'),
        ) as { mappingVersion: string };
        expect(pkg.mappingVersion).toBe(versionB);
      }
      // Loans boarded before the reload keep A: a loan is never re-mapped by a reload.
      for (const id of boardedWithA) expect((await store.loans.get(id))?.mappingVersion).toBe(versionA);

      // `loans show` says which version the daemon boards with.
      const show = await runCli(['--config', cfg.configPath, 'loans', 'show', newlyBoarded[0]?.id ?? '']);
      expect(show.stdout).toMatch(
        new RegExp(`daemon mapping:\\s+${versionB.replace('+', '\\+')} \\(pid ${process.pid}`),
      );

      // An edit on disk without a reload: a `sync --once` beside the daemon refuses to board with it.
      const good = readFileSync(join(mappingsDir, 'mapping.yaml'), 'utf8');
      appendFileSync(join(mappingsDir, 'mapping.yaml'), '\n# not yet reloaded\n');
      const beside = await runCli(['--config', cfg.configPath, 'sync', '--once']);
      expect(beside.code).toBe(1);
      expect(beside.error).toContain(`a running daemon (pid ${process.pid}`);
      expect(beside.error).toContain(`boards with mapping ${versionB}`);

      // A broken edit: the reload is refused, B keeps boarding, /readyz and /metrics say why.
      writeFileSync(join(mappingsDir, 'mapping.yaml'), `${good}\nloan:\n  fields: [unclosed\n`);
      expect(daemon.sighup()).toBe(true);
      await vi.waitFor(
        async () => expect((await readyz()).checks['mapping']?.detail).toContain('was refused'),
        { timeout: 10_000, interval: 50 },
      );
      const refused = (await readyz()).checks['mapping'];
      expect(refused?.detail).toContain(`mapping ${versionB} in use`);
      expect(refused?.detail).toMatch(/mapping\.yaml:\d+:\d+/);
      const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
      expect(metrics).toContain(`boarding_mapping_info{version="${versionB}"} 1`);
      expect(metrics).toContain('boarding_mapping_reload_failed 1');
      const more = (await p.admin('POST', '/loans', { count: 2, release: true })) as { ids: string[] };
      await vi.waitFor(async () => expect(await settled(more.ids)).toHaveLength(2), {
        timeout: 30_000,
        interval: 100,
      });
      for (const id of more.ids) expect((await store.loans.get(id))?.mappingVersion).toBe(versionB);
    } finally {
      daemon.sigterm();
      await daemon.done;
      db.close();
    }
    // The daemon's row goes with it: nothing refuses a CLI after it stopped.
    const after = createBoardingStore(sqliteStore(openDatabase(cfg.dbPath)));
    expect(await after.daemon.all()).toEqual([]);
    await after.db.close();
  }, 120_000);
});
