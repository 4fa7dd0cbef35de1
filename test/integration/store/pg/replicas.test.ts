/**
 * Two replicas of the daemon on one PostgreSQL state (issue #26 points 2, 4 and 6), in process,
 * against the sandbox: one leads (boards, /readyz role leader), the other stands by (ready: it
 * takes webhooks); a graceful stop of the leader hands over at once, the standby boards what is
 * left in a new epoch; no loan is acknowledged twice, no core record written twice, no 429.
 * Their store config is docs/deploy.md's, as a bank copies it (TLS verify-full, the password from
 * BOARDING_STORE_PASSWORD), on the strict test server; `config check --connect` says ok with it.
 * The kill -9 / SIGSTOP / database-restart scenarios run as processes in the e2e failover suite.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { createConnectorDaemon, type ConnectorDaemon } from '../../../../src/app/daemon.js';
import { buildRuntime, type BoardingRuntime } from '../../../../src/app/runtime.js';
import { loadConfig } from '../../../../src/config/load.js';
import { systemClock } from '../../../../src/lib/clock.js';
import { silentLogger } from '../../../../src/lib/logger.js';
import { signStandardWebhook } from '../../../../src/sandbox/webhook-sender.js';
import { freePort } from '../../../support/tcp-switch.js';
import { runCliSplit } from '../../../support/cli-run.js';
import {
  createTestDatabase,
  documentedPostgresConfig,
  pgEnv,
  pgSkipReason,
  type TestDatabase,
} from '../../../support/pg.js';
import { startTestPlatform, writeConnectorConfig, type TestPlatform } from '../../pipeline/harness.js';

const SECRET = `whsec_${Buffer.from('replicas-test-signing-secret-0123').toString('base64')}`;
let db: TestDatabase;
let p: TestPlatform;
const running: Array<{ rt: BoardingRuntime; daemon: ConnectorDaemon }> = [];

beforeAll(async () => {
  if (pgSkipReason) return;
  db = await createTestDatabase({ migrate: false });
  p = await startTestPlatform({
    loans: 10,
    releaseRatio: 1,
    seed: 26,
    windowMs: 2000,
    readsPerWindow: 200,
    writesPerWindow: 60,
  });
});
afterAll(async () => {
  for (const r of running.splice(0)) {
    await r.daemon.stop();
    await r.rt.close();
  }
  await p?.close();
  await db?.drop();
});

interface Ready {
  ready: boolean;
  role: 'leader' | 'standby';
  epoch: number | null;
  holder: string;
}

describe.skipIf(pgSkipReason !== null)('two replicas on one PostgreSQL state', () => {
  it('one leads and boards, the other stands by (ready); a graceful stop hands over at once; nothing boarded twice', async () => {
    const base = writeConnectorConfig(p, { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 60 });
    const ports = { a: await freePort(), b: await freePort() };
    const configs: Partial<Record<'a' | 'b', string>> = {};
    const start = async (
      name: 'a' | 'b',
    ): Promise<{
      rt: BoardingRuntime;
      daemon: ConnectorDaemon;
      ready: () => Promise<Ready>;
      metrics: () => Promise<string>;
    }> => {
      const documented = documentedPostgresConfig(db.url);
      const text = stringify({
        platform: {
          baseUrl: p.sandbox.baseUrl,
          apiKey: p.apiKey,
          environment: 'staging',
          rateLimit: { windowMs: 2000, readsPerWindow: 200, writesPerWindow: 60 },
        },
        // store.postgres and the tin hash key exactly as docs/deploy.md shows them (password from the environment).
        store: { ...documented.store, leadership: { ttlMs: 3000, renewEveryMs: 1000 } },
        // One core both replicas write to (as they would to one core system).
        core: { adapter: 'file', file: { dir: base.coreDir } },
        mappings: { dir: `${process.cwd()}/mappings/generic` },
        customers: documented.customers,
        boarding: {
          concurrency: 2,
          retryBaseMs: 200,
          retryMaxMs: 2000,
          maxAttempts: 10,
          shutdownTimeoutMs: 2000,
          documentHosts: { allow: ['127.0.0.1'] },
        },
        webhooks: { host: '127.0.0.1', port: ports[name], secrets: [SECRET], debounceMs: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        schedule: { drain: '*/2 * * * * *', endpointCheck: '0 0 1 1 *', reconcile: '0 0 1 1 *' },
        reports: { dir: `${base.dir}/reports-${name}` },
        log: { level: 'silent' },
      });
      const configPath = `${base.dir}/replica-${name}.yaml`;
      writeFileSync(configPath, text);
      configs[name] = configPath;
      const config = loadConfig({ env: pgEnv(), fileText: text });
      const rt = await buildRuntime(config, silentLogger(), { clock: systemClock });
      const daemon = createConnectorDaemon(rt);
      await daemon.start();
      running.push({ rt, daemon });
      const url = (): string => daemon.adminUrl() ?? '';
      return {
        rt,
        daemon,
        ready: async () => (await (await fetch(`${url()}/readyz`)).json()) as Ready,
        metrics: async () => (await fetch(`${url()}/metrics`)).text(),
      };
    };

    const a = await start('a');
    await vi.waitFor(
      async () => expect(await a.ready()).toMatchObject({ ready: true, role: 'leader', epoch: 1 }),
      { timeout: 10_000 },
    );
    const b = await start('b');
    const standby = await b.ready();
    expect(standby).toMatchObject({ ready: true, role: 'standby', epoch: null });
    expect(standby.holder).not.toBe((await a.ready()).holder);
    expect(await b.metrics()).toMatch(/^boarding_leader 0$/m);

    const acked = async (): Promise<number> => Object.keys((await p.counters()).acks).length;
    await vi.waitFor(async () => expect(await acked()).toBe(10), { timeout: 30_000, interval: 200 });
    expect(await a.metrics()).toMatch(/^boarding_leader_epoch 1$/m);

    // Every replica takes webhooks: a delivery to the standby is stored once (the same delivery
    // to the leader is a duplicate), and the leader works it.
    const loanId = (await a.rt.db.get<{ id: string }>('SELECT id FROM loans ORDER BY id LIMIT 1'))!.id;
    const deliver = async (port: number): Promise<number> => {
      const body = JSON.stringify({
        id: 'evt_replicas_1',
        type: 'loan.funded',
        createdAt: new Date().toISOString(),
        data: { loanId },
      });
      const ts = Math.floor(Date.now() / 1000);
      const res = await fetch(`http://127.0.0.1:${port}/webhooks/platform`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': 'msg_replicas_1',
          'webhook-timestamp': String(ts),
          'webhook-signature': signStandardWebhook(SECRET, 'msg_replicas_1', ts, body),
        },
        body,
      });
      return res.status;
    };
    expect(await deliver(ports.b)).toBeLessThan(300);
    expect(await deliver(ports.a)).toBeLessThan(300);
    await vi.waitFor(
      async () =>
        expect(
          await a.rt.db.all<{ status: string }>(
            "SELECT status FROM webhook_inbox WHERE webhook_id = 'msg_replicas_1'",
          ),
        ).toEqual([{ status: 'processed' }]),
      { timeout: 10_000, interval: 100 },
    );

    // More loans arrive; the leader stops gracefully: the standby takes over at once (NOTIFY) and boards them.
    await p.admin('POST', '/loans', { count: 4, release: true });
    const stoppedAt = Date.now();
    const first = running.shift()!;
    await first.daemon.stop();
    await first.rt.close();
    await vi.waitFor(async () => expect(await b.ready()).toMatchObject({ role: 'leader', epoch: 2 }), {
      timeout: 10_000,
      interval: 50,
    });
    // A hint, not a poll: well inside the 3 s TTL (the poll would come only after the lease expired).
    expect(Date.now() - stoppedAt).toBeLessThan(2_500);
    await vi.waitFor(async () => expect(await acked()).toBe(14), { timeout: 30_000, interval: 200 });
    expect(await b.metrics()).toMatch(/^boarding_leadership_acquisitions_total 1$/m);

    // The documented config passes `config check --connect`: the store takes a write over verified TLS.
    const check = await runCliSplit(['--config', configs.b!, 'config', 'check', '--connect', '--json'], {
      env: pgEnv(),
    });
    const store = (
      JSON.parse(check.stdout) as { checks: Array<{ name: string; status: string; detail: string }> }
    ).checks.find((x) => x.name === 'store');
    expect(store, check.stdout).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(
        /takes a write; TLS TLSv1\.[23] .*certificate verified, host name checked/,
      ) as unknown,
    });

    const c = await p.counters();
    expect(c.duplicateAcks).toEqual({});
    expect(c.rateLimited).toBe(0);
    // One core package per loan.
    expect(readdirSync(`${base.coreDir}/packages`)).toHaveLength(14);
    const rows = await b.rt.db.all<{ state: string; n: number }>(
      'SELECT state, count(*)::int AS n FROM loans GROUP BY state',
    );
    expect(rows).toEqual([{ state: 'acknowledged', n: 14 }]);
  });
});
