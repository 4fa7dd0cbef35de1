import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { readFileSync, writeFileSync } from 'node:fs';
import { DEFAULT_PERMISSIONS } from '../../../src/sandbox/keys.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from './harness.js';

async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

function patchConfig(path: string, patch: (c: Record<string, Record<string, unknown>>) => void): void {
  const c = parse(readFileSync(path, 'utf8')) as Record<string, Record<string, unknown>>;
  patch(c);
  writeFileSync(path, stringify(c));
}

/** Exit codes cron can alert on: 0 completed (quarantines too), 4 walk incomplete, 5 core outage. */
describe('sync --once exit codes', () => {
  let p: TestPlatform;
  let fake: FakeFineract;
  const limits = { windowMs: 2000, readsPerWindow: 100, writesPerWindow: 30 };

  beforeAll(async () => {
    p = await startTestPlatform({ loans: 8, releaseRatio: 1, seed: 5, ...limits });
    fake = await startFakeFineract();
  });
  afterAll(async () => {
    await fake.close();
    await p.close();
  });

  it('0 when the walk completed, even when every loan was quarantined (a key that cannot read tax ids)', async () => {
    const masked = (await p.admin('POST', '/keys', { permissions: DEFAULT_PERMISSIONS })) as {
      apiKey: string;
    };
    const cfg = writeConnectorConfig(p, limits);
    patchConfig(cfg.configPath, (c) => {
      (c['platform'] as Record<string, unknown>)['apiKey'] = masked.apiKey;
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json', '--settle-ms', '0']);
    expect(r.error).toBeNull();
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout) as { walk: { complete: boolean }; quarantined: Record<string, number> };
    expect(s.walk.complete).toBe(true);
    expect(s.quarantined['tin_incomplete']).toBeGreaterThan(0);
  });

  it('regression: exited 0 with "walk incomplete … ECONNREFUSED"; now 4 when the platform is unreachable', async () => {
    const cfg = writeConnectorConfig(p, { ...limits, extra: {} });
    const port = await closedPort();
    patchConfig(cfg.configPath, (c) => {
      c['platform'] = { ...c['platform'], baseUrl: `http://127.0.0.1:${port}/api`, maxRetries: 0 };
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--settle-ms', '0']);
    expect(r.code).toBe(4);
    expect(r.stdout).toContain('walk incomplete');
    expect(r.error).toMatch(/walk did not complete: .*ECONNREFUSED/);
    // The dry run tells cron the same (it exited 1, as for refused credentials).
    const dry = await runCli(['--config', cfg.configPath, 'sync', '--dry-run']);
    expect(dry.code).toBe(4);
    expect(dry.error).toMatch(/sync --dry-run: the boarding queue walk did not complete: .*ECONNREFUSED/);
  });

  it('5 when a core outage stopped the pass; the loans not tried stay queued for the next run', async () => {
    fake.inject({ path: /.*/, kind: 'status-before', status: 503, times: 10_000 });
    const cfg = writeConnectorConfig(p, {
      ...limits,
      mappingsDir: join(process.cwd(), 'mappings/fineract'),
      extra: {
        core: {
          adapter: 'http',
          http: {
            baseUrl: fake.url,
            username: fake.username,
            password: fake.password,
            tenantId: fake.tenantId,
            timeoutMs: 2000,
          },
        },
        boarding: {
          concurrency: 1,
          retryBaseMs: 60_000,
          retryMaxMs: 120_000,
          maxAttempts: 10,
          shutdownTimeoutMs: 2000,
        },
      },
    });
    const r = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json', '--settle-ms', '0']);
    expect(r.code).toBe(5);
    expect(r.error).toContain('core was unavailable');
    const s = JSON.parse(r.stdout) as {
      coreOutage: { failures: number } | null;
      walk: { complete: boolean };
      attempted: number;
      states: Record<string, number>;
    };
    expect(s.walk.complete).toBe(true);
    expect(s.coreOutage?.failures).toBe(3);
    // It stopped after 3 core failures instead of spending platform reads on every loan.
    expect(s.attempted).toBeLessThan(8);
    expect(s.states['queued']).toBeGreaterThan(0);
    expect(fake.loans).toHaveLength(0);
    fake.faults.length = 0;
  });
});
