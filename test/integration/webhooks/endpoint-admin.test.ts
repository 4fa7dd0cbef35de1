import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { loadConfig } from '../../../src/config/load.js';
import { createLogger } from '../../../src/lib/logger.js';
import { platformClientFromConfig } from '../../../src/app/platform.js';
import { startSandbox } from '../../../src/sandbox/index.js';
import { checkEndpoints, createEndpointWatch } from '../../../src/platform/endpoint/endpoint-check.js';
import { webhookEndpointCheck } from '../../../src/observability/readiness.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function cli(configPath: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  stdout.on('data', (c: Buffer) => out.push(c));
  stderr.on('data', (c: Buffer) => err.push(c));
  const { program, ctx } = buildProgram(() =>
    createCliContext({
      clock: systemClock,
      env: { BOARDING_CONFIG: configPath, LOG_LEVEL: 'silent' },
      stdout,
      stderr,
      getConfigOption: () => undefined,
      shutdown: new AbortController().signal,
    }),
  );
  try {
    await program.parseAsync(['node', 'boarding-connector', ...args]);
  } finally {
    await ctx.close();
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

describe('webhooks register / list / enable and the endpoint check (sandbox)', () => {
  it('an endpoint auto-disabled after failed deliveries is reported, fails readiness, and `webhooks enable` re-activates it', async () => {
    const sb = await startSandbox({
      amounts: 'extreme',
      loans: 3,
      releaseRatio: 0,
      allowLoopbackWebhooks: true,
      webhookRetry: { attempts: 1, baseMs: 0 },
      webhookAutoDisableAfter: 1,
    });
    cleanups.push(() => sb.close());
    const dir = mkdtempSync(join(tmpdir(), 'endpoint-admin-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // Port 9 on loopback: nothing listens, every delivery fails.
    const publicUrl = 'http://127.0.0.1:9/webhooks/platform';
    const yaml = `platform: { baseUrl: "${sb.baseUrl}", apiKey: "${sb.apiKey}", environment: development }\nstore: { path: "${join(dir, 'state.sqlite')}" }\nwebhooks: { publicUrl: "${publicUrl}" }\n`;
    const configPath = join(dir, 'config.yaml');
    writeFileSync(configPath, yaml);

    const reg = await cli(configPath, [
      'webhooks',
      'register',
      '--url',
      publicUrl,
      '--events',
      'loan.funded',
      '--name',
      'test connector',
    ]);
    const secret = /BOARDING_WEBHOOK_SECRETS=(whsec_\S+)/.exec(reg.stdout)?.[1];
    expect(secret).toBeDefined();
    expect(reg.stdout).toContain('shown ONCE');
    expect(reg.stderr).not.toContain(secret!);
    // The secret is not kept anywhere by the connector (only the endpoint id with its key).
    for (const f of ['state.sqlite', 'state.sqlite-wal']) {
      if (existsSync(join(dir, f)))
        expect(readFileSync(join(dir, f)).includes(Buffer.from(secret!))).toBe(false);
    }

    const loans = (await (await fetch(`${sb.adminUrl}/loans`)).json()) as {
      data: Array<{ id: string; status: string }>;
    };
    const target = loans.data.find((l) => l.status !== 'funded');
    if (!target) throw new Error('every generated loan is already funded');
    await fetch(`${sb.adminUrl}/loans/${encodeURIComponent(target.id)}/fund`, { method: 'POST' });
    await fetch(`${sb.adminUrl}/webhooks/deliveries?wait=true`);

    const listed = JSON.parse((await cli(configPath, ['webhooks', 'list', '--json'])).stdout);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ thisConnector: true, disabled: true, consecutiveFailures: 1 });
    expect(listed[0].autoDisabledAt).toBeTruthy();
    const table = (await cli(configPath, ['webhooks', 'list'])).stdout;
    expect(table).toContain('lastFailureReason');
    expect(table).toContain('webhooks enable ID');

    // The daemon's periodic check: warns and makes /readyz fail.
    const config = loadConfig({ env: {}, fileText: yaml });
    const logs: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (s: string) => void logs.push(s) } });
    const platform = platformClientFromConfig(config, { clock: systemClock, logger });
    cleanups.push(() => platform.close());
    const watch = createEndpointWatch();
    const result = await checkEndpoints(platform, config, logger, { clock: systemClock, watch });
    expect(result.state).toBe('disabled');
    expect(logs.join('')).toContain(`webhooks enable ${String(listed[0].id)}`);
    expect(logs.join('')).not.toContain(secret!);
    expect(webhookEndpointCheck(watch)()).toMatchObject({ ok: false });

    const enabled = await cli(configPath, ['webhooks', 'enable', String(listed[0].id)]);
    expect(enabled.stdout).toContain('is now active');
    expect((await checkEndpoints(platform, config, logger, { clock: systemClock, watch })).state).toBe(
      'active',
    );
    expect(webhookEndpointCheck(watch)()).toMatchObject({ ok: true });
  });

  it('rejects unknown events and bad URLs as usage errors before any request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'endpoint-usage-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const configPath = join(dir, 'config.yaml');
    writeFileSync(
      configPath,
      `platform: { baseUrl: "http://127.0.0.1:9/api", apiKey: "pk_test_x", environment: development }\nstore: { path: "${join(dir, 's.sqlite')}" }\n`,
    );
    await expect(
      cli(configPath, [
        'webhooks',
        'register',
        '--url',
        'https://x.example/webhooks/platform',
        '--events',
        'loan.exploded',
      ]),
    ).rejects.toMatchObject({
      name: 'UsageError',
      message: expect.stringContaining('loan.exploded'),
    });
    await expect(cli(configPath, ['webhooks', 'register', '--url', 'not a url'])).rejects.toMatchObject({
      name: 'UsageError',
      message: expect.stringContaining('--url'),
    });
  });
});
