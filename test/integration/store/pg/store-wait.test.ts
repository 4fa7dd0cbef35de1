/**
 * `run` with its PostgreSQL unreachable at start (issue #26 point 5), on a REAL PostgreSQL behind a
 * TCP port the test switches on and off (test/support/tcp-switch.ts): the process stays up, /healthz
 * answers, /readyz answers 503 naming store.postgres.url (the password hidden), the store is
 * retried with backoff on the injected clock and each distinct failure logged once; when the
 * database answers, the daemon starts and loans board.
 */
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { createConnectorDaemon } from '../../../../src/app/daemon.js';
import { buildRuntime, type BoardingRuntime } from '../../../../src/app/runtime.js';
import { openStoreWaiting } from '../../../../src/app/store-wait.js';
import type { CycleSummary } from '../../../../src/pipeline/cycle.js';
import { loadConfig } from '../../../../src/config/load.js';
import { createCliContext } from '../../../../src/cli/context.js';
import { buildProgram } from '../../../../src/cli/program.js';
import { systemClock } from '../../../../src/lib/clock.js';
import { createLogger } from '../../../../src/lib/logger.js';
import type { StoreTarget } from '../../../../src/store/open.js';
import { FakeClock } from '../../../support/fake-clock.js';
import {
  createTestDatabase,
  pgEnv,
  pgPassword,
  pgServerAddress,
  pgSkipReason,
  pgStoreConfig,
  pgTarget,
  type TestDatabase,
  viaPort,
} from '../../../support/pg.js';
import { freePort, startTcpSwitch, type TcpSwitch } from '../../../support/tcp-switch.js';
import { startTestPlatform, writeConnectorConfig, type TestPlatform } from '../../pipeline/harness.js';

// The login role's real password (the server checks it): the tests look for it where it must not appear.
const PASSWORD = pgPassword;
let db: TestDatabase;
let sw: TcpSwitch;
let proxiedUrl: string;

beforeAll(async () => {
  if (pgSkipReason) return;
  db = await createTestDatabase({ migrate: false });
  sw = await startTcpSwitch(pgServerAddress(), 'off');
  // TLS runs end to end through the switch (the certificate names 127.0.0.1, where it listens).
  proxiedUrl = viaPort(db.url, sw.port);
});
afterAll(async () => {
  if (pgSkipReason) return;
  await sw.close();
  await db.drop();
});
afterEach(() => {
  sw?.off();
});

function capture(): {
  logger: ReturnType<typeof createLogger>;
  lines: () => Array<{ level: number; msg: string }>;
} {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      text += chunk.toString();
      cb();
    },
  });
  return {
    logger: createLogger({ level: 'info', destination: stream }),
    lines: () =>
      text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as { level: number; msg: string }),
  };
}

const target = (): Extract<StoreTarget, { engine: 'postgres' }> =>
  pgTarget(proxiedUrl, { poolSize: 2, connectTimeoutMs: 2_000 });

