/**
 * Issue 43 F3/F5/F11: a URL on the command line that carries a password (in its user-info, a
 * password holding `@` included, or as `?password=`) is refused before anything connects, exit 2,
 * with the sentence to use BOARDING_STORE_PASSWORD, and the password is in no output; a
 * `?host=` (or port, hostaddr, user, dbname) that would connect elsewhere than the URL names is
 * refused naming the parameter.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runCli } from '../pipeline/harness.js';

function sqliteConfig(): string {
  const dir = mkdtempSync(join(tmpdir(), 'cli-urls-'));
  const file = join(dir, 'c.yaml');
  writeFileSync(
    file,
    stringify({
      platform: { baseUrl: 'http://127.0.0.1:9/api', apiKey: 'pk_test_x', environment: 'staging' },
      store: { path: join(dir, 'state.sqlite'), postgres: { ssl: 'verify-full' } },
      log: { level: 'silent' },
    }),
  );
  return file;
}

describe('URLs on the command line', () => {
  it('state migrate --to with a password anywhere in the URL: exit 2, BOARDING_STORE_PASSWORD named, the password shown nowhere', async () => {
    const config = sqliteConfig();
    for (const url of [
      'postgresql://u:Pa55word-91@db.example:5432/boarding',
      'postgresql://u:p@ss@w0rd-91@db.example/boarding',
      'postgresql://u@db.example/boarding?password=Pa55word-91',
      'postgresql://u@db.example/boarding?sslpassword=Pa55word-91',
    ]) {
      const r = await runCli(['state', 'migrate', '--to', url, '--config', config]);
      expect(r.code, url).toBe(2);
      expect(r.error, url).toMatch(/^--to: the URL carries .*BOARDING_STORE_PASSWORD/s);
      expect(`${r.error ?? ''}${r.stdout}`, url).not.toMatch(/Pa55word|w0rd-91/);
    }
  });

  it('state migrate --to with ?host= (or another parameter that moves the connection) is refused naming it', async () => {
    const config = sqliteConfig();
    for (const [param, url] of [
      ['host', 'postgresql://u@wrong.example:5432/db?host=127.0.0.1'],
      ['hostaddr', 'postgresql://u@wrong.example/db?hostaddr=127.0.0.1'],
      ['port', 'postgresql://u@db.example/db?port=6543'],
      ['user', 'postgresql://u@db.example/db?user=postgres'],
      ['dbname', 'postgresql://u@db.example/db?dbname=other'],
    ] as const) {
      const r = await runCli(['state', 'migrate', '--to', url, '--config', config]);
      expect(r.code, url).toBe(2);
      expect(r.error, url).toContain(`--to: ?${param} in the URL`);
      expect(r.error, url).toContain(`remove ${param} from the query`);
    }
  });

  it('webhooks register --url with credentials is refused before the platform is called', async () => {
    const config = sqliteConfig();
    const r = await runCli([
      'webhooks',
      'register',
      '--url',
      'https://hooks.example.com/webhooks/platform?token=Tok3n-77',
      '--config',
      config,
    ]);
    expect(r.code).toBe(2);
    expect(r.error).not.toContain('Tok3n-77');
    expect(r.error).toMatch(/--url: /);
  });
});
