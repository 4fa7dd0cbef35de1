import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { numberSource } from '../../../src/config/schema.js';
import { ConfigError } from '../../../src/lib/errors.js';

const base = `
platform:
  baseUrl: https://lender.example.com/api
  apiKey: pk_test_abc
  environment: staging
`;

function problems(fileText: string): string[] {
  try {
    loadConfig({ env: {}, fileText, filePath: 'bank.yaml' });
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('identity config (number pools)', () => {
  it('has working defaults: pools for the file core, the core assigns for Fineract', () => {
    const c = loadConfig({ env: {}, fileText: base });
    expect(c.identity.accountNumbers.pool).toEqual({
      ranges: [{ from: '100000000', to: '999999999' }],
      prefix: '',
      width: 10,
      checkDigit: 'luhn',
      warnAt: 0.9,
    });
    expect(c.identity.customerNumbers.pool).toMatchObject({ width: 9, checkDigit: 'luhn' });
    expect(numberSource(c, 'accountNumbers')).toBe('pool');
    const http = loadConfig({
      env: {},
      fileText: `${base}core:\n  adapter: http\n  http: { baseUrl: https://core.bank.local/api/v1, username: u, password: p }\n`,
    });
    expect(numberSource(http, 'accountNumbers')).toBe('core');
    expect(numberSource(http, 'customerNumbers')).toBe('core');
    const forced = loadConfig({
      env: {},
      fileText: `${base}identity:\n  accountNumbers: { source: core }\n`,
    });
    expect(numberSource(forced, 'accountNumbers')).toBe('core');
  });

  it('names the key of a pool that cannot produce its numbers', () => {
    expect(
      problems(
        `${base}identity:\n  accountNumbers:\n    pool: { ranges: [{ from: "1", to: "99999" }], width: 5, checkDigit: luhn }\n`,
      ),
    ).toEqual([
      'identity.accountNumbers.pool.ranges.0.to: expected at most 4 digit(s): width 5 leaves 4 after the prefix and the check digit, got "99999"',
    ]);
    expect(
      problems(
        `${base}identity:\n  accountNumbers:\n    pool: { ranges: [{ from: "9", to: "1" }], width: 5 }\n`,
      )[0],
    ).toMatch(/^identity\.accountNumbers\.pool\.ranges\.0\.to: expected to ≥ from/);
    expect(
      problems(
        `${base}identity:\n  accountNumbers:\n    pool: { ranges: [{ from: "1", to: "50" }, { from: "40", to: "90" }], width: 5 }\n`,
      )[0],
    ).toMatch(
      /^identity\.accountNumbers\.pool\.ranges\.1: expected ranges that do not overlap \(overlaps range 1\)/,
    );
    expect(
      problems(
        `${base}identity:\n  accountNumbers:\n    pool: { ranges: [{ from: 1, to: "5" }], width: 5 }\n`,
      )[0],
    ).toMatch(/^identity\.accountNumbers\.pool\.ranges\.0\.from: expected a string of digits/);
    expect(
      problems(
        `${base}identity:\n  customerNumbers:\n    pool: { ranges: [{ from: "1", to: "5" }], width: 5, prefix: CU }\n`,
      )[0],
    ).toMatch(/^identity\.customerNumbers\.pool\.prefix: expected digits only/);
    expect(
      problems(
        `${base}identity:\n  accountNumbers:\n    pool: { ranges: [{ from: "1", to: "5" }], width: 2, prefix: "77" }\n`,
      )[0],
    ).toMatch(/^identity\.accountNumbers\.pool\.width: expected a width larger than/);
    expect(problems(`${base}identity:\n  accountNumbers: { source: bank }\n`)[0]).toMatch(
      /^identity\.accountNumbers\.source: expected one of pool, core/,
    );
    expect(problems(`${base}identity:\n  acountNumbers: {}\n`)[0]).toMatch(
      /^identity\.acountNumbers: unknown key/,
    );
  });

  it('takes a letter prefix without a check digit', () => {
    const c = loadConfig({
      env: {},
      fileText: `${base}identity:\n  accountNumbers:\n    pool: { ranges: [{ from: "1", to: "99999999" }], width: 10, prefix: LN, checkDigit: none }\n`,
    });
    expect(c.identity.accountNumbers.pool.prefix).toBe('LN');
  });
});