describe.skipIf(pgSkipReason !== null)('run waits for an unreachable PostgreSQL at start', () => {
  it('serves /healthz and a 503 /readyz naming store.postgres.url, retries with backoff, logs the failure once, opens when the server answers', async () => {
    const clock = new FakeClock({ start: Date.parse('2026-11-26T01:00:00Z') });
    const log = capture();
    let adminUrl: string | null = null;
    const opening = openStoreWaiting(target(), {
      clock,
      logger: log.logger,
      signal: new AbortController().signal,
      admin: { host: '127.0.0.1', port: 0 },
      onWaiting: (url) => {
        adminUrl = url;
      },
    });
    await vi.waitFor(() => expect(adminUrl).not.toBeNull(), { timeout: 10_000 });
    expect(sw.accepted()).toBe(1);
    expect((await fetch(`${adminUrl}/healthz`)).status).toBe(200);
    const res = await fetch(`${adminUrl}/readyz`);
    expect(res.status).toBe(503);
    const body = (await res.json()) as {
      ready: boolean;
      checks: { database: { ok: boolean; detail: string } };
    };
    expect(body.ready).toBe(false);
    expect(body.checks.database.ok).toBe(false);
    expect(body.checks.database.detail).toContain('store.postgres.url');
    expect(body.checks.database.detail).toContain(`127.0.0.1:${sw.port}`);
    expect(JSON.stringify(body)).not.toContain(PASSWORD);

    // Nothing is tried again before the backoff has passed on the injected clock.
    await clock.advance(500);
    expect(sw.accepted()).toBe(1);
    // Three more refused attempts: still one error line (the same failure is not logged again).
    for (let i = 0; i < 3; i++) {
      const before = sw.accepted();
      await vi.waitFor(
        async () => {
          await clock.advance(60_000);
          expect(sw.accepted()).toBeGreaterThan(before);
        },
        { timeout: 10_000, interval: 20 },
      );
    }
    const attempts = sw.accepted();
    expect(attempts).toBeGreaterThanOrEqual(4);
    const errors = log.lines().filter((l) => l.level >= 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toContain('store.postgres.url');
    expect(JSON.stringify(log.lines())).not.toContain(PASSWORD);

    sw.on();
    let opened = false;
    void opening.then(() => {
      opened = true;
    });
    await vi.waitFor(
      async () => {
        await clock.advance(60_000);
        expect(opened).toBe(true);
      },
      { timeout: 15_000, interval: 50 },
    );
    const store = (await opening)!;
    try {
      expect(await store.writeBlocker()).toBeNull();
      expect(log.lines().some((l) => l.msg.includes('the state store answers'))).toBe(true);
      // The waiting listener is gone: the daemon's own admin listener takes the port.
      await expect(fetch(`${adminUrl}/healthz`)).rejects.toThrow();
    } finally {
      await store.close();
    }
  });

  it('ends the wait on shutdown (resolves null, the listener closed)', async () => {
    const clock = new FakeClock({ start: Date.parse('2026-11-26T01:00:00Z') });
    const stop = new AbortController();
    let adminUrl: string | null = null;
    const opening = openStoreWaiting(target(), {
      clock,
      logger: capture().logger,
      signal: stop.signal,
      admin: { host: '127.0.0.1', port: 0 },
      onWaiting: (url) => {
        adminUrl = url;
      },
    });
    await vi.waitFor(() => expect(adminUrl).not.toBeNull(), { timeout: 10_000 });
    stop.abort();
    await expect(opening).resolves.toBeNull();
    await expect(fetch(`${adminUrl}/healthz`)).rejects.toThrow();
  });

  it('a config problem that waiting cannot fix fails at once, with no listener', async () => {
    let waited = false;
    await expect(
      openStoreWaiting(
        { ...target(), ssl: 'verify-full', sslRootCert: '/nonexistent/ca.pem' },
        {
          clock: new FakeClock(),
          logger: capture().logger,
          signal: new AbortController().signal,
          admin: { host: '127.0.0.1', port: 0 },
          onWaiting: () => (waited = true),
        },
      ),
    ).rejects.toThrow(/store\.postgres\.sslRootCert: cannot read \/nonexistent\/ca\.pem/);
    expect(waited).toBe(false);
  });

  it('`run` stays up with the database unreachable, /readyz 503 with the reason; the database answers: the daemon starts and loans board', async () => {
    const p: TestPlatform = await startTestPlatform({
      loans: 4,
      releaseRatio: 1,
      seed: 11,
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
    });
    const adminPort = await freePort();
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
      extra: {
        store: { engine: 'postgres', postgres: pgStoreConfig(proxiedUrl, { connectTimeoutMs: 2000 }) },
        customers: { tinHashKey: 'store-wait-test-key-0123456789' },
        webhooks: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: adminPort },
        schedule: { drain: '0 0 1 1 *', endpointCheck: '0 0 1 1 *' },
      },
    });
    const shutdown = new AbortController();
    const sink = new Writable({ write: (_c, _e, cb) => cb() });
    const { program, ctx } = buildProgram((pr) =>
      createCliContext({
        clock: systemClock,
        env: pgEnv(),
        stdout: sink,
        stderr: sink,
        getConfigOption: () => pr.opts<{ config?: string }>().config,
        shutdown: shutdown.signal,
      }),
    );
    program.exitOverride();
    const running = program.parseAsync(['node', 'boarding-connector', '--config', cfg.configPath, 'run']);
    const outcome = running.then(
      () => 'exited 0',
      (err: Error) => `failed: ${err.message}`,
    );
    const admin = `http://127.0.0.1:${adminPort}`;
    const check = async (): Promise<{ status: number; database?: { ok: boolean; detail?: string } }> => {
      const r = await fetch(`${admin}/readyz`);
      const b = (await r.json()) as { checks: { database?: { ok: boolean; detail?: string } } };
      return { status: r.status, ...(b.checks.database ? { database: b.checks.database } : {}) };
    };
    try {
      await vi.waitFor(async () => expect((await fetch(`${admin}/healthz`)).status).toBe(200), {
        timeout: 15_000,
        interval: 50,
      });
      const waiting = await check();
      expect(waiting.status).toBe(503);
      expect(waiting.database?.detail).toContain('store.postgres.url');
      expect(waiting.database?.detail).not.toContain(PASSWORD);
      // The process is still up (the command has not returned) while the database is away.
      expect(await Promise.race([outcome, Promise.resolve('running')])).toBe('running');

      sw.on();
      // The daemon's own listener takes the port: its database check passes, the loans board.
      await vi.waitFor(async () => expect((await check()).database?.ok).toBe(true), {
        timeout: 20_000,
        interval: 100,
      });
      const pool = db.pool('observer', 1);
      await vi.waitFor(
        async () => {
          const rows = (
            await pool.query<{ n: number }>(
              "SELECT count(*)::int AS n FROM loans WHERE state = 'acknowledged'",
            )
          ).rows;
          expect(rows[0]!.n).toBe(4);
        },
        { timeout: 30_000, interval: 100 },
      );
      // Acknowledged on the platform too, each once.
      expect(Object.values((await p.counters()).acks)).toEqual([1, 1, 1, 1]);
    } finally {
      shutdown.abort();
      await outcome;
      await ctx.close();
      await p.close();
    }
    expect(await outcome).toBe('exited 0');
  }, 60_000);
});

