import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/lib/errors.js';

const platform = `
platform:
  baseUrl: https://lender.example.com/api
  apiKey: pk_test_abc
  environment: staging
`;
const http = `
  http:
    baseUrl: https://core.bank.local/fineract-provider/api/v1
    username: boarding
    password: secret
`;

function problems(fileText: string): string {
  try {
    loadConfig({ env: {}, fileText, filePath: 'bank.yaml' });
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  return '';
}

/** Issue 42 (first hour, 7): `core.adapter: fineract` was refused with "expected one of file, http, mambu". */
describe('core.adapter: fineract is the Fineract (http) adapter', () => {
  it('loads as http, with core.http as for http', () => {
    const c = loadConfig({ env: {}, fileText: `${platform}core:\n  adapter: fineract${http}` });
    expect(c.core.adapter).toBe('http');
    expect(c.core.http?.baseUrl).toBe('https://core.bank.local/fineract-provider/api/v1');
    // http keeps working.
    expect(loadConfig({ env: {}, fileText: `${platform}core:\n  adapter: http${http}` }).core.adapter).toBe(
      'http',
    );
  });

  it('without core.http, the error names the key and both names', () => {
    expect(problems(`${platform}core: { adapter: fineract }\n`)).toMatch(
      /core\.http: expected a map \(required when core\.adapter is http or fineract/,
    );
  });

  it('an unknown adapter name: the error says that http is Fineract and that fineract is accepted', () => {
    const text = problems(`${platform}core: { adapter: temenos }\n`);
    expect(text).toMatch(/bank\.yaml:\d+:\d+: core\.adapter: expected one of file, http \(Apache Fineract/);
    expect(text).toMatch(/`fineract` is read as http/);
    expect(text).toMatch(/got "temenos"/);
  });
});
