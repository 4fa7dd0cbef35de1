import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { transportWarnings } from '../../../src/config/security.js';
import { ConfigError } from '../../../src/lib/errors.js';

function problems(fileText: string): string[] {
  try {
    loadConfig({ env: {}, fileText, filePath: 'bank.yaml' });
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

const prod = (baseUrl: string, extra = '') => `
platform:
  baseUrl: ${baseUrl}
  apiKey: pk_live_abc
  environment: production
${extra}`;

const core = (url: string, insecure = false) => `core:
  adapter: http
  http: { baseUrl: ${url}, username: u, password: p${insecure ? ', insecureTls: true' : ''} }
`;

describe('transport security in the config (regression: a pk_live_ key over plain http passed)', () => {
  it('production: https only for the platform, the core and the public webhook URL', () => {
    expect(problems(prod('http://lender.example.com/api'))).toEqual([
      'platform.baseUrl: expected an https:// URL with platform.environment: production, got http://lender.example.com (secrets and loan data would cross the network in clear)',
    ]);
    expect(
      problems(
        prod('https://lender.example.com/api', core('http://core.bank.local/fineract-provider/api/v1')),
      )[0],
    ).toMatch(/^core\.http\.baseUrl: expected an https:\/\/ URL/);
    expect(
      problems(
        prod(
          'https://lender.example.com/api',
          'webhooks: { publicUrl: "http://c.example/webhooks/platform" }\n',
        ),
      )[0],
    ).toMatch(/^webhooks\.publicUrl: expected an https:\/\/ URL/);
    expect(
      problems(
        prod('https://lender.example.com/api', core('https://core.bank.local/fineract-provider/api/v1')),
      ),
    ).toEqual([]);
  });

  it('production refuses insecureTls; elsewhere it is allowed with a warning', () => {
    expect(problems(prod('https://lender.example.com/api', core('https://core.bank.local/x', true)))).toEqual(
      [
        "core.http.insecureTls: refused with platform.environment: production (the core's certificate must be verified; add its CA to NODE_EXTRA_CA_CERTS instead)",
      ],
    );
    const staging = loadConfig({
      env: {},
      fileText: `platform: { baseUrl: "http://127.0.0.1:4010/api", apiKey: pk_test_a, environment: staging }\n${core('https://core.test/x', true)}`,
    });
    expect(transportWarnings(staging)).toEqual([expect.stringContaining('core.http.insecureTls: true')]);
  });

  it('refuses credentials or a query string in a URL, in any environment, without echoing them', () => {
    const p = problems(
      `platform: { baseUrl: "https://u:s3cret@lender.example.com/api?token=abc", apiKey: pk_test_a, environment: staging }\n`,
    );
    expect(p).toEqual([
      "platform.baseUrl: a URL must not carry credentials (user:password@); use the key's own setting or the environment (e.g. BOARDING_CORE_PASSWORD)",
      'platform.baseUrl: a URL must not carry a query string (10 characters after "?"); give the base URL only',
    ]);
    expect(p.join('\n')).not.toContain('s3cret');
    // A schema error on such a URL does not print it either.
    const bad = problems(
      `platform: { baseUrl: "https://u:s3cret@lender.example.com/v1", apiKey: pk_test_a, environment: staging }\n`,
    );
    expect(bad.join('\n')).toContain('platform.baseUrl');
    expect(bad.join('\n')).not.toContain('s3cret');
  });
});

describe('the state database in production (issue 43 F9)', () => {
  const pgProd = (url: string, extra: string) =>
    prod(
      'https://lender.example.com/api',
      `customers: { tinHashKey: a-shared-key-of-replicas }\nstore: { engine: postgres, postgres: { url: "${url}", ${extra} } }\n`,
    );

  it('a remote database with ssl disable or require is a config error naming store.postgres.ssl', () => {
    for (const ssl of ['disable', 'require']) {
      const p = problems(pgProd('postgres://boarding@db.bank.internal:5432/state', `ssl: ${ssl}`));
      expect(p.join('\n'), ssl).toMatch(
        new RegExp(`^store\\.postgres\\.ssl: ${ssl} refused with platform\\.environment: production`, 'm'),
      );
    }
  });

  it('verify-ca needs store.postgres.verifyCaReason; verify-full passes', () => {
    expect(
      problems(pgProd('postgres://boarding@db.bank.internal/state', 'ssl: verify-ca')).join('\n'),
    ).toMatch(/^store\.postgres\.verifyCaReason: store\.postgres\.ssl is verify-ca/m);
    expect(
      problems(
        pgProd(
          'postgres://boarding@db.bank.internal/state',
          'ssl: verify-ca, verifyCaReason: "managed service: the certificate names the provider\'s host"',
        ),
      ),
    ).toEqual([]);
    expect(problems(pgProd('postgres://boarding@db.bank.internal/state', 'ssl: verify-full'))).toEqual([]);
  });

  it('a database on loopback or a local socket may run without TLS; staging is not held to it', () => {
    for (const url of [
      'postgres://boarding@127.0.0.1:5432/state',
      'postgres://boarding@localhost/state',
      'postgres://boarding@[::1]/state',
      'postgres://boarding@%2Fvar%2Frun%2Fpostgresql/state',
    ])
      expect(problems(pgProd(url, 'ssl: disable')), url).toEqual([]);
    expect(
      problems(
        pgProd('postgres://boarding@db.bank.internal/state', 'ssl: disable')
          .replace('environment: production', 'environment: staging')
          .replace('pk_live_abc', 'pk_test_abc'),
      ),
    ).toEqual([]);
  });
});
