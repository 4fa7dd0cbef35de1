/**
 * store.postgres as a bank writes it (issue 33): the password beside a URL without one, TLS set by
 * store.postgres.ssl only. node-postgres let the URL win (an empty URL password replaced the
 * configured one; `?sslmode=disable` turned verify-full off): each such URL is now a config error
 * naming the key, and the driver never sees the URL.
 */
import { describe, expect, it } from 'vitest';
import { shownConfig } from '../../../src/ops/connection-check.js';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/lib/errors.js';
import { scrubText } from '../../../src/lib/redact.js';
import { pgClientConfig } from '../../../src/store/pg/connection.js';
import { redactUrl } from '../../../src/lib/redact.js';

const BASE =
  'platform: { baseUrl: "https://lender.example.com/api", apiKey: pk_test_abcdefgh12345678, environment: staging }\n';
const KEY = 'customers: { tinHashKey: a-shared-key-of-replicas }\n';
const pgYaml = (postgres: string): string =>
  `${BASE}${KEY}store: { engine: postgres, postgres: ${postgres} }\n`;
const problems = (fileText: string, env: Record<string, string> = {}): string[] => {
  try {
    loadConfig({ env, fileText });
    return [];
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return [...((err as ConfigError).problems ?? [(err as Error).message])];
  }
};

describe('store.postgres credentials', () => {
  it('the password from BOARDING_STORE_PASSWORD with a URL without one reaches the driver (regression: the URL\'s empty password replaced it: "SASL: client password must be a string")', () => {
    const c = loadConfig({
      env: { BOARDING_STORE_PASSWORD: 'pw-from-env' },
      fileText: pgYaml('{ url: "postgres://boarding@db.internal:5433/boarding" }'),
    });
    const p = c.store.postgres;
    expect(
      pgClientConfig({ url: p.url!, password: p.password, ssl: p.ssl, connectTimeoutMs: p.connectTimeoutMs }),
    ).toMatchObject({
      host: 'db.internal',
      port: 5433,
      user: 'boarding',
      database: 'boarding',
      password: 'pw-from-env',
      ssl: { rejectUnauthorized: true },
      connectionTimeoutMillis: 5000,
    });
  });

  it('a password in the URL and in store.postgres.password (or the environment) is a config error naming both, the password not shown', () => {
    for (const [yaml, env] of [
      [pgYaml('{ url: "postgres://boarding:pw-in-url-77@db/boarding", password: other-pw-88 }'), {}],
      [
        pgYaml('{ url: "postgres://boarding:pw-in-url-77@db/boarding" }'),
        { BOARDING_STORE_PASSWORD: 'other-pw-88' },
      ],
      [
        pgYaml('{ url: "postgres://boarding@db/boarding?password=pw-in-url-77" }'),
        { BOARDING_STORE_PASSWORD: 'other-pw-88' },
      ],
    ] as const) {
      const p = problems(yaml, env);
      expect(p.join('\n')).toMatch(
        /^store\.postgres\.password: a password is in store\.postgres\.url and in store\.postgres\.password \(or BOARDING_STORE_PASSWORD\)/m,
      );
      expect(p.join('\n')).not.toMatch(/pw-in-url-77|other-pw-88/);
    }
  });

  it("a password in the URL's query string is never shown: config check, log text, error messages", () => {
    const url = 'postgres://boarding@db/boarding?password=pw-in-query-55&options=-c%20statement_timeout%3D0';
    const c = loadConfig({ env: {}, fileText: pgYaml(`{ url: "${url}" }`) });
    expect(JSON.stringify(shownConfig(c))).not.toContain('pw-in-query-55');
    expect(scrubText(`cannot connect to ${url}`)).not.toContain('pw-in-query-55');
    expect(redactUrl(url)).not.toContain('pw-in-query-55');
    expect(redactUrl('postgres://boarding:pw-in-userinfo@db/boarding')).toBe(
      'postgres://boarding:(hidden)@db/boarding',
    );
  });
});

