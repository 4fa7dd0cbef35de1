import { createServer } from 'node:net';
import { join } from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { DEFAULT_PERMISSIONS } from '../../../src/sandbox/keys.js';
import { startFakeFineract, type FakeFineract } from '../../support/fake-fineract.js';
import { runCli, startTestPlatform, writeConnectorConfig, type TestPlatform } from '../pipeline/harness.js';

type Raw = Record<string, Record<string, unknown>>;

function patchConfig(path: string, patch: (c: Raw) => void): void {
  const c = parse(readFileSync(path, 'utf8')) as Raw;
  patch(c);
  writeFileSync(path, stringify(c));
}

async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

interface Check {
  name: string;
  status: string;
  detail: string;
}

function byName(stdout: string): Record<string, Check> {
  const j = JSON.parse(stdout) as { checks: Check[] };
  return Object.fromEntries(j.checks.map((c) => [c.name, c]));
}

const PUBLIC_URL = 'https://connector.bank.example/webhooks/platform';

describe('config check [--connect]', () => {
  let p: TestPlatform;
  let fake: FakeFineract;
  const limits = { windowMs: 60_000, readsPerWindow: 100, writesPerWindow: 30 };

  beforeAll(async () => {
    p = await startTestPlatform({ loans: 6, releaseRatio: 1, seed: 9, ...limits });
    fake = await startFakeFineract({ products: [1, 2] });
  });
  afterAll(async () => {
    await fake.close();
    await p.close();
  });

  it('regression: plain `config check` said ok for a missing mappings.dir; now one FAIL line and exit 1', async () => {
    const cfg = writeConnectorConfig(p, { ...limits, mappingsDir: '/nonexistent/mappings/mybank' });
    const r = await runCli(['--config', cfg.configPath, 'config', 'check']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^ok {4}config {13}.*is valid$/m);
    expect(r.stdout).toMatch(/^FAIL {2}mappings\.dir {7}\/nonexistent\/mappings\/mybank is not a directory/m);
    expect(r.error).toContain('mappings.dir');
    // Plain check makes no call and opens no database.
    expect((await p.counters()).byBucket.read).toBe(0);
  });

  it('--connect: a key that cannot read tax ids fails with what it will do to boarding; few reads, none written', async () => {
    const masked = (await p.admin('POST', '/keys', { permissions: DEFAULT_PERMISSIONS })) as {
      apiKey: string;
    };
    const cfg = writeConnectorConfig(p, limits);
    patchConfig(cfg.configPath, (c) => {
      c['platform']!['apiKey'] = masked.apiKey;
    });
    await p.admin('POST', '/counters/reset');
    const r = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect', '--json']);
    expect(r.code).toBe(1);
    const checks = byName(r.stdout);
    expect(checks['platform']?.status).toBe('ok');
    expect(checks['platform.key']?.status).toBe('ok');
    expect(checks['platform.ssn']).toMatchObject({ status: 'fail' });
    expect(checks['platform.ssn']?.detail).toContain(
      'without read:people:ssn every loan with a person quarantines as tin_incomplete unless mappings.allowLast4Tin',
    );
    expect(checks['store']?.status).toBe('ok');
    expect(checks['core']?.status).toBe('ok');
    expect(checks['webhooks.endpoint']?.status).toBe('skip');
    const c = await p.counters();
    expect(c.byBucket.read).toBeLessThanOrEqual(10);
    expect(c.byBucket.write).toBe(0);
    // The budget is the shared one: the reads are in the state database's ledger.
    const status = await runCli(['--config', cfg.configPath, 'platform', 'status', '--json']);
    expect(status.code).toBe(0);
  });

  it('warns on an empty webhooks.secrets (every delivery would be refused), with or without --connect', async () => {
    const cfg = writeConnectorConfig(p, limits);
    const r = await runCli(['--config', cfg.configPath, 'config', 'check']);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(
      /^warn {2}webhooks\.secrets +empty: the webhook receiver refuses every delivery \(401\).*BOARDING_WEBHOOK_SECRETS/m,
    );
    patchConfig(cfg.configPath, (c) => {
      c['webhooks'] = { secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] };
    });
    const set = await runCli(['--config', cfg.configPath, 'config', 'check']);
    expect(set.stdout).not.toMatch(/webhooks\.secrets/);
  });

  it('regression: `config check` said nothing of admin.host 0.0.0.0 without admin.allowedHosts (the console by its DNS name got 421); now a warning', async () => {
    const cfg = writeConnectorConfig(p, limits);
    const quiet = await runCli(['--config', cfg.configPath, 'config', 'check']);
    expect(quiet.stdout).not.toMatch(/admin\.host/);
    for (const host of ['0.0.0.0', '::']) {
      patchConfig(cfg.configPath, (c) => {
        c['admin'] = { host, port: 0 };
      });
      const r = await runCli(['--config', cfg.configPath, 'config', 'check']);
      expect(r.code, r.stdout).toBe(0);
      expect(r.stdout).toMatch(
        /^warn {2}admin\.host +\S+ listens on every interface, but without admin\.allowedHosts .* gets 421; list those names in admin\.allowedHosts/m,
      );
    }
    patchConfig(cfg.configPath, (c) => {
      c['admin'] = { host: '0.0.0.0', port: 0, allowedHosts: ['ops.bank.example'] };
    });
    const listed = await runCli(['--config', cfg.configPath, 'config', 'check', '--json']);
    expect(listed.code, listed.stdout).toBe(0);
    expect(byName(listed.stdout)['admin.host']).toBeUndefined();
  });

  it('--connect with allowLast4Tin: a warning, not a failure', async () => {
    const masked = (await p.admin('POST', '/keys', { permissions: DEFAULT_PERMISSIONS })) as {
      apiKey: string;
    };
    const cfg = writeConnectorConfig(p, limits);
    patchConfig(cfg.configPath, (c) => {
      c['platform']!['apiKey'] = masked.apiKey;
      c['mappings']!['allowLast4Tin'] = true;
    });
    const r = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect', '--json']);
    expect(r.code, r.stdout).toBe(0);
    expect(byName(r.stdout)['platform.ssn']?.status).toBe('warn');
  });

  it('--connect all ok: full key, endpoint registered and active, file core, one line per check', async () => {
    const cfg = writeConnectorConfig(p, { ...limits, extra: {} });
    patchConfig(cfg.configPath, (c) => {
      // Port 0: the port check is ok whatever else runs on this machine.
      c['webhooks'] = { port: 0, publicUrl: PUBLIC_URL, secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] };
    });
    // Not registered yet: FAIL with the command that fixes it.
    const missing = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect']);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(
      /^FAIL {2}webhooks\.endpoint +no endpoint registered for .*webhooks register --url/m,
    );
    const res = await fetch(`${p.sandbox.baseUrl}/public/v1/webhook-endpoints`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${p.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': 'reg-1',
      },
      body: JSON.stringify({ name: 'connector', url: PUBLIC_URL, subscribedEvents: ['loan.funded'] }),
    });
    expect(res.status).toBeLessThan(300);
    const r = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect']);
    expect(r.code, r.stdout).toBe(0);
    const lines = r.stdout.trim().split('\n');
    const names = lines.map((l) => l.slice(6).split(/\s+/)[0]);
    expect(names).toEqual([
      'config',
      'mappings.dir',
      'mappings',
      'store',
      'platform',
      'platform.key',
      'platform.ein',
      'platform.ssn',
      'platform.documents',
      'webhooks.endpoint',
      'core',
      'webhooks.port',
      'admin.port',
    ]);
    for (const l of lines) expect(l).toMatch(/^ok {4}/);
  });

  it('--connect: an unreachable platform fails the platform line (exit 1), the core is still checked', async () => {
    const cfg = writeConnectorConfig(p, limits);
    const port = await closedPort();
    patchConfig(cfg.configPath, (c) => {
      c['platform']!['baseUrl'] = `http://127.0.0.1:${port}/api`;
    });
    const r = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect', '--json']);
    expect(r.code).toBe(1);
    const checks = byName(r.stdout);
    expect(checks['platform']?.status).toBe('fail');
    expect(checks['platform']?.detail).toMatch(/ECONNREFUSED/);
    expect(checks['platform.key']?.status).toBe('skip');
    expect(checks['core']?.status).toBe('ok');
  });

  it('--connect with Fineract: office answers; a product the mapping set uses that Fineract lacks fails; wrong password fails', async () => {
    const core = {
      adapter: 'http',
      http: {
        baseUrl: fake.url,
        username: fake.username,
        password: fake.password,
        tenantId: fake.tenantId,
        timeoutMs: 5000,
      },
    };
    const cfg = writeConnectorConfig(p, {
      ...limits,
      mappingsDir: join(process.cwd(), 'mappings/fineract'),
      extra: { core },
    });
    const r = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect', '--json']);
    expect(r.code).toBe(1);
    const checks = byName(r.stdout);
    expect(checks['core']).toMatchObject({ status: 'ok' });
    expect(checks['core']?.detail).toContain(`tenant ${fake.tenantId}`);
    expect(checks['core.products']?.status).toBe('fail');
    expect(checks['core.products']?.detail).toContain('3: no such loan product');
    expect(checks['core.products']?.detail).toContain('4: no such loan product');
    expect(checks['core.products']?.detail).not.toMatch(/\b[12]: no such/);

    patchConfig(cfg.configPath, (c) => {
      (c['core']!['http'] as Record<string, unknown>)['password'] = 'wrong';
    });
    const bad = await runCli(['--config', cfg.configPath, 'config', 'check', '--connect', '--json']);
    expect(bad.code).toBe(1);
    const b = byName(bad.stdout);
    expect(b['core']?.status).toBe('fail');
    expect(b['core']?.detail).toMatch(/401/);
    expect(bad.stdout).not.toContain('"wrong"');
  });
});
