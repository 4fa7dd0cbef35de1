import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startHttpServer } from '../../../src/http/server.js';
import { FatalError } from '../../../src/lib/errors.js';
import { runCliSplit } from '../../support/cli-run.js';

/**
 * Issue 42 (first hour, 5): a taken port failed `run` with `listen EADDRINUSE … 127.0.0.1:18600`,
 * naming no config key, and `config check` did not look at ports. Now every listen error names the
 * key to change, and `config check` (without --connect: it is local) has a line per listener.
 */
async function holdPort(): Promise<{ server: Server; port: number }> {
  // Connections (config check asks a taken admin.port whether a connector answers) are dropped.
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port };
}

async function freePort(): Promise<number> {
  const { server, port } = await holdPort();
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

interface Check {
  name: string;
  status: string;
  detail: string;
}

describe('a taken port names its config key', () => {
  let held: { server: Server; port: number };
  let dir: string;
  const env = { LOG_LEVEL: 'silent' };

  beforeAll(async () => {
    held = await holdPort();
    dir = mkdtempSync(join(tmpdir(), 'taken-port-'));
  });
  afterAll(async () => {
    await new Promise<void>((r) => held.server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  const config = (name: string, webhooksPort: number, adminPort: number): string => {
    const path = join(dir, `${name}.yaml`);
    writeFileSync(
      path,
      stringify({
        // Nothing listens here: `run` must fail on the port before it needs the platform.
        platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_port', environment: 'development' },
        store: { path: join(dir, `${name}.sqlite`) },
        core: { adapter: 'file', file: { dir: join(dir, `${name}-core`) } },
        webhooks: {
          host: '127.0.0.1',
          port: webhooksPort,
          secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
        },
        admin: { host: '127.0.0.1', port: adminPort },
      }),
    );
    return path;
  };

  it('startHttpServer: EADDRINUSE becomes a FatalError naming the key, the address and the fix', async () => {
    const err = await startHttpServer(() => undefined, '127.0.0.1', held.port, undefined, {
      host: 'webhooks.host',
      port: 'webhooks.port',
    }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(FatalError);
    expect((err as Error).message).toBe(
      `webhooks.port: cannot listen on 127.0.0.1:${held.port}: the port is in use by another process ` +
        '(EADDRINUSE); change webhooks.port or stop the process that holds it',
    );
    // A host that is not this machine's names the host key.
    const notMine = await startHttpServer(() => undefined, '192.0.2.1', 0, undefined, {
      host: 'admin.host',
      port: 'admin.port',
    }).then(
      (s) => s.close(),
      (e: unknown) => e,
    );
    expect((notMine as Error).message).toMatch(
      /^admin\.host: cannot listen on 192\.0\.2\.1:0: .*EADDRNOTAVAIL.*change admin\.host/,
    );
  });

  it('run: the taken webhooks.port stops the daemon with exit 1 and names webhooks.port', async () => {
    const r = await runCliSplit(['run', '--config', config('run-webhooks', held.port, 0)], { env });
    expect(r.code, r.stderr).toBe(1);
    expect(r.error).toMatch(
      new RegExp(`^webhooks\\.port: cannot listen on 127\\.0\\.0\\.1:${held.port}: .*EADDRINUSE`),
    );
  });

  it('run: the taken admin.port names admin.port', async () => {
    const r = await runCliSplit(['run', '--config', config('run-admin', 0, held.port)], { env });
    expect(r.code, r.stderr).toBe(1);
    expect(r.error).toMatch(
      new RegExp(`^admin\\.port: cannot listen on 127\\.0\\.0\\.1:${held.port}: .*EADDRINUSE`),
    );
  });

  it('config check (no --connect): a FAIL line for the taken port, ok for the free one, exit 1', async () => {
    const free = await freePort();
    const r = await runCliSplit(['config', 'check', '--config', config('check', held.port, free)], { env });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      new RegExp(
        `^FAIL {2}webhooks\\.port {6}the webhook receiver: webhooks\\.port: cannot listen on 127\\.0\\.0\\.1:${held.port}: the port is in use`,
        'm',
      ),
    );
    expect(r.stdout).toMatch(new RegExp(`^ok {4}admin\\.port {9}.*127\\.0\\.0\\.1:${free} is free`, 'm'));
    expect(r.error).toMatch(/webhooks\.port/);

    const json = await runCliSplit(
      ['config', 'check', '--json', '--config', config('check-json', free, held.port)],
      {
        env,
      },
    );
    const checks = (JSON.parse(json.stdout) as { checks: Check[] }).checks;
    expect(checks.find((c) => c.name === 'webhooks.port')?.status).toBe('ok');
    expect(checks.find((c) => c.name === 'admin.port')).toMatchObject({ status: 'fail' });
    expect(checks.find((c) => c.name === 'admin.port')?.detail).toMatch(/change admin\.port/);
  });

  it('config check: a port a running connector holds (its /healthz answers on admin.port) is a warning', async () => {
    const connector = await startHttpServer(
      (_req, res) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ status: 'ok' }));
      },
      '127.0.0.1',
      0,
    );
    try {
      const r = await runCliSplit(
        ['config', 'check', '--json', '--config', config('beside', await freePort(), connector.port)],
        { env },
      );
      expect(r.code, r.stdout).toBe(0);
      const admin = (JSON.parse(r.stdout) as { checks: Check[] }).checks.find((c) => c.name === 'admin.port');
      expect(admin?.status).toBe('warn');
      expect(admin?.detail).toMatch(/apparently by a running connector/);
    } finally {
      await connector.close(0);
    }
  });

  it('config check: both listeners on one address fail on admin.port; port 0 is ok', async () => {
    const free = await freePort();
    const same = await runCliSplit(['config', 'check', '--json', '--config', config('same', free, free)], {
      env,
    });
    const checks = (JSON.parse(same.stdout) as { checks: Check[] }).checks;
    expect(checks.find((c) => c.name === 'admin.port')?.detail).toMatch(/is also webhooks\.port/);
    const zero = await runCliSplit(['config', 'check', '--json', '--config', config('zero', 0, 0)], { env });
    expect(zero.code, zero.stdout).toBe(0);
    const zchecks = (JSON.parse(zero.stdout) as { checks: Check[] }).checks;
    expect(zchecks.filter((c) => c.name.endsWith('.port')).map((c) => c.status)).toEqual(['ok', 'ok']);
  });
});
