import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../../src/lib/redact.js';
import { postgresOpenError } from '../../../src/store/open.js';

// The store had its own redactUrl (store/pg/url.ts) with another output (`boarding:***@`, query
// parameters kept unless their name looked secret) than the config's (`(hidden)`). One rule now.
describe('a PostgreSQL URL is shown one way by config errors and by the store', () => {
  const url = 'postgres://boarding:pw-71@db.internal:5432/boarding?sslmode=require&password=pw-72';

  it('keeps the role, hides the password and the whole query string', () => {
    expect(redactUrl(url)).toBe('postgres://boarding:(hidden)@db.internal:5432/boarding?(hidden)');
    expect(redactUrl('postgresql://boarding@127.0.0.1:5432/t')).toBe(
      'postgresql://boarding@127.0.0.1:5432/t',
    );
    // Outside a database URL the user-info may itself be a token: hidden whole.
    expect(redactUrl('https://tok-73@h.example/api')).toBe('https://(hidden)@h.example/api');
  });

  it("the store's open error names the URL in the same form, the driver's message scrubbed too", () => {
    const err = Object.assign(new Error(`connect ECONNREFUSED while dialling ${url}`), {
      code: 'ECONNREFUSED',
    });
    const target = {
      engine: 'postgres' as const,
      url,
      ssl: 'verify-full' as const,
      poolSize: 2,
      connectTimeoutMs: 1000,
    };
    const message = postgresOpenError(target, err).message;
    expect(message).toContain('postgres://boarding:(hidden)@db.internal:5432/boarding?(hidden)');
    expect(message).not.toMatch(/pw-7[12]/);
  });
});
