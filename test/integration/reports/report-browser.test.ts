/**
 * Opens a real report.html in headless Chromium (Debian's `chromium` through playwright-core; CI
 * installs it with scripts/ci-setup.sh) and checks what a reviewer sees: the status, the totals,
 * the tie-out, the aging chart and the exceptions. Saves a screenshot as a test artifact
 * (var/test-artifacts/report.png). Without a Chromium binary the test is reported as skipped with
 * the reason.
 */
import { clockReading } from '../../support/fake-clock.js';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Playwright from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import type { CoreSystem } from '../../../src/core/port.js';
import { silentLogger } from '../../../src/lib/logger.js';
import type { PlatformApi } from '../../../src/platform/api.js';
import type { ReconcileSources } from '../../../src/reports/compute.js';
import { runReconcile } from '../../../src/reports/run.js';
import type { CoreLoanRow, PlatformLoanRow, StoreLoanRow } from '../../../src/reports/types.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const AS_OF = Date.parse('2026-11-20T18:00:00Z');
const DAY = 86_400_000;

function findChromium(): string | null {
  const fromEnv = process.env['CHROMIUM_PATH'];
  if (fromEnv && existsSync(fromEnv)) return fromEnv;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome']) {
    try {
      const p = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
      if (p) return p;
    } catch {
      // not installed under this name
    }
  }
  return null;
}

const chromium = findChromium();
let playwright: typeof Playwright | null = null;
try {
  playwright = await import('playwright-core');
} catch {
  playwright = null;
}
const skipReason = !chromium
  ? 'no Chromium binary found (install Debian `chromium`, e.g. scripts/ci-setup.sh, or set CHROMIUM_PATH)'
  : !playwright
    ? 'playwright-core is not installed (npm ci)'
    : null;
if (skipReason) process.stderr.write(`\n[report browser check] SKIPPED: ${skipReason}\n\n`);

function store(id: string, state: string, extra: Partial<StoreLoanRow> = {}): StoreLoanRow {
  return {
    id,
    loanNumber: `LN-${id}`,
    state,
    quarantineReason: null,
    centsAmount: 12_345_678,
    productId: 'term',
    coreReference: `packages/${id}`,
    mappingVersion: 'generic@1',
    fundedAtIso: null,
    releasedAtIso: new Date(AS_OF - 3 * DAY).toISOString(),
    boardedAtIso: null,
    writtenAt: AS_OF - DAY,
    acknowledgedAt: state === 'acknowledged' ? AS_OF - DAY : null,
    lastErrorCode: null,
    lastErrorMessage: null,
    createdAt: AS_OF - 3 * DAY,
    updatedAt: AS_OF - DAY,
    ...extra,
  };
}
const plat = (id: string, extra: Partial<PlatformLoanRow> = {}): PlatformLoanRow => ({
  id,
  loanNumber: `LN-${id}`,
  centsAmount: 12_345_678,
  bpsRate: 725,
  maturityDate: '2031-11-20',
  firstPaymentDate: '2026-12-20',
  paymentFrequency: 'monthly',
  productId: 'term',
  releasedAt: null,
  boardedAt: new Date(AS_OF - DAY).toISOString(),
  ...extra,
});
const core = (id: string, extra: Partial<CoreLoanRow> = {}): CoreLoanRow => ({
  id,
  coreReference: `packages/${id}`,
  mappingVersion: 'generic@1',
  centsAmount: 12_345_678,
  bpsRate: 725,
  maturityDate: '2031-11-20',
  firstPaymentDate: '2026-12-20',
  paymentFrequency: 'monthly',
  productId: 'term',
  ...extra,
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('report.html in a browser', () => {
  it('renders the status, control totals, tie-out, aging chart and exceptions', async (ctx) => {
    if (skipReason || !playwright || !chromium) return ctx.skip(skipReason ?? 'unavailable');
    const s = [
      store('a', 'acknowledged'),
      store('b', 'acknowledged'),
      store('q', 'quarantined', {
        coreReference: null,
        writtenAt: null,
        quarantineReason: 'tin_incomplete',
        lastErrorMessage: '<b>only</b> last 4',
        updatedAt: AS_OF - 9 * DAY,
      }),
    ];
    const p = [plat('a'), plat('b', { bpsRate: 700 })];
    const c = [core('a'), core('b')];
    const sources: ReconcileSources = {
      storeRows: () => s,
      storeKnows: (id) => s.some((r) => r.id === id),
      async *platformBoarded() {
        await Promise.resolve();
        yield* p;
      },
      async *coreList() {
        await Promise.resolve();
        yield* c;
      },
      coreFind: (id) => Promise.resolve(c.find((r) => r.id === id) ?? null),
      funded: () => null,
    };
    const dir = mkdtempSync(join(tmpdir(), 'report-browser-'));
    dirs.push(dir);
    const result = await runReconcile({
      config: {
        platform: {
          baseUrl: 'https://lender.example.com/api',
          apiKey: 'pk_test_x',
          environment: 'staging',
          rateLimit: { readsPerWindow: 1, writesPerWindow: 1, windowMs: 1000, headroom: 1 },
          timeouts: { connectMs: 1, headersMs: 1, bodyMs: 1 },
          maxRetries: 0,
          pageSize: 100,
        },
        bank: { timeZone: 'America/Chicago' },
        reports: { dir, fundedNotReleasedDays: 5 },
        core: {
          adapter: 'file',
          file: { dir, csvBatches: false, batch: { cutoff: '18:00', triggerFile: 'READY' } },
        },
      },
      platform: {} as PlatformApi,
      reads: {} as never,
      core: { name: 'file' } as CoreSystem,
      logger: silentLogger(),
      clock: clockReading(() => AS_OF),
      connectorVersion: 'test',
      sources,
    });

    const browser = await playwright.chromium.launch({
      executablePath: chromium,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const requests: string[] = [];
      page.on('request', (r) => requests.push(r.url()));
      await page.goto(pathToFileURL(result.files.html).href);
      await expect.poll(() => page.locator('[data-testid=status]').innerText()).toContain('2 exceptions');

      const totals = page.locator('[data-testid=totals]');
      expect(await totals.isVisible()).toBe(true);
      const totalsText = await totals.innerText();
      expect(totalsText).toContain('Released');
      expect(totalsText).toContain('123,456.78'); // one loan's principal, grouped, from cents
      expect(totalsText).toContain('370,370.34'); // three loans released
      expect(await page.locator('[data-testid=tie-out] tr').count()).toBe(4); // header + 3 checks
      expect(await page.locator('[data-testid=aging-chart] rect').count()).toBeGreaterThan(0);
      const exceptions = await page.locator('[data-testid=exceptions]').innerText();
      expect(exceptions).toContain('Quarantined');
      expect(exceptions).toContain('<b>only</b> last 4'); // escaped, shown as text
      expect(await page.locator('[data-testid=exceptions] b').count()).toBe(0);
      expect(await page.locator('[data-testid=signoff]').innerText()).toContain('Reviewed by');
      // Self-contained: the page loads nothing but itself.
      expect(requests).toEqual([pathToFileURL(result.files.html).href]);

      const artifacts = join(ROOT, 'var', 'test-artifacts');
      mkdirSync(artifacts, { recursive: true });
      await page.screenshot({ path: join(artifacts, 'report.png'), fullPage: true });
      expect(existsSync(join(artifacts, 'report.png'))).toBe(true);
    } finally {
      await browser.close();
    }
  });
});
