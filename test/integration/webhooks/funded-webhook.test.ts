import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import type { CycleSummary } from '../../../src/pipeline/cycle.js';
import { createConnectorDaemon } from '../../../src/app/daemon.js';
import { buildRuntime } from '../../../src/app/runtime.js';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { loadConfig } from '../../../src/config/load.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { startSandbox, type RunningSandbox } from '../../../src/sandbox/index.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { FakeCore } from '../../support/fake-core.js';
import { FakeMapper } from '../../support/fake-mapper.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A free loopback port: the endpoint URL must be known before registration gives the secret. */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

function configYaml(sb: RunningSandbox, dir: string, port: number, secrets: string[]): string {
  return [
    'platform:',
    `  baseUrl: ${sb.baseUrl}`,
    `  apiKey: ${sb.apiKey}`,
    '  environment: development',
    `store: { path: ${join(dir, 'state.sqlite')} }`,
    'webhooks:',
    '  host: 127.0.0.1',
    `  port: ${port}`,
    `  publicUrl: http://127.0.0.1:${port}/webhooks/platform`,
    `  secrets: [${secrets.map((s) => JSON.stringify(s)).join(', ')}]`,
    '  debounceMs: 0',
    // The ops pages on their own listener (any free port).
    'admin: { host: 127.0.0.1, port: 0 }',
    // Far away: only the startup cycle and the webhook may run a cycle in this test.
    "schedule: { drain: '0 0 1 1 *', endpointCheck: '0 0 1 1 *' }",
    `reports: { dir: ${join(dir, 'reports')} }`,
    '',
  ].join('\n');
}

/** Runs one CLI command in-process and returns its stdout. */
async function cli(configPath: string, args: string[]): Promise<string> {
  const stdout = new PassThrough();
  const chunks: Buffer[] = [];
  stdout.on('data', (c: Buffer) => chunks.push(c));
  const { program, ctx } = buildProgram(() =>
    createCliContext({
      clock: systemClock,
      env: { BOARDING_CONFIG: configPath, LOG_LEVEL: 'silent' },
      stdout,
      stderr: new PassThrough(),
      getConfigOption: () => undefined,
      shutdown: new AbortController().signal,
    }),
  );
  try {
    await program.parseAsync(['node', 'boarding-connector', ...args]);
  } finally {
    await ctx.close();
  }
  return Buffer.concat(chunks).toString('utf8');
}