describe('store.postgres TLS: the URL cannot weaken it', () => {
  it.each([
    [
      '?sslmode=disable',
      /store\.postgres\.url: \?sslmode=disable in the URL disagrees with store\.postgres\.ssl \(verify-full\)/,
    ],
    [
      '?sslmode=no-verify',
      /store\.postgres\.url: \?sslmode=no-verify in the URL disagrees with store\.postgres\.ssl/,
    ],
    ['?sslmode=require', /store\.postgres\.url: \?sslmode=require in the URL disagrees/],
    [
      '?ssl=false',
      /store\.postgres\.url: \?ssl in the URL: TLS is set by store\.postgres\.ssl and store\.postgres\.sslRootCert only/,
    ],
    [
      '?sslrootcert=/tmp/evil-ca.pem',
      /store\.postgres\.url: \?sslrootcert in the URL disagrees with store\.postgres\.sslRootCert/,
    ],
    ['?sslcert=/tmp/c.pem&sslkey=/tmp/k.pem', /store\.postgres\.url: \?sslcert in the URL/],
    ['?uselibpqcompat=true&sslmode=verify-full', /store\.postgres\.url: \?uselibpqcompat in the URL/],
    [
      '?connect_timeout=3',
      /store\.postgres\.url: \?connect_timeout in the URL is not a parameter the connector reads/,
    ],
    [
      '?application_name=mine',
      /store\.postgres\.url: \?application_name in the URL is not a parameter the connector reads/,
    ],
  ])(
    '%s with ssl: verify-full is a config error naming store.postgres.url (regression: it silently replaced the ssl option)',
    (query, message) => {
      const p = problems(
        pgYaml(
          `{ url: "postgres://boarding@db/boarding${query}", ssl: verify-full, sslRootCert: /etc/ssl/bank-ca.pem }`,
        ),
      );
      expect(p.join('\n')).toMatch(message);
    },
  );

  it('a URL parameter that agrees with the keys is accepted, and TLS comes from the keys', () => {
    const c = loadConfig({
      env: {},
      fileText: pgYaml('{ url: "postgres://boarding@db/boarding?sslmode=verify-ca", ssl: verify-ca }'),
    });
    const p = c.store.postgres;
    const driver = pgClientConfig({ url: p.url!, ssl: p.ssl, connectTimeoutMs: 1000 });
    expect(driver.ssl).toMatchObject({ rejectUnauthorized: true });
    expect(typeof (driver.ssl as { checkServerIdentity?: unknown }).checkServerIdentity).toBe('function');
    expect(
      pgClientConfig({ url: 'postgres://boarding@db/boarding', ssl: 'require', connectTimeoutMs: 1000 }).ssl,
    ).toEqual({ rejectUnauthorized: false });
    expect(
      pgClientConfig({ url: 'postgres://boarding@db/boarding', ssl: 'disable', connectTimeoutMs: 1000 }).ssl,
    ).toBe(false);
  });

  it('the driver refuses settings that disagree even when they did not come through the config loader', () => {
    expect(() =>
      pgClientConfig({
        url: 'postgres://boarding@db/boarding?sslmode=disable',
        ssl: 'verify-full',
        connectTimeoutMs: 1000,
      }),
    ).toThrow(/store\.postgres\.url: \?sslmode=disable/);
  });
});

describe('customers.tinHashKey on PostgreSQL', () => {
  it('is required with store.engine: postgres (one key for every replica, never a generated file)', () => {
    const p = problems(
      `${BASE}store: { engine: postgres, postgres: { url: "postgres://boarding@db/boarding" } }\n`,
    );
    expect(p.join('\n')).toMatch(
      /^customers\.tinHashKey: required when store\.engine is postgres \(or BOARDING_TIN_HASH_KEY\)/m,
    );
    const c = loadConfig({
      env: { BOARDING_TIN_HASH_KEY: 'k'.repeat(20) },
      fileText: `${BASE}store: { engine: postgres, postgres: { url: "postgres://boarding@db/boarding" } }\n`,
    });
    expect(c.customers.tinHashKey).toBe('k'.repeat(20));
    // SQLite keeps its generated key beside store.path.
    expect(loadConfig({ env: {}, fileText: BASE }).customers.tinHashKey).toBeUndefined();
  });
});

describe('store.postgres.url: what is shown is what is connected to (issue 43 F11)', () => {
  it('?host= / hostaddr / port / user / dbname in the URL is a config error naming the parameter', () => {
    for (const param of ['host=127.0.0.1', 'hostaddr=127.0.0.1', 'port=6543', 'user=postgres', 'dbname=x']) {
      const name = param.split('=')[0]!;
      const p = problems(pgYaml(`{ url: "postgresql://u@wrong.example:5432/db?${param}" }`));
      expect(p.join('\n'), param).toContain(`store.postgres.url: ?${name} in the URL`);
      expect(() =>
        pgClientConfig({
          url: `postgresql://u@wrong.example:5432/db?${param}`,
          ssl: 'verify-full',
          connectTimeoutMs: 1000,
        }),
      ).toThrow(new RegExp(`\\?${name} in the URL`));
    }
  });

  it('a socket directory is written as the host, and the driver gets what the URL names', () => {
    expect(
      pgClientConfig({
        url: 'postgres://boarding@%2Fvar%2Frun%2Fpostgresql:5433/state?options=-c%20x%3D1',
        ssl: 'disable',
        connectTimeoutMs: 1000,
      }),
    ).toMatchObject({ host: '/var/run/postgresql', port: 5433, user: 'boarding', database: 'state' });
  });
});
