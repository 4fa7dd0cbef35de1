/**
 * Headless Chromium for the console's browser tests and screenshots: Debian's `chromium` (CI and
 * `npm test` install it with scripts/ci-setup.sh) driven by playwright-core, whose own browser
 * download cannot work here (no CDN). `chromiumSkipReason` says why a test cannot run, so it reports
 * itself skipped with that reason instead of passing silently.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import type * as Playwright from 'playwright-core';

export function findChromium(): string | null {
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

export interface BrowserKit {
  chromium: string | null;
  playwright: typeof Playwright | null;
  skipReason: string | null;
}

export async function browserKit(): Promise<BrowserKit> {
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
  return { chromium, playwright, skipReason };
}

export async function launchChromium(kit: BrowserKit): Promise<Playwright.Browser> {
  if (!kit.playwright || !kit.chromium) throw new Error(kit.skipReason ?? 'no browser');
  return kit.playwright.chromium.launch({
    executablePath: kit.chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}
