/**
 * The ops console in a real browser (headless Debian Chromium driven by playwright-core) at
 * 1366×768, a day of work on the sandbox's DEFAULT data (ids of every shape, realistic amounts):
 * the sandbox platform, a fake core and the daemon `run` composes (createConnectorDaemon) with three
 * console users on the admin listener (port 0). An operator logs in, filters the exception queue
 * (one line per loan), opens a loan, requests a bulk retry by filter; an approver (another person)
 * lands on it and approves it; the daemon's executor queues the loans and the next cycle boards
 * them (asserted on the store and the core, not only on the page); both sign the day's run with
 * comments and dispositions, and signoff.json and report.html on disk carry the signatures. A viewer's POST sent by hand and a form POST without its CSRF token
 * get 403. Screenshots of every page go to var/test-artifacts/console/ (or CONSOLE_SCREENSHOTS_DIR:
 * `npm run console:screenshots` writes docs/images/). Without Chromium the test reports itself
 * skipped with the reason.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { createConnectorDaemon } from '../../../src/app/daemon.js';
import { buildRuntime } from '../../../src/app/runtime.js';
import { loadConfig } from '../../../src/config/load.js';
import { testHash } from '../../support/console-users.js';
import { systemClock } from '../../../src/lib/clock.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { MappingInput } from '../../../src/mapping/types.js';
import { reconcileDaemonJob } from '../../../src/reports/daemon-job.js';
import { startSandbox } from '../../../src/sandbox/index.js';
import { browserKit, launchChromium } from '../../support/console-pages-browser.js';
import { runCli, startTestPlatform, writeConnectorConfig } from '../../integration/pipeline/harness.js';
import { FakeCore } from '../../support/fake-core.js';
import { FakeMapper, issue } from '../../support/fake-mapper.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const SHOTS = process.env['CONSOLE_SCREENSHOTS_DIR']
  ? resolve(ROOT, process.env['CONSOLE_SCREENSHOTS_DIR'])
  : join(ROOT, 'var', 'test-artifacts', 'console');
const kit = await browserKit();
if (kit.skipReason) process.stderr.write(`\n[console browser scenario] SKIPPED: ${kit.skipReason}\n\n`);

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const PASSWORDS = { olga: 'olga-operator-pw', peter: 'peter-approver-pw', vera: 'vera-viewer-pw' } as const;

async function login(page: Page, base: string, name: keyof typeof PASSWORDS): Promise<void> {
  await page.goto(`${base}/console/`);
  expect(new URL(page.url()).pathname).toBe('/console/login');
  await page.getByLabel('User').fill(name);
  await page.getByLabel('Password').fill(PASSWORDS[name]);
  await page.getByRole('button', { name: 'Log in' }).click();
  // An approver with requests waiting lands on them; everyone else on the queue.
  await page.waitForURL(/\/console\/(queue|requests\?status=pending)$/);
  expect(await page.getByTestId('who').innerText()).toContain(name);
}

async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `console-${name}.png`), fullPage: true });
}

describe('ops console in a browser (sandbox + fake core + daemon)', () => {
  it(
    'a day of work at 1366×768 on the sandbox default data: operator filters, opens a loan, requests a bulk retry; approver approves; the loans board; both sign the run with comments and the files on disk carry the signatures',
    { timeout: 180_000 },
    async (ctx) => {
      if (kit.skipReason) return ctx.skip(kit.skipReason);
      // The sandbox's default data (ids of every shape, realistic amounts); only its rate limits are raised.
      const sb = await startSandbox({ readsPerWindow: 10_000, writesPerWindow: 10_000, windowMs: 60_000 });
      cleanups.push(() => sb.close());
      const dir = mkdtempSync(join(tmpdir(), 'console-browser-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));

      // The released loans, in a fixed order: five fail their mapping (fixed later), one the core refuses, two board with review items.
      const listed = (await (await fetch(`${sb.adminUrl}/loans?released=true`)).json()) as {
        data: Array<{ id: string }>;
      };
      const ids = listed.data.map((l) => l.id).sort();
      expect(ids.length).toBeGreaterThanOrEqual(8);
      const mappingFails = new Set(ids.slice(0, 5));
      const coreRefuses = ids[5] as string;
      const reviewed = new Set(ids.slice(6, 8));
      const mapper = new FakeMapper();
      mapper.fail = (input: MappingInput) =>
        mappingFails.has(input.loan.id)
          ? [issue('mapping', 'maturity date: expected a date after the first payment date')]
          : null;
      mapper.warn = (input: MappingInput) =>
        reviewed.has(input.loan.id)
          ? [{ ...issue('approximated', 'payment schedule rounded to whole cents'), field: 'schedule' }]
          : null;
      const core = new FakeCore();
      core.faults.push({ loanId: coreRefuses, kind: 'rejected', times: 1_000 });

      const [olga, peter, vera] = await Promise.all([
        testHash(PASSWORDS.olga),
        testHash(PASSWORDS.peter),
        testHash(PASSWORDS.vera),
      ]);
      const reportsDir = join(dir, 'reports');
      const config = loadConfig({
        env: {},
        fileText: [
          'platform:',
          `  baseUrl: ${sb.baseUrl}`,
          `  apiKey: ${sb.apiKey}`,
          '  environment: development',
          `store: { path: ${join(dir, 'state.sqlite')} }`,
          'webhooks: { host: 127.0.0.1, port: 0 }',
          'admin: { host: 127.0.0.1, port: 0 }',
          'bank: { timeZone: America/Chicago }',
          "schedule: { drain: '0 0 1 1 *', endpointCheck: '0 0 1 1 *', reconcile: '0 0 1 1 *' }",
          `reports: { dir: ${reportsDir} }`,
          'boarding: { retryBaseMs: 50, retryMaxMs: 200, maxAttempts: 2 }',
          'console:',
          '  upgradeHashes: false',
          '  users:',
          `    - { name: olga, passwordHash: "${olga}", roles: [operator] }`,
          `    - { name: peter, passwordHash: "${peter}", roles: [approver] }`,
          `    - { name: vera, passwordHash: "${vera}", roles: [viewer] }`,
          '',
        ].join('\n'),
      });
      const rt = await buildRuntime(config, silentLogger(), { clock: systemClock, mapper, core });
      cleanups.push(() => rt.close());
      const daemon = createConnectorDaemon(rt);
      cleanups.push(() => daemon.stop());
      await daemon.start();
      await daemon.idle();
      for (const id of mappingFails) expect((await rt.store.loans.get(id))?.state).toBe('quarantined');
      await expect
        .poll(async () => (await rt.store.loans.get(coreRefuses))?.state, { timeout: 15_000 })
        .toBe('quarantined');
      const base = daemon.adminUrl();
      if (!base) throw new Error('no admin listener');

      const browser = await launchChromium(kit);
      cleanups.push(() => browser.close());
      const viewport = { width: 1366, height: 768 };
      const op = await (await browser.newContext({ viewport })).newPage();
      const outside: string[] = [];
      op.on('request', (r) => {
        if (!r.url().startsWith(base)) outside.push(r.url());
      });

      // 1. The login form, then the operator's queue: one line per loan, nothing wider than the screen.
      await op.goto(`${base}/console/login`);
      await shot(op, 'login');
      await login(op, base, 'olga');
      expect(await op.getByTestId('queue-row').count()).toBe(8); // 5 + 1 quarantined, 2 with review items
      expect(await op.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(1366);
      for (const h of await op
        .getByTestId('queue-row')
        .evaluateAll((rows) => rows.map((r) => r.getBoundingClientRect().height)))
        expect(h).toBeLessThan(40);
      expect(await op.getByTestId('zone').innerText()).toContain('America/Chicago');

      // 2. Filter: reason mapping → the five loans, with their counts by age; the error as its sentence.
      await op.getByTestId('filters').getByLabel('Exception reason').selectOption('mapping');
      await op.getByRole('button', { name: 'Filter' }).click();
      await op.waitForURL(/reason=mapping/);
      expect(await op.getByTestId('queue-row').count()).toBe(5);
      expect(await op.getByTestId('counts').innerText()).toMatch(/mapping\s+5\s+0\s+0\s+5/);
      expect(await op.getByTestId('queue-error').first().innerText()).toContain('maturity date');
      await shot(op, 'queue');

      // 3. Open a loan (its id may hold / % ? and non-ASCII): its history, the error, and whether it would board now.
      const first = [...mappingFails][0] as string;
      await op
        .locator(`a[href="/console/loans/${encodeURIComponent(first)}"]`)
        .first()
        .click();
      await op.waitForURL((u) => u.pathname === `/console/loans/${encodeURIComponent(first)}`);
      expect(await op.getByTestId('last-error').innerText()).toContain('maturity date');
      expect(await op.getByTestId('history').innerText()).toContain('quarantined');
      await op.getByTestId('reboard-diff-link').click();
      await op.getByTestId('reboard-diff').waitFor();
      expect(await op.getByTestId('reboard-diff').innerText()).toContain('would not board now');
      await shot(op, 'loan');

      // 4. A form POST without its CSRF token (same origin, valid session) → 403, nothing made.
      const noToken = await op.request.post(`${base}/console/requests`, {
        form: { action: 'retry', loans: first, reason: 'no token' },
        headers: { origin: base },
      });
      expect(noToken.status()).toBe(403);

      // 5. Back to the filtered queue: bulk retry of all matching loans, with the preview count.
      await op.goto(`${base}/console/queue?reason=mapping`);
      const bulk = op.getByTestId('bulk-retry');
      expect(await bulk.getByRole('button').innerText()).toContain('all 5 matching loans');
      await bulk
        .getByLabel(/Reason for bulk retry/)
        .fill('maturity-date expression fixed in mapping release 42');
      await bulk.getByRole('button').click();
      await op.waitForURL(/\/console\/requests\/[^/]+$/);
      expect(await op.getByTestId('flash').innerText()).toContain('waiting for an approver');
      expect(await op.getByTestId('request-status').innerText()).toBe('pending');
      expect(await op.getByTestId('withdraw').count()).toBe(1); // its maker may take it back
      expect(await op.getByTestId('approve').count()).toBe(0);
      const requestUrl = op.url();
      await shot(op, 'request-pending');
      for (const id of mappingFails) expect((await rt.store.loans.get(id))?.state).toBe('quarantined'); // nothing runs before approval

      // The mapping is fixed (what the operator's reason says).
      mapper.fail = () => null;

      // 6. The approver, another person, lands on what waits for them and approves; the loans board.
      const ap = await (await browser.newContext({ viewport })).newPage();
      await ap.goto(`${base}/console/login`);
      await ap.getByLabel('User').fill('peter');
      await ap.getByLabel('Password').fill(PASSWORDS.peter);
      await ap.getByRole('button', { name: 'Log in' }).click();
      await ap.waitForURL(/\/console\/requests\?status=pending$/);
      expect(await ap.getByTestId('pending-badge').innerText()).toBe('1');
      expect(await op.getByTestId('pending-badge').count()).toBe(0); // the operator approves nothing
      expect(await ap.getByTestId('request-row').first().getAttribute('data-status')).toBe('pending');
      await shot(ap, 'requests');
      await ap.goto(requestUrl);
      const covered = await ap.getByTestId('request-loans').innerText();
      for (const id of mappingFails) {
        const row = await rt.store.loans.get(id);
        if (row?.loanNumber) expect(covered).toContain(row.loanNumber);
      }
      await ap.getByTestId('approve').getByRole('button', { name: 'Approve and run' }).click();
      await ap.waitForURL(requestUrl);
      await expect
        .poll(
          async () => {
            await ap.reload();
            return ap.getByTestId('request-status').innerText();
          },
          { timeout: 20_000 },
        )
        .toBe('executed');
      for (const id of mappingFails) {
        await expect
          .poll(async () => (await rt.store.loans.get(id))?.state, { timeout: 20_000 })
          .toBe('acknowledged');
        expect(core.loans.get(id)?.writes).toBe(1);
      }
      expect((await rt.store.loans.get(coreRefuses))?.state).toBe('quarantined'); // not in the filter: untouched
      await shot(ap, 'request-executed');

      // The audit log names both people; its CSV export works.
      await ap.getByRole('link', { name: 'Audit log' }).click();
      const audit = await ap.getByTestId('audit').innerText();
      expect(audit).toContain('olga');
      expect(audit).toContain('peter');
      await shot(ap, 'audit');
      const csv = await ap.request.get(`${base}/console/audit.csv`);
      expect(csv.status()).toBe(200);
      expect(await csv.text()).toContain('maturity-date expression fixed');

      // 7. The day's reconciliation (the daemon's own job, run now); both sign it with comments.
      await reconcileDaemonJob({
        config: rt.config,
        platform: rt.platform,
        reads: rt.store.reports,
        core: rt.core,
        logger: silentLogger(),
        clock: systemClock,
      }).run(new AbortController().signal);
      await op.getByRole('link', { name: 'Reconciliation' }).click();
      await shot(op, 'reconciliation');
      await op.getByTestId('reports').getByRole('link').first().click();
      const runUrl = op.url();
      const html = await op.request.get(`${runUrl}/report.html`);
      expect(html.status()).toBe(200);
      expect(html.headers()['content-security-policy']).toContain("default-src 'none'");
      const dispositions = op.getByTestId('disposition');
      const n = await dispositions.count();
      for (let i = 0; i < n; i++) await dispositions.nth(i).selectOption(i === 0 ? 'follow_up' : 'accepted');
      await op
        .getByTestId('signoff-prepared')
        .getByLabel(/Comment/)
        .fill('Quarantines retried after mapping release 42; one core refusal open with the core team.');
      await op.getByTestId('signoff-prepared').getByRole('button').click();
      expect(await op.getByTestId('signoff').innerText()).toContain('olga');
      await ap.goto(runUrl);
      await ap
        .getByTestId('signoff-reviewed')
        .getByLabel(/Comment/)
        .fill('Checked the dispositions against the core.');
      await ap.getByTestId('signoff-reviewed').getByRole('button').click();
      const signed = await ap.getByTestId('signoff').innerText();
      expect(signed).toContain('olga');
      expect(signed).toContain('peter');
      expect(signed).toContain('Checked the dispositions');
      await shot(ap, 'reconciliation-run');

      // The report files on disk carry the signatures.
      const day = decodeURIComponent(new URL(runUrl).pathname.split('/')[3] as string);
      const run = decodeURIComponent(new URL(runUrl).pathname.split('/')[4] as string);
      expect(run).toMatch(/^run-\d{6}/);
      const signoff = JSON.parse(readFileSync(join(reportsDir, day, run, 'signoff.json'), 'utf8')) as {
        preparedBy: string;
        reviewedBy: string;
        preparedComment: string;
        reviewedComment: string;
        dispositions: unknown[];
      };
      expect(signoff).toMatchObject({
        preparedBy: 'olga',
        reviewedBy: 'peter',
        reviewedComment: 'Checked the dispositions against the core.',
      });
      expect(signoff.preparedComment).toContain('mapping release 42');
      expect(signoff.dispositions).toHaveLength(n);
      const onDisk = readFileSync(join(reportsDir, day, run, 'report.html'), 'utf8');
      expect(onDisk).toContain('olga');
      expect(onDisk).toContain('peter');
      expect(onDisk).toContain('Checked the dispositions against the core.');

      // 8. Status (batches: the file-core scenario below).
      await op.getByRole('link', { name: 'Status' }).click();
      expect(await op.getByTestId('status').innerText()).toContain('leader');
      await shot(op, 'status');

      // 9. The viewer: pages readable, no action forms; a POST sent by hand with a valid token → 403.
      const vi = await (await browser.newContext({ viewport })).newPage();
      await login(vi, base, 'vera');
      expect(await vi.getByTestId('bulk').count()).toBe(0);
      await vi.goto(`${base}/console/loans/${encodeURIComponent(coreRefuses)}`);
      expect(await vi.locator('form[action="/console/requests"]').count()).toBe(0);
      const token = await vi.locator('input[name=_csrf]').first().inputValue();
      const before = (await rt.store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM console_requests'))!;
      const byHand = await vi.request.post(`${base}/console/requests`, {
        form: { _csrf: token, action: 'retry', loans: coreRefuses, reason: 'viewer tries' },
        headers: { origin: base },
      });
      expect(byHand.status()).toBe(403);
      expect((await rt.store.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM console_requests'))!.n).toBe(
        before.n,
      );
      expect((await rt.store.loans.get(coreRefuses))?.state).toBe('quarantined');

      // Nothing was loaded from anywhere but the console itself.
      expect(outside).toEqual([]);
    },
  );

  it(
    'file core: a loan boarded with the shipped mapping shows its masked records; an operator requests a seal of the open batch, an approver approves it from the list, the batch is sealed with its files',
    { timeout: 120_000 },
    async (ctx) => {
      if (kit.skipReason) return ctx.skip(kit.skipReason);
      const p = await startTestPlatform({
        loans: 6,
        releaseRatio: 1,
        seed: 5,
        windowMs: 2000,
        readsPerWindow: 200,
        writesPerWindow: 100,
      });
      cleanups.push(() => p.close());
      const reports = mkdtempSync(join(tmpdir(), 'console-browser-reports-'));
      cleanups.push(() => rmSync(reports, { recursive: true, force: true }));
      const users = [
        { name: 'olga', passwordHash: await testHash(PASSWORDS.olga), roles: ['operator'] },
        { name: 'peter', passwordHash: await testHash(PASSWORDS.peter), roles: ['approver'] },
      ];
      const cfg = writeConnectorConfig(p, {
        windowMs: 2000,
        readsPerWindow: 200,
        writesPerWindow: 100,
        extra: {
          console: { users, upgradeHashes: false },
          admin: { host: '127.0.0.1', port: 0 },
          webhooks: { host: '127.0.0.1', port: 0 },
          reports: { dir: reports },
          schedule: { drain: '0 0 1 1 *', endpointCheck: '0 0 1 1 *', reconcile: '0 0 1 1 *' },
        },
      });
      cleanups.push(() => rmSync(cfg.dir, { recursive: true, force: true }));
      const sync = await runCli(['--config', cfg.configPath, 'sync', '--once', '--json']);
      expect(sync.code, sync.error ?? '').toBe(0);
      const rt = await buildRuntime(
        loadConfig({ env: {}, fileText: readFileSync(cfg.configPath, 'utf8') }),
        silentLogger(),
        { clock: systemClock },
      );
      cleanups.push(() => rt.close());
      const daemon = createConnectorDaemon(rt);
      cleanups.push(() => daemon.stop());
      await daemon.start();
      await daemon.idle();
      const base = daemon.adminUrl() as string;
      const boarded = await rt.store.loans.list({ state: 'acknowledged' });
      expect(boarded.length).toBeGreaterThan(0);

      const browser = await launchChromium(kit);
      cleanups.push(() => browser.close());
      const op = await (await browser.newContext({ viewport: { width: 1366, height: 768 } })).newPage();
      await login(op, base, 'olga');

      // An acknowledged loan: its records as written, tax ids masked; the action offered is a re-board.
      const loan = boarded[0]?.id as string;
      await op.goto(`${base}/console/loans/${encodeURIComponent(loan)}`);
      const records = await op.getByTestId('records').innerText();
      expect(records.length).toBeGreaterThan(20);
      // Tax id fields masked to their last 4; the bank's 9-digit CIFs readable (they were [redacted-tin]).
      expect(records).toMatch(/"taxId": "\*{5}\d{4}"/);
      expect(records).not.toMatch(/"taxId": "\d{9}"/);
      expect(records).toMatch(/"cif": "\d{9}"/);
      expect(await op.getByTestId('loan-action').locator('option').allInnerTexts()).toEqual([
        'Re-board with the mapping on disk',
      ]);
      await shot(op, 'loan-boarded');

      // The open batch: request its seal with a reason.
      await op.getByRole('link', { name: 'Batches' }).click();
      const seal = op.getByTestId('seal');
      await seal.getByPlaceholder('reason').fill('core import runs early today');
      await seal.getByRole('button', { name: 'Request seal' }).click();
      await op.waitForURL(/\/console\/requests\/[^/]+$/);
      expect(await op.getByTestId('request-status').innerText()).toBe('pending');
      expect(readdirSync(cfg.coreDir)).not.toContain('batches'); // nothing sealed before the approval

      // The approver approves from the requests list.
      const ap = await (await browser.newContext({ viewport: { width: 1366, height: 768 } })).newPage();
      await login(ap, base, 'peter');
      await ap.goto(`${base}/console/requests?status=pending`);
      await ap.getByTestId('request-row').first().getByRole('button', { name: 'Approve' }).click();
      await ap.waitForURL(/\/console\/requests\/[^/?]+$/);
      await expect
        .poll(
          async () => {
            await ap.reload();
            return ap.getByTestId('request-status').innerText();
          },
          { timeout: 20_000 },
        )
        .toBe('executed');

      await op.getByRole('link', { name: 'Batches' }).click();
      const table = await op.getByTestId('batches').innerText();
      expect(table).toContain('sealed');
      expect(table).toContain('LNLOAD.DAT');
      expect(readdirSync(cfg.coreDir)).toContain('batches');
      await shot(op, 'batches');
    },
  );
});
