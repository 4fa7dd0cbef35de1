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
