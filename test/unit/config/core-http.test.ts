import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/lib/errors.js';

const base = `
platform:
  baseUrl: https://lender.example.com/api
  apiKey: pk_test_abc
  environment: staging
core:
  adapter: http
  http:
    baseUrl: https://core.bank.local/fineract-provider/api/v1
    username: boarding
    password: secret
`;

describe('core.http.documents (documents Fineract would refuse)', () => {
  it("defaults to Fineract's 5 MiB cap and skipping what it would refuse", () => {
    const c = loadConfig({ env: {}, fileText: base });
    expect(c.core.http?.documents).toEqual({ maxBytes: 5 * 1024 * 1024, refused: 'skip', refusedByType: {} });
  });

  it('names the key of a bad policy', () => {
    let problems: readonly string[] = [];
    try {
      loadConfig({
        env: {},
        fileText: `${base}    documents: { refused: drop, refusedByType: { csv: maybe } }\n`,
        filePath: 'bank.yaml',
      });
    } catch (err) {
      if (err instanceof ConfigError) problems = err.problems;
    }
    expect(problems.join('\n')).toMatch(/core\.http\.documents\.refused: .*skip.*quarantine/);
    expect(problems.join('\n')).toMatch(/core\.http\.documents\.refusedByType\.csv/);
  });
});
