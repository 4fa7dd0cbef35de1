/**
 * Issue 43 F12: the admin listener's /reports/latest answered without credentials (loan ids,
 * amounts, sign-off names and notes) while the console's copy needed a login. With console users
 * it now needs the console's login: HTTP Basic or the trusted proxy's user get the file, a browser
 * without credentials is sent to the console's copy behind the login form. Without console users it
 * stays as it was (the admin listener's own page). The admin app as the daemon builds it
 * (createApp surface admin, the console mounted through mountOps), over real HTTP.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleSchema } from '../../../src/config/schema.js';
import { createConsoleAuth } from '../../../src/console/auth.js';
import { mountConsole } from '../../../src/console/index.js';
import type { ConsoleService } from '../../../src/console/contract.js';
import { createApp } from '../../../src/http/app.js';
import { startHttpServer, type RunningServer } from '../../../src/http/server.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import { createConnectorMetrics } from '../../../src/observability/metrics.js';
import { createWebhookInbox } from '../../../src/store/inbox.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';
import { testHash } from '../../support/console-users.js';

const REPORT = '<h1>Reconciliation 2026-11-25: loan ln_7 $12,345.00, prepared by olga</h1>';
const PW = 'pw-reports';

let dir: string;
let db: Db;
const servers: RunningServer[] = [];

/** Reports from the run folder this test writes; nothing else is asked of it. */
function reportsService(): ConsoleService {
  const impl: Partial<ConsoleService> = {
    reports: () =>
      Promise.resolve([
        {
          day: '2026-11-25',
          run: 'run-023000',
          generatedAt: null,
          latestOfDay: true,
          signOff: {
            preparedBy: null,
            preparedAt: null,
            reviewedBy: null,
            reviewedAt: null,
          },
        },
      ] as unknown as Awaited<ReturnType<ConsoleService['reports']>>),
    reportFile: (day, run, kind) => Promise.resolve(join(dir, 'reports', day, run, `report.${kind}`)),
    requests: () => Promise.resolve({ items: [], next: null }),
    recordAuth: () => Promise.resolve(),
  };
  return new Proxy(impl, {
    get: (t, k) =>
      k in t
        ? (t as Record<string | symbol, unknown>)[k]
        : () => Promise.reject(new Error(`${String(k)}: not used by this test`)),
  }) as ConsoleService;
}

async function adminListener(users: boolean): Promise<string> {
  const hash = await testHash(PW);
  const config = consoleSchema.parse({
    upgradeHashes: false,
    users: users ? [{ name: 'vera', passwordHash: hash, roles: ['viewer'] }] : [],
    ...(users ? { proxy: { userHeader: 'X-Forwarded-User', addresses: ['127.0.0.1', '::1'] } } : {}),
  });
  const auth = createConsoleAuth({ config, clock: systemClock, logger: silentLogger() });
  const inbox = createWebhookInbox(sqliteStore(db));
  const app = createApp({
    clock: systemClock,
    config: { scheme: 'standard', secrets: [], toleranceSeconds: 300, maxBodyBytes: 262_144 },
    inbox,
    logger: silentLogger(),
    metrics: createConnectorMetrics({
      clock: systemClock,
      db: sqliteStore(db),
      inbox,
      processMetrics: false,
    }),
    reportsDir: join(dir, 'reports'),
    surface: 'admin',
    mountOps: (a) =>
      mountConsole(a, {
        config,
        service: reportsService(),
        auth,
        logger: silentLogger(),
        clock: systemClock,
      }),
  });
  const server = await startHttpServer(app, '127.0.0.1', 0);
  servers.push(server);
  return server.url;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'reports-latest-'));
  db = openDatabase(join(dir, 'state.sqlite'));
  for (const sub of ['latest', '2026-11-25/run-023000']) {
    mkdirSync(join(dir, 'reports', sub), { recursive: true });
    writeFileSync(join(dir, 'reports', sub, 'report.html'), REPORT);
  }
});
afterAll(async () => {
  for (const s of servers) await s.close(0);
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const basic = (pw: string) => ({ authorization: `Basic ${Buffer.from(`vera:${pw}`).toString('base64')}` });

describe('/reports/latest with console users needs the console login (issue 43 F12)', () => {
  it('without credentials: no report, a redirect to the console copy, which asks for the login', async () => {
    const base = await adminListener(true);
    const res = await fetch(`${base}/reports/latest`, { redirect: 'manual' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/reports/latest');
    expect(await res.text()).not.toContain('ln_7');
    const copy = await fetch(`${base}/console/reports/latest`, { redirect: 'manual' });
    expect(copy.status).toBe(303);
    expect(copy.headers.get('location')).toBe('/console/login');
    // Followed as a browser would: the login form, never the report.
    const followed = await fetch(`${base}/reports/latest`);
    expect(followed.status).toBe(200);
    const page = await followed.text();
    expect(page).toContain('name="password"');
    expect(page).not.toContain('ln_7');
  });

  it('a wrong password gets 401; the right one, or the trusted proxy naming a user, gets the report', async () => {
    const base = await adminListener(true);
    expect((await fetch(`${base}/reports/latest`, { headers: basic('wrong') })).status).toBe(401);
    const ok = await fetch(`${base}/reports/latest`, { headers: basic(PW) });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe(REPORT);
    const proxied = await fetch(`${base}/reports/latest`, { headers: { 'x-forwarded-user': 'vera' } });
    expect(proxied.status).toBe(200);
    expect(await proxied.text()).toBe(REPORT);
  });

  it("a logged-in browser reads the newest run's report.html at the console's copy", async () => {
    const base = await adminListener(true);
    const login = await fetch(`${base}/console/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
      body: new URLSearchParams({ name: 'vera', password: PW }).toString(),
    });
    expect(login.status).toBe(303);
    const cookie = (login.headers.getSetCookie()[0] ?? '').split(';')[0] as string;
    const res = await fetch(`${base}/console/reports/latest`, { headers: { cookie } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await res.text()).toBe(REPORT);
  });

  it('the console icon: /favicon.ico (asked by browsers on a first load) leads to an inline SVG, no login needed', async () => {
    const base = await adminListener(true);
    const ico = await fetch(`${base}/favicon.ico`, { redirect: 'manual' });
    expect(ico.status).toBe(301);
    expect(ico.headers.get('location')).toBe('/console/static/favicon.svg');
    const svg = await fetch(`${base}/console/static/favicon.svg`);
    expect(svg.status).toBe(200);
    expect(svg.headers.get('content-type')).toContain('image/svg+xml');
    expect(await svg.text()).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  });

  it('without console users the admin listener serves it as before', async () => {
    const base = await adminListener(false);
    const res = await fetch(`${base}/reports/latest`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(REPORT);
  });
});
