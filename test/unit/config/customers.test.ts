import { systemClock } from '../../../src/lib/clock.js';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tinHashKey } from '../../../src/app/tin-key.js';
import { buildRuntime } from '../../../src/app/runtime.js';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/lib/errors.js';
import { silentLogger } from '../../../src/lib/logger.js';

const base = `
platform:
  baseUrl: https://lender.example.com/api
  apiKey: pk_test_abc
  environment: staging
`;

function problems(fileText: string, env: Record<string, string> = {}): string[] {
  try {
    loadConfig({ env, fileText, filePath: 'bank.yaml' });
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('customers config', () => {
  it('has working defaults and takes the key from the environment', () => {
    const c = loadConfig({ env: {}, fileText: base });
    expect(c.customers).toEqual({ onAmbiguous: 'quarantine' });
    const e = loadConfig({ env: { BOARDING_TIN_HASH_KEY: 'from-the-environment-123' }, fileText: base });
    expect(e.customers.tinHashKey).toBe('from-the-environment-123');
    const x = loadConfig({ env: {}, fileText: `${base}customers:\n  extract: { path: ./customers.csv }\n` });
    expect(x.customers.extract).toEqual({
      path: join(process.cwd(), 'customers.csv'),
      maxAgeHours: 36,
      layout: { header: true, delimiter: ',', columns: { cif: 'cif', tin: 'tin', name: 'name' } },
    });
  });

  it('names the key of every mistake and never prints the hash key', () => {
    const p = problems(
      `${base}customers:\n  onAmbiguous: merge\n  tinHashKey: short\n  extract: { path: x.csv, maxAgeHours: 0, layout: { delimiter: ';;', columns: { cif: 0 } } }\n  typo: 1\n`,
    );
    const text = p.join('\n');
    expect(text).toMatch(/customers\.onAmbiguous: expected one of quarantine, create/);
    expect(text).toMatch(/customers\.tinHashKey: expected a secret of at least 16 characters/);
    expect(text).not.toContain('short');
    expect(text).toMatch(/customers\.extract\.maxAgeHours/);
    expect(text).toMatch(/customers\.extract\.layout\.delimiter/);
    expect(text).toMatch(/customers\.extract\.layout\.columns\.cif/);
    expect(text).toMatch(/customers\.typo/);
  });
});

describe('the TIN hash key', () => {
  it('is generated once beside the state database (0600) when not configured, and reused', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tinkey-'));
    const c = loadConfig({ env: {}, fileText: `${base}store: { path: ${join(dir, 'state.sqlite')} }\n` });
    const k1 = tinHashKey(c, silentLogger());
    expect(k1.length).toBeGreaterThanOrEqual(16);
    expect(readFileSync(join(dir, 'state.sqlite.tinkey'), 'utf8').trim()).toBe(k1);
    expect(statSync(join(dir, 'state.sqlite.tinkey')).mode & 0o777).toBe(0o600);
    expect(tinHashKey(c, silentLogger())).toBe(k1);
  });

  it('a state database refuses another key than the one its hashes were made with', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tinkey-'));
    const text = (key: string) =>
      `${base}store: { path: ${join(dir, 'state.sqlite')} }\ncustomers: { tinHashKey: ${key} }\n`;
    const first = await buildRuntime(
      loadConfig({ env: {}, fileText: text('the-first-key-0123456789') }),
      silentLogger(),
      { clock: systemClock },
    );
    await first.close();
    const again = await buildRuntime(
      loadConfig({ env: {}, fileText: text('the-first-key-0123456789') }),
      silentLogger(),
      { clock: systemClock },
    );
    await again.close();
    await expect(
      buildRuntime(loadConfig({ env: {}, fileText: text('another-key-0123456789') }), silentLogger(), {
        clock: systemClock,
      }),
    ).rejects.toThrow(/customers\.tinHashKey: not the key this state database/);
  });

  it('regression: without a key, a state database hashed with a configured key generated a stray key file and then refused it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tinkey-'));
    const store = `${base}store: { path: ${join(dir, 'state.sqlite')} }\n`;
    const first = await buildRuntime(
      loadConfig({ env: {}, fileText: `${store}customers: { tinHashKey: the-bank-key-0123456789 }\n` }),
      silentLogger(),
      { clock: systemClock },
    );
    await first.close();
    await expect(
      buildRuntime(loadConfig({ env: {}, fileText: store }), silentLogger(), { clock: systemClock }),
    ).rejects.toThrow(
      /state\.sqlite\.tinkey \(the key this state database's customers were hashed with\) is missing/,
    );
    expect(existsSync(join(dir, 'state.sqlite.tinkey'))).toBe(false);
  });
});
