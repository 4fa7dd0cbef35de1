import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/lib/errors.js';

const platform = `
platform:
  baseUrl: https://lender.example.com/api
  apiKey: pk_test_abc
  environment: staging
`;

function problems(text: string, env: Record<string, string> = {}): string {
  try {
    loadConfig({ env, fileText: text, filePath: 'bank.yaml' });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.join('\n');
    throw err;
  }
  return '';
}

/** The yaml blocks of a doc that configure core.adapter: mambu. */
function mambuBlocks(file: string): string[] {
  const text = readFileSync(join(import.meta.dirname, '../../..', file), 'utf8');
  return (
    [...text.matchAll(/```yaml\n([\s\S]*?)```/g)]
      .map((m) => m[1] as string)
      .filter((b) => /adapter: mambu/.test(b))
      // "Try a core locally" shows the simulator's printed block (run by try-it-locally.test.ts).
      .filter((b) => !b.includes('127.0.0.1'))
  );
}

describe('core.mambu (docs/core.md "Mambu")', () => {
  it('the complete config of docs/core.md and the README example parse, with defaults where not given', () => {
    const blocks = [...mambuBlocks('docs/core.md'), ...mambuBlocks('README.md')];
    expect(blocks).toHaveLength(2);
    for (const b of blocks) {
      const c = loadConfig({ env: {}, fileText: `${platform}${b}` });
      expect(c.core.adapter).toBe('mambu');
      expect(c.core.mambu?.baseUrl).toBe('https://bank.mambu.com/api');
      expect(c.core.mambu?.taxIdField).toEqual({
        clients: '_taxInformation_Clients.taxId',
        groups: '_taxInformation_Groups.taxId',
      });
      expect(c.core.mambu?.loanRefField).toBe('_boarding_Loans.platformLoanId');
    }
  });

  it('names what is wrong: a missing block, credentials of neither shape, a custom field without its set', () => {
    expect(problems(`${platform}core: { adapter: mambu }\n`)).toMatch(
      /core\.mambu: expected a map \(required when core\.adapter is mambu/,
    );
    expect(
      problems(
        `${platform}core: { adapter: mambu, mambu: { baseUrl: https://b.mambu.com/api, auth: { token: x } } }\n`,
      ),
    ).toMatch(/core\.mambu\.auth: expected \{ apiKey \} or \{ username, password \}/);
    expect(
      problems(
        `${platform}core: { adapter: mambu, mambu: { baseUrl: https://b.mambu.com/api, auth: { apiKey: k }, taxIdField: { clients: taxId } } }\n`,
      ),
    ).toMatch(/core\.mambu\.taxIdField\.clients: expected <customFieldSetId>\.<customFieldId>/);
  });

  it('secrets from the environment go into core.mambu.auth (an API key, or a Basic password)', () => {
    const keyed = loadConfig({
      env: { BOARDING_CORE_API_KEY: 'from-env' },
      fileText: `${platform}core: { adapter: mambu, mambu: { baseUrl: https://b.mambu.com/api } }\n`,
    });
    expect(keyed.core.mambu?.auth).toEqual({ apiKey: 'from-env' });
    const basic = loadConfig({
      env: { BOARDING_CORE_PASSWORD: 'pw' },
      fileText: `${platform}core: { adapter: mambu, mambu: { baseUrl: https://b.mambu.com/api, auth: { username: boarding } } }\n`,
    });
    expect(basic.core.mambu?.auth).toEqual({ username: 'boarding', password: 'pw' });
    expect(basic.core.http).toBeUndefined();
  });

  it('production: https only and no insecureTls for Mambu either', () => {
    const prod = platform.replace('pk_test_abc', 'pk_live_abc').replace('staging', 'production');
    const p = problems(
      `${prod}core: { adapter: mambu, mambu: { baseUrl: http://b.mambu.com/api, auth: { apiKey: k }, insecureTls: true } }\n`,
    );
    expect(p).toMatch(/core\.mambu\.baseUrl: expected an https:\/\/ URL/);
    expect(p).toMatch(/core\.mambu\.insecureTls: refused/);
  });
});
