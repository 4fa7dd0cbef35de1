import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { shownConfig } from '../../../src/ops/connection-check.js';
import { loadConfig } from '../../../src/config/load.js';
import { createLogger } from '../../../src/lib/logger.js';
import { CREDENTIAL_FIELDS, isSecretField, isSecretPath, redactPayload } from '../../../src/lib/redact.js';
import { schemaKeyPaths, secretConfigKeys } from '../../support/config-keys.js';
import { configSchema } from '../../../src/config/schema.js';

/**
 * One list of secret names (lib/redact.ts). Every config key the schema declares with a secret's
 * name is found by walking the zod schema, and each is hidden everywhere: `config check`, the log
 * line, what the store keeps. A secret key added to the schema later is checked here without
 * anyone remembering to list it.
 */
const PLANTED = 'planted-secret-4e1f9c27';

function setAt(root: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let cur = root;
  for (const k of keys.slice(0, -1)) {
    if (cur[k] === undefined || cur[k] === null || typeof cur[k] !== 'object') cur[k] = {};
    cur = cur[k] as Record<string, unknown>;
  }
  cur[keys.at(-1)!] = value;
}

const baseConfig = () =>
  loadConfig({
    env: {},
    fileText:
      'platform: { baseUrl: "https://lender.example.com/api", apiKey: pk_test_abcdefgh12345678, environment: staging }\ncore:\n  adapter: http\n  http: { baseUrl: "https://core.bank.example/api", username: boarding, password: pw-0123456789 }\n',
  }) as unknown as Record<string, unknown>;

describe('secret config keys', () => {
  it('the schema walk finds the known ones (and names nothing that is no credential, such as a tin column)', () => {
    expect(secretConfigKeys().sort()).toEqual([
      'console.users.passwordHash',
      'core.http.password',
      'core.mambu.auth.apiKey',
      'core.mambu.auth.password',
      'core.mambu.disburseAuth.apiKey',
      'core.mambu.disburseAuth.password',
      'customers.tinHashKey',
      'platform.apiKey',
      'store.postgres.password',
      'webhooks.secrets',
    ]);
    expect(schemaKeyPaths(configSchema)).toContain('customers.extract.layout.columns.tin');
    expect(isSecretPath('customers.extract.layout.columns.tin')).toBe(false);
  });

  for (const key of secretConfigKeys()) {
    it(`${key} is hidden by config check, in log lines and in what the store keeps`, () => {
      // config check
      const c = baseConfig();
      setAt(
        c,
        key,
        key === 'webhooks.secrets'
          ? [PLANTED, `${PLANTED}-2`]
          : key === 'platform.apiKey'
            ? `pk_test_${PLANTED}`
            : PLANTED,
      );
      expect(JSON.stringify(shownConfig(c as never))).not.toContain(PLANTED);

      // a log line carrying the key's name, at the top and nested
      const leaf = key.split('.').at(-1)!;
      let logged = '';
      const logger = createLogger({
        level: 'info',
        destination: new Writable({ write: (chunk: Buffer, _e, cb) => ((logged += chunk.toString()), cb()) }),
      });
      logger.info(
        { [leaf]: PLANTED, config: { [leaf]: PLANTED }, deeper: { http: { [leaf]: PLANTED } } },
        'a line',
      );
      logger.flush?.();
      expect(logged).toContain('a line');
      expect(logged).not.toContain(PLANTED);

      // a stored payload
      expect(JSON.stringify(redactPayload({ [leaf]: PLANTED, nested: { [leaf]: [PLANTED] } }))).not.toContain(
        PLANTED,
      );
      expect(isSecretField(leaf)).toBe(true);
    });
  }

  it('every credential field is a secret config path and a redacted log field', () => {
    for (const f of CREDENTIAL_FIELDS) {
      expect(isSecretPath(`any.${f}`), f).toBe(true);
      expect(isSecretField(f), f).toBe(true);
    }
  });
});

describe('a PostgreSQL URL with its password (store.postgres.url)', () => {
  it('is shown and logged with the password as ***', async () => {
    const { hideSecrets, scrubText } = await import('../../../src/lib/redact.js');
    const url = 'postgres://boarding:planted-pw-77@db.internal:5432/boarding';
    expect(JSON.stringify(hideSecrets({ store: { postgres: { url } } }))).not.toContain('planted-pw-77');
    expect(scrubText(`cannot connect to ${url}`)).toBe(
      'cannot connect to postgres://boarding:***@db.internal:5432/boarding',
    );
  });
});
