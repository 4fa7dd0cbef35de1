/**
 * Issue 43 F3/F4/F11: one URL redactor, built on the WHATWG URL parser, for every printer. The
 * audit saw `u:***@ss@w0rd@host` (the pattern stopped at the first `@` of a password holding `@`)
 * and a `?password=` left in `state migrate`'s advice.
 */
import { describe, expect, it } from 'vitest';
import { hideSecrets, redactUrl, redactUrlsIn, scrubDeep, scrubText } from '../../../src/lib/redact.js';

describe('the URL redactor (one, parser-based)', () => {
  it('a password holding @ is hidden up to the last @, as the driver reads it (F4)', () => {
    const url = 'postgresql://u:p@ss@w0rd@db.internal/boarding';
    for (const shown of [
      scrubText(`cannot connect to ${url}: timeout`),
      JSON.stringify(hideSecrets({ store: { postgres: { url } } })),
      redactUrl(url),
      JSON.stringify(scrubDeep({ db: url })),
    ]) {
      expect(shown).not.toMatch(/ss@w0rd|w0rd|p@ss/);
      expect(shown).toContain('db.internal/boarding');
    }
    expect(scrubText(`cannot connect to ${url}: timeout`)).toBe(
      'cannot connect to postgresql://u:***@db.internal/boarding: timeout',
    );
    expect(redactUrl(url)).toBe('postgresql://u:(hidden)@db.internal/boarding');
  });

  it('every query parameter that can carry a secret is hidden, the others kept (F3)', () => {
    const url =
      'postgres://u@db/x?password=pw1&passfile=%2Fhome%2Fpf&sslpassword=pw2&sslkey=%2Fk.pem&token=t1&api_key=k1&secret=s1&options=-c%20x%3D1';
    const out = scrubText(`target ${url}.`);
    for (const s of ['pw1', 'pw2', '%2Fhome%2Fpf', '%2Fk.pem', 't1', 'k1', 's1'])
      expect(out).not.toContain(s);
    expect(out).toBe(
      'target postgres://u@db/x?password=***&passfile=***&sslpassword=***&sslkey=***&token=***&api_key=***&secret=***&options=-c%20x%3D1.',
    );
    // An http(s) query (a presigned signature) is hidden whole; a fragment too.
    expect(redactUrlsIn('see https://files.example/d?X-Amz-Signature=abc#tok=1')).toBe(
      'see https://files.example/d?[redacted]#[redacted]',
    );
  });

  it('a URL the parser refuses keeps nothing of its user-info or query', () => {
    const out = scrubText('bad postgres://u:p/w@rd@db:notaport/x?password=zz end');
    expect(out).not.toMatch(/p\/w|w@rd|zz/);
    expect(out).toBe('bad postgres://***@db:notaport/x?[redacted] end');
  });

  it('a libpq key/value password outside a URL is hidden too', () => {
    expect(scrubText("host=db password='a b' user=u")).toBe('host=db password=*** user=u');
    expect(scrubText('host=db password=hunter2 user=u')).toBe('host=db password=*** user=u');
  });

  it('a URL without secrets is left as it was', () => {
    for (const t of [
      'GET https://core.example/api/v1/loans/7',
      'postgres://boarding@db:5432/x',
      'ssh://git@h/x',
    ])
      expect(scrubText(t)).toBe(t);
  });
});