describe('loan.funded webhook → early cycle (sandbox end to end)', () => {
  it('registers the endpoint, and a funded released loan is boarded long before the next scheduled cycle', async () => {
    const sb = await startSandbox({
      amounts: 'extreme',
      loans: 6,
      releaseRatio: 0,
      allowLoopbackWebhooks: true,
      readsPerWindow: 10_000,
      writesPerWindow: 10_000,
      windowMs: 60_000,
    });
    cleanups.push(() => sb.close());
    const dir = mkdtempSync(join(tmpdir(), 'funded-e2e-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const port = await freePort();
    const configPath = join(dir, 'config.yaml');

    // 1. `webhooks register` against the sandbox: the secret is printed once.
    writeFileSync(configPath, configYaml(sb, dir, port, []));
    const registered = JSON.parse(
      await cli(configPath, [
        'webhooks',
        'register',
        '--url',
        `http://127.0.0.1:${port}/webhooks/platform`,
        '--json',
      ]),
    );
    expect(registered).toMatchObject({ registered: true, endpoint: { status: 'active' } });
    const secret = registered.secret as string;
    expect(secret).toMatch(/^whsec_/);
    // A second register of the same URL does not create a second endpoint.
    expect(
      JSON.parse(
        await cli(configPath, [
          'webhooks',
          'register',
          '--url',
          `http://127.0.0.1:${port}/webhooks/platform`,
          '--json',
        ]),
      ),
    ).toMatchObject({ registered: false });
    const listed = JSON.parse(await cli(configPath, ['webhooks', 'list', '--json']));
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id: registered.endpoint.id, thisConnector: true, disabled: false });

    // 2. The daemon with the receiver, configured with the secret.
    writeFileSync(configPath, configYaml(sb, dir, port, [secret]));
    const config = loadConfig({ env: {}, fileText: configYaml(sb, dir, port, [secret]) });
    const rt = await buildRuntime(config, silentLogger(), {
      clock: systemClock,
      mapper: new FakeMapper(),
      core: new FakeCore(),
    });
    cleanups.push(() => rt.close());
    // The same composition `run` uses.
    const cycles: CycleSummary[] = [];
    const waiters: Array<() => void> = [];
    const daemon = createConnectorDaemon(rt, {
      onCycle: (s) => {
        cycles.push(s);
        for (const w of waiters.splice(0)) w();
      },
    });
    const adminUrlOf = (): string => {
      const url = daemon.adminUrl();
      if (!url) throw new Error('the webhook service has no admin listener');
      return url;
    };
    cleanups.push(() => daemon.stop());
    await daemon.start();
    await daemon.idle();
    expect(cycles.map((c) => c.reason)).toEqual(['startup']);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);

    // 3. Release a loan, then fund it: only the loan.funded webhook can start the next cycle.
    const loans = (await (await fetch(`${sb.adminUrl}/loans?released=false`)).json()) as {
      data: Array<{ id: string; status: string }>;
    };
    const target = loans.data.find((l) => l.status !== 'funded') ?? loans.data[0];
    if (!target) throw new Error('sandbox generated no loans');
    expect(
      (await fetch(`${sb.adminUrl}/loans/${encodeURIComponent(target.id)}/release`, { method: 'POST' }))
        .status,
    ).toBe(200);
    const boarded = new Promise<void>((resolve, reject) => {
      const deadline = setTimeout(
        () =>
          reject(
            new Error(`loan ${target.id} not boarded; cycles: ${cycles.map((c) => c.reason).join(',')}`),
          ),
        20_000,
      );
      const check = async (): Promise<void> => {
        if ((await rt.store.loans.get(target.id))?.state === 'acknowledged') {
          clearTimeout(deadline);
          resolve();
        } else waiters.push(check);
      };
      waiters.push(check);
    });
    expect(
      (await fetch(`${sb.adminUrl}/loans/${encodeURIComponent(target.id)}/fund`, { method: 'POST' })).status,
    ).toBe(200);
    await boarded;

    const row = await rt.store.loans.get(target.id);
    expect(row?.state).toBe('acknowledged');
    // The row was created after the loan.funded event: the funded time was copied from the inbox.
    expect(row?.fundedAtIso).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(cycles.slice(1).some((c) => c.reason.startsWith('webhook'))).toBe(true);
    expect(cycles.every((c) => c.reason !== 'schedule')).toBe(true);
    // The funded time is on record (inbox, and the loans row once it exists).
    expect(await createWebhookInbox(rt.db).fundedAt(target.id)).not.toBeNull();
    const sandboxView = (await (
      await fetch(`${sb.adminUrl}/loans/${encodeURIComponent(target.id)}`)
    ).json()) as { boarding?: { boarded?: boolean } };
    expect(JSON.stringify(sandboxView)).toContain('"boarded":true');

    // 4. Metrics and readiness of the running service, on the admin listener only.
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    const adminUrl = adminUrlOf();
    const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
    expect(metrics).toMatch(
      /boarding_webhooks_received_total\{outcome="accepted",event_type="loan.funded"\} 1/,
    );
    expect(metrics).toMatch(/boarding_cycle_duration_seconds_count\{outcome="ok",trigger="webhook"\} [1-9]/);
    expect(metrics).toMatch(/boarding_loans\{state="acknowledged"\} 1/);
    const ready = await fetch(`${adminUrl}/readyz`);
    expect(ready.status).toBe(200);
  });
});