describe.skipIf(pgSkipReason !== null)('the database lost mid-run', () => {
  it('a cycle during the outage fails without marking loans, /readyz says why; the next cycle after it returns boards them (regression: a cycle failing on the database before the lease left the runner "already running" for good)', async () => {
    const p: TestPlatform = await startTestPlatform({
      loans: 6,
      releaseRatio: 0,
      seed: 12,
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
    });
    const outage = await createTestDatabase({ migrate: false });
    const link = await startTcpSwitch(pgServerAddress(), 'on');
    const url = viaPort(outage.url, link.port);
    const cfg = writeConnectorConfig(p, {
      windowMs: 2000,
      readsPerWindow: 200,
      writesPerWindow: 60,
      extra: {
        store: { engine: 'postgres', postgres: pgStoreConfig(url, { connectTimeoutMs: 2000 }) },
        customers: { tinHashKey: 'store-wait-test-key-0123456789' },
        webhooks: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        schedule: { drain: '0 0 1 1 *', endpointCheck: '0 0 1 1 *' },
      },
    });
    const config = loadConfig({
      env: pgEnv(),
      filePath: cfg.configPath,
      fileText: readFileSync(cfg.configPath, 'utf8'),
    });
    const log = capture();
    let rt: BoardingRuntime | undefined;
    let daemon: ReturnType<typeof createConnectorDaemon> | undefined;
    const observer = outage.pool('observer', 1);
    const states = async (): Promise<Record<string, string>> =>
      Object.fromEntries(
        (await observer.query<{ id: string; state: string }>('SELECT id, state FROM loans')).rows.map((r) => [
          r.id,
          r.state,
        ]),
      );
    try {
      rt = await buildRuntime(config, log.logger, { clock: systemClock });
      const cycles: CycleSummary[] = [];
      daemon = createConnectorDaemon(rt, { onCycle: (s) => void cycles.push(s) });
      await daemon.start();
      const admin = daemon.adminUrl()!;
      const release = async (ids: string[]): Promise<void> => {
        for (const id of ids)
          expect(
            (await fetch(`${p.sandbox.adminUrl}/loans/${encodeURIComponent(id)}/release`, { method: 'POST' }))
              .status,
          ).toBe(200);
      };
      const all = (
        (await (await fetch(`${p.sandbox.adminUrl}/loans?released=false`)).json()) as {
          data: Array<{ id: string }>;
        }
      ).data.map((l) => l.id);
      expect(all).toHaveLength(6);
      await release(all.slice(0, 3));
      daemon.triggerCycle('test: first loans');
      await vi.waitFor(
        async () => expect(Object.values(await states()).filter((s) => s === 'acknowledged')).toHaveLength(3),
        { timeout: 30_000, interval: 100 },
      );
      const before = await states();

      // The database goes away (every open connection cut, new ones reset); more loans are released.
      link.off();
      const waiting = all.slice(3);
      await release(waiting);
      const failedBefore = log.lines().filter((l) => l.msg.includes('boarding cycle failed')).length;
      const cyclesBefore = cycles.length;
      daemon.triggerCycle('test: database away');
      await vi.waitFor(
        () =>
          expect(
            log.lines().filter((l) => l.msg.includes('boarding cycle failed')).length + cycles.length,
          ).toBeGreaterThan(failedBefore + cyclesBefore),
        {
          timeout: 30_000,
          interval: 50,
        },
      );
      const notReady = await fetch(`${admin}/readyz`);
      expect(notReady.status).toBe(503);
      const body = (await notReady.json()) as { checks: { database: { ok: boolean; detail?: string } } };
      expect(body.checks.database.ok).toBe(false);
      // Nothing acknowledged on the platform for the new loans while the database was away.
      const acksDuring = (await p.counters()).acks;
      for (const id of waiting) expect(acksDuring[id] ?? 0).toBe(0);

      // Back: nothing was marked during the outage; the next cycle boards the new loans, each once.
      link.on();
      expect(await states()).toEqual(before);
      await vi.waitFor(
        async () =>
          expect(((await (await fetch(`${admin}/readyz`)).json()) as typeof body).checks.database.ok).toBe(
            true,
          ),
        { timeout: 15_000, interval: 100 },
      );
      daemon.triggerCycle('test: database back');
      // Before the fix every later cycle failed with "a boarding cycle is already running".
      await vi.waitFor(
        async () => expect(Object.values(await states()).filter((s) => s === 'acknowledged')).toHaveLength(6),
        { timeout: 30_000, interval: 100 },
      );
      expect(Object.values((await p.counters()).acks)).toEqual([1, 1, 1, 1, 1, 1]);
      expect(daemon.adminUrl()).not.toBeNull();
    } finally {
      await daemon?.stop();
      await rt?.close();
      await link.close();
      await outage.drop();
      await p.close();
    }
  }, 90_000);
});
