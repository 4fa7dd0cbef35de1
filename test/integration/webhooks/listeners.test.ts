import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/store/sqlite/db.js';
import type { WebhookService } from '../../../src/app/webhook-service.js';
import { startWebhookService } from '../../support/webhook-service.js';

const secret = `whsec_${randomBytes(24).toString('base64')}`;
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function start(
  configure?: Parameters<typeof startWebhookService>[0]['configure'],
): Promise<WebhookService> {
  const dir = mkdtempSync(join(tmpdir(), 'listeners-'));
  const db = openDatabase(join(dir, 'state.sqlite'));
  const svc = await startWebhookService({ db, dir, secret, ...(configure ? { configure } : {}) });
  cleanups.push(async () => {
    await svc.stop();
    db.close();
  });
  return svc;
}

/** A GET with a Host header of our choosing (fetch does not let a caller set Host). */
function getWithHost(
  url: string,
  host: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: u.hostname, port: u.port, path: u.pathname, headers: { host } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('the listeners', () => {
  it('the admin listener answers only its host names (DNS rebinding read /reports/latest and /metrics under any Host): 421 otherwise', async () => {
    const svc = await start();
    const admin = svc.adminUrl()!;
    const port = new URL(admin).port;
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'LOCALHOST.', `[::1]:${port}`])
      expect((await getWithHost(`${admin}/healthz`, host)).status, host).toBe(200);
    for (const path of ['/metrics', '/reports/latest', '/readyz'])
      expect((await getWithHost(`${admin}${path}`, `rebind.attacker.example:${port}`)).status, path).toBe(
        421,
      );
    // The public receiver answers any Host (the platform names it as it likes).
    expect((await getWithHost(`${svc.url()!}/healthz`, 'hooks.bank.example')).status).toBe(200);
  });

  it('admin.allowedHosts takes an address range: a Host that is an address inside it (Prometheus scraping a pod by its IP) is answered, a name never', async () => {
    const svc = await start((c) => {
      c.admin.allowedHosts = ['localhost', '10.0.0.0/8', 'fd00::/8'];
    });
    const admin = svc.adminUrl()!;
    for (const host of ['10.42.3.17:8081', '10.0.0.1', '[fd00::1234]:8081', 'localhost'])
      expect((await getWithHost(`${admin}/metrics`, host)).status, host).toBe(200);
    for (const host of ['11.0.0.1:8081', '10.42.3.17.nip.example', '127.0.0.1', '[fe80::1]'])
      expect((await getWithHost(`${admin}/metrics`, host)).status, host).toBe(421);
  });

  it('admin.allowedHosts replaces the defaults; /reports/latest carries CSP and nosniff', async () => {
    const reports = mkdtempSync(join(tmpdir(), 'listeners-reports-'));
    mkdirSync(join(reports, 'latest'));
    writeFileSync(join(reports, 'latest', 'report.html'), '<!doctype html><title>r</title>');
    const svc = await start((c) => {
      c.admin.allowedHosts = ['ops.bank.example'];
      c.reports.dir = reports;
    });
    const admin = svc.adminUrl()!;
    expect((await getWithHost(`${admin}/healthz`, 'ops.bank.example:8081')).status).toBe(200);
    expect((await getWithHost(`${admin}/healthz`, '127.0.0.1')).status).toBe(421);
    const latest = await getWithHost(`${admin}/reports/latest`, 'ops.bank.example');
    expect(latest.status).toBe(200);
    expect(latest.headers['content-security-policy']).toContain("default-src 'none'");
    expect(latest.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(latest.headers['x-content-type-options']).toBe('nosniff');
  });

  it('ops pages are served on the admin listener only (regression: /metrics, /readyz, /reports/latest on the public one)', async () => {
    const svc = await start();
    const pub = svc.url()!;
    const admin = svc.adminUrl()!;
    expect(admin).not.toBe(pub);
    for (const path of ['/metrics', '/readyz', '/reports/latest'])
      expect((await fetch(`${pub}${path}`)).status).toBe(404);
    expect((await fetch(`${pub}/healthz`)).status).toBe(200);
    const m = await fetch(`${admin}/metrics`);
    expect(m.status, await m.clone().text()).toBe(200);
    expect((await fetch(`${admin}/healthz`)).status).toBe(200);
    expect((await fetch(`${admin}/webhooks/platform`, { method: 'POST', body: '{}' })).status).toBe(404);
  });

  it('slow clients: capped per address, dropped after the header timeout, and /healthz keeps answering', async () => {
    const svc = await start((c) => {
      c.webhooks.maxConnectionsPerClient = 20;
      c.webhooks.headersTimeoutMs = 1000;
      c.webhooks.requestTimeoutMs = 2000;
    });
    const { port } = new URL(svc.url()!);
    const sockets: Socket[] = [];
    const closedAt: number[] = [];
    const t0 = Date.now();
    // 60 slowloris sockets from another loopback address, each dribbling a header line.
    for (let i = 0; i < 60; i++) {
      const s = connect({ host: '127.0.0.1', port: Number(port), localAddress: '127.0.0.2' });
      s.on('error', () => undefined);
      s.on('close', () => closedAt.push(Date.now() - t0));
      s.on('connect', () => s.write('POST /webhooks/platform HTTP/1.1\r\nHost: x\r\n'));
      sockets.push(s);
    }
    const drip = setInterval(() => {
      for (const s of sockets) if (!s.destroyed) s.write('X-a: b\r\n');
    }, 300);
    cleanups.push(() => {
      clearInterval(drip);
      for (const s of sockets) s.destroy();
    });
    // Beyond the per-address cap the connections are refused at once (well before the header timeout).
    await expect.poll(() => closedAt.length, { timeout: 1000, interval: 20 }).toBeGreaterThanOrEqual(40);
    const started = Date.now();
    const health = await fetch(`${svc.url()}/healthz`);
    expect(health.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1000);
    // The 20 admitted ones are dropped once the header timeout passes (checked every second).
    await expect.poll(() => closedAt.length, { timeout: 5000, interval: 100 }).toBe(60);
    expect(Math.max(...closedAt)).toBeLessThan(4000);
  });

  it('an idle keep-alive connection is closed within webhooks.keepAliveTimeoutMs (regression: held 65 s)', async () => {
    const svc = await start((c) => {
      c.webhooks.keepAliveTimeoutMs = 300;
    });
    const { port } = new URL(svc.url()!);
    const sock = connect({ host: '127.0.0.1', port: Number(port) });
    cleanups.push(() => void sock.destroy());
    sock.on('error', () => undefined);
    let received = '';
    let answeredAt = 0;
    let closedAt = 0;
    sock.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (answeredAt === 0 && received.includes('\r\n\r\n') && received.includes('"status"'))
        answeredAt = Date.now();
    });
    sock.on('close', () => (closedAt = Date.now()));
    await new Promise<void>((resolve) => sock.once('connect', () => resolve()));
    // One cheap keep-alive request, then silence.
    sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
    await expect.poll(() => answeredAt, { timeout: 2000, interval: 10 }).toBeGreaterThan(0);
    expect(received).toMatch(/^HTTP\/1\.1 200/);
    expect(received.toLowerCase()).toContain('keep-alive: timeout=');
    await expect.poll(() => closedAt, { timeout: 3000, interval: 20 }).toBeGreaterThan(0);
    // Closed by the server (we never ended our side), within the limit plus the timer's slack.
    expect(closedAt - answeredAt).toBeLessThan(1500);
  });

  it('the default keep-alive timeout is a few seconds', async () => {
    const svc = await start();
    const res = await fetch(`${svc.url()}/healthz`);
    await res.text();
    expect(res.headers.get('keep-alive')).toBe('timeout=5');
  });
});
