import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { configNotes, loadConfig } from '../../../src/config/load.js';
import { secretConfigKeys } from '../../support/config-keys.js';
import { SHIPPED_GENERIC_MAPPINGS } from '../../../src/config/schema.js';
import { ConfigError } from '../../../src/lib/errors.js';

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

describe('loadConfig', () => {
  it('fills defaults for every operator-contract key', () => {
    const c = loadConfig({ env: {}, fileText: base });
    expect(c.platform.rateLimit).toEqual({
      readsPerWindow: 100,
      writesPerWindow: 30,
      windowMs: 60_000,
      headroom: 0.9,
    });
    // Relative paths come out absolute, from the working directory (README "Configuration").
    expect(c.store.path).toBe(join(process.cwd(), 'var/state.sqlite'));
    expect(c.core).toMatchObject({ adapter: 'file', file: { dir: join(process.cwd(), 'var/core') } });
    expect(c.webhooks).toMatchObject({ host: '127.0.0.1', port: 8080, secrets: [] });
    // The shipped generic set, wherever the connector runs from (regression: relative to the cwd).
    expect(c.mappings.dir).toBe(SHIPPED_GENERIC_MAPPINGS);
    expect(existsSync(join(c.mappings.dir, 'mapping.yaml'))).toBe(true);
  });

  it('names the key path, what was expected and what it got', () => {
    expect(problems(`${base}  rateLimit: { readsPerWindow: fast }\n`)).toEqual([
      'platform.rateLimit.readsPerWindow: expected integer ≥ 1, got "fast"',
    ]);
  });

  it('says a missing section is required, in YAML words (regression: "expected invalid type")', () => {
    expect(problems('webhooks:\n  port: 9000\n')).toEqual(['platform: required (a map), got nothing']);
    expect(problems(`${base}store: [a, b]\n`)).toEqual(['store: expected a map, got a list']);
  });

  it('reports unknown keys so typos do not silently fall back to defaults', () => {
    expect(problems(`${base}  ratelimit: { readsPerWindow: 5 }\n`)[0]).toMatch(
      /^platform\.ratelimit: unknown key/,
    );
  });

  it('places every config error at file:line:column and suggests the key or value meant', () => {
    const text = `${base}  ratelimit: { readsPerWindow: 5 }\n  environmnet: staging\nbank:\n  timeZone: America/Chicago\nstore:\n  engine: postgress\n`;
    let message = '';
    try {
      loadConfig({ env: {}, fileText: text, filePath: 'bank.yaml' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('bank.yaml:6:3: platform.ratelimit: unknown key (did you mean "rateLimit"?)');
    expect(message).toContain(
      'bank.yaml:7:3: platform.environmnet: unknown key (did you mean "environment"?)',
    );
    expect(message).toContain(
      'bank.yaml:11:11: store.engine: expected one of sqlite, postgres, got "postgress" (did you mean "postgres"?)',
    );
    // A missing key points at its parent; the keyed problem text stays as scripts match it.
    expect(problems(`${base}  ratelimit: { readsPerWindow: 5 }\n`)).toEqual([
      'platform.ratelimit: unknown key (did you mean "rateLimit"?) (check spelling; see README "Configuration")',
    ]);
    expect(problems(`${base}webhooks: { prot: 1 }\n`)[0]).toMatch(
      /^webhooks\.prot: unknown key \(did you mean "port"\?\)/,
    );
    // A value the environment gave points at the variable, not at the file.
    try {
      loadConfig({ env: { BOARDING_API_KEY: 'nope' }, fileText: base, filePath: 'bank.yaml' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(
      '\n  BOARDING_API_KEY: platform.apiKey: expected an API key starting with pk_live_ or pk_test_',
    );
    // Nothing close: no guess.
    expect(problems(`${base}  zzzzzzzz: 1\n`)[0]).not.toContain('did you mean');
  });

  it('makes every relative path absolute at load, from the working directory (regression: report links answered 500 with ./var/reports)', () => {
    const c = loadConfig({
      env: {},
      cwd: '/srv/bank',
      exists: () => true,
      fileText: `${base}store: { path: ./var/state.sqlite, postgres: { sslRootCert: certs/ca.pem } }\ncore: { file: { dir: var/core } }\nmappings: { dir: ./mappings/mybank }\nreports: { dir: ./var/reports }\ncustomers: { extract: { path: ../extract.csv } }\n`,
    });
    expect(c.store.path).toBe('/srv/bank/var/state.sqlite');
    expect(c.store.postgres.sslRootCert).toBe('/srv/bank/certs/ca.pem');
    expect(c.core.file.dir).toBe('/srv/bank/var/core');
    expect(c.mappings.dir).toBe('/srv/bank/mappings/mybank');
    expect(c.reports.dir).toBe('/srv/bank/var/reports');
    expect(c.customers.extract?.path).toBe('/srv/extract.csv');
    expect(configNotes(c)).toEqual([]);
    // Absolute paths and SQLite's special names stay as written.
    const d = loadConfig({
      env: {},
      cwd: '/srv/bank',
      fileText: `${base}store: { path: ":memory:" }\nreports: { dir: /var/lib/reports }\n`,
    });
    expect(d.store.path).toBe(':memory:');
    expect(d.reports.dir).toBe('/var/lib/reports');
  });

  it('finds the shipped mapping set for a copy of config/example.yaml used outside the repository', () => {
    const c = loadConfig({
      env: {},
      cwd: '/tmp/elsewhere-no-such-dir',
      fileText: `${base}mappings: { dir: ./mappings/generic }\n`,
    });
    expect(c.mappings.dir).toBe(SHIPPED_GENERIC_MAPPINGS);
    expect(configNotes(c)[0]).toMatch(
      /^mappings\.dir: \.\/mappings\/generic does not exist under \/tmp\/elsewhere-no-such-dir; using the shipped set /,
    );
    // A bank's own set that is missing stays missing (config check and start-up say so), never silently generic.
    const own = loadConfig({
      env: {},
      cwd: '/tmp/elsewhere-no-such-dir',
      fileText: `${base}mappings: { dir: ./mappings/mybank }\n`,
    });
    expect(own.mappings.dir).toBe('/tmp/elsewhere-no-such-dir/mappings/mybank');
  });

  it('points YAML syntax errors at file:line:col', () => {
    expect(problems('platform:\n  baseUrl: [unclosed\n')[0]).toMatch(/^bank\.yaml:\d+:\d+: /);
  });

  it('takes secrets from the environment', () => {
    const c = loadConfig({
      env: { BOARDING_API_KEY: 'pk_test_fromenv', BOARDING_WEBHOOK_SECRETS: 'whsec_a, whsec_b' },
      fileText: base,
    });
    expect(c.platform.apiKey).toBe('pk_test_fromenv');
    expect(c.webhooks.secrets).toEqual(['whsec_a', 'whsec_b']);
  });

  it('never echoes a secret value in an error', () => {
    const p = problems(base.replace('pk_test_abc', 'sk_nope_secret'));
    expect(p.join('\n')).not.toContain('sk_nope_secret');
    expect(p[0]).toMatch(/^platform\.apiKey: /);
  });

  it('refuses a live key outside production and a test key in production', () => {
    expect(() => loadConfig({ env: { BOARDING_API_KEY: 'pk_live_x' }, fileText: base })).toThrow(
      /live key.*production/,
    );
    expect(() => loadConfig({ env: {}, fileText: base.replace('staging', 'production') })).toThrow(
      /test key/,
    );
  });

  it('requires core.http when the http adapter is chosen', () => {
    expect(() => loadConfig({ env: {}, fileText: `${base}core: { adapter: http }\n` })).toThrow(/core\.http/);
  });

  it('rejects an unknown time zone by key', () => {
    expect(problems(`${base}bank: { timeZone: Mars/Olympus }\n`)[0]).toMatch(
      /^bank\.timeZone: expected an IANA time zone/,
    );
  });

  it('has no built-in demo defaults: without a file, platform is reported missing', () => {
    expect(() => loadConfig({ env: {} })).toThrow(/platform: required/);
  });
});

describe('config/example.yaml', () => {
  it('is a valid config that spells out every default', async () => {
    const { readFileSync } = await import('node:fs');
    const text = readFileSync(new URL('../../../config/example.yaml', import.meta.url), 'utf8');
    const c = loadConfig({ env: {}, fileText: text, filePath: 'config/example.yaml' });
    const defaults = loadConfig({ env: {}, fileText: base });
    // Same values as the built-in defaults wherever the example does not show a bank choice.
    expect(c.platform.rateLimit).toEqual(defaults.platform.rateLimit);
    expect(c.boarding).toEqual(defaults.boarding);
    expect(c.schedule).toEqual(defaults.schedule);
    expect(c.webhooks).toEqual(defaults.webhooks);
    expect(c.identity).toEqual(defaults.identity);
    expect(c.mappings.defaults['branch']).toBe('0012');
  });
});

describe('mappings.defaults', () => {
  it('keeps bank codes as written (regression: an unquoted branch 0012 became the number 12)', () => {
    const c = loadConfig({
      env: {},
      fileText: `${base}mappings:\n  defaults:\n    branch: 0012\n    gl: 1.50\n    officer: LOANOPS\n    quoted: "007"\n    term: 12\n    active: true\n`,
    });
    expect(c.mappings.defaults).toEqual({
      branch: '0012',
      gl: '1.50',
      officer: 'LOANOPS',
      quoted: '007',
      term: 12,
      active: true,
    });
  });
});

describe('a secret is never echoed in a config error, whatever its type (regression: a YAML number was printed)', () => {
  const coreHttp = (password: string) =>
    `core:\n  adapter: http\n  http:\n    baseUrl: https://core.bank.example/api\n    username: boarding\n    password: ${password}\n`;
  const mambu = (auth: string) =>
    `core:\n  adapter: mambu\n  mambu:\n    baseUrl: https://bank.mambu.com/api\n    ${auth}\n`;
  const platformWith = (apiKey: string) =>
    `platform:\n  baseUrl: https://lender.example.com/api\n  apiKey: ${apiKey}\n  environment: staging\n`;
  const cases: Array<{ key: string; yaml: (value: string) => string }> = [
    { key: 'platform.apiKey', yaml: platformWith },
    { key: 'webhooks.secrets', yaml: (v) => `${base}webhooks:\n  secrets: ${v}\n` },
    { key: 'webhooks.secrets.0', yaml: (v) => `${base}webhooks:\n  secrets: [${v}]\n` },
    { key: 'core.http.password', yaml: (v) => `${base}${coreHttp(v)}` },
    { key: 'customers.tinHashKey', yaml: (v) => `${base}customers:\n  tinHashKey: ${v}\n` },
    {
      key: 'store.postgres.password',
      yaml: (v) =>
        `${base}store:\n  engine: postgres\n  postgres:\n    url: postgres://b@db/b\n    password: ${v}\n`,
    },
    {
      key: 'console.users.passwordHash',
      yaml: (v) =>
        `${base}console:\n  users:\n    - name: olga\n      passwordHash: ${v}\n      roles: [operator]\n`,
    },
    { key: 'core.mambu.auth.apiKey', yaml: (v) => `${base}${mambu(`auth: { apiKey: ${v} }`)}` },
    {
      key: 'core.mambu.auth.password',
      yaml: (v) => `${base}${mambu(`auth: { username: boarding, password: ${v} }`)}`,
    },
    {
      key: 'core.mambu.disburseAuth.apiKey',
      yaml: (v) => `${base}${mambu(`auth: { apiKey: k }\n    disburseAuth: { apiKey: ${v} }`)}`,
    },
    {
      key: 'core.mambu.disburseAuth.password',
      yaml: (v) =>
        `${base}${mambu(`auth: { apiKey: k }\n    disburseAuth: { username: d, password: ${v} }`)}`,
    },
  ];
  // Values no schema accepts for these keys (a number, a boolean, a map, a list of numbers, a bad string).
  const values = [
    { yaml: '987654321123', shown: /987654321123/ },
    { yaml: '31415.9265', shown: /31415/ },
    { yaml: 'true', shown: /true/ },
    { yaml: '{ nested: 55551234 }', shown: /55551234|nested/ },
    { yaml: '[77773333, 88884444]', shown: /7777|8888/ },
    { yaml: 'not-a-key-but-secret-text-42', shown: /secret-text/ },
  ];

  it('covers every secret key of the schema', () => {
    expect(
      cases
        .map((c) => c.key)
        .filter((k) => !k.endsWith('.0'))
        .sort(),
    ).toEqual(secretConfigKeys().sort());
  });

  for (const c of cases) {
    for (const v of values) {
      it(`${c.key}: ${v.yaml}`, () => {
        const text = c.yaml(v.yaml);
        let message = '';
        try {
          loadConfig({ env: {}, fileText: text, filePath: 'bank.yaml' });
        } catch (err) {
          message =
            err instanceof Error
              ? `${err.message}\n${(err as ConfigError).problems?.join('\n') ?? ''}`
              : String(err);
        }
        // Some values are legal for a key (a string password): then there is nothing to print.
        if (message === '') return;
        expect(message).not.toMatch(v.shown);
      });
    }
  }

  it('still says what was wrong: the key and the kind of value', () => {
    expect(problems(`${base}webhooks:\n  secrets: [12345]\n`)).toEqual([
      'webhooks.secrets.0: expected a signing secret (whsec_…), got a number (hidden)',
    ]);
    expect(problems(platformWith('12345'))).toEqual([
      expect.stringMatching(/^platform\.apiKey: .*got a number \(hidden\)$/),
    ]);
    expect(problems(`${base}${coreHttp('12345')}`)).toEqual([
      expect.stringMatching(/^core\.http\.password: .*got a number \(hidden\)$/),
    ]);
  });
});
