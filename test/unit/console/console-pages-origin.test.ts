import type { Request } from 'express';
import { describe, expect, it } from 'vitest';
import { sameOrigin } from '../../../src/console/pages/security.js';

const req = (headers: Record<string, string>): Request => ({ headers }) as unknown as Request;

describe('console pages: the same-origin check of a POST', () => {
  it('passes when Origin names the Host the request was sent to (case-insensitive), or Referer does when Origin is absent', () => {
    expect(
      sameOrigin(req({ host: 'ops.bank.example:8081', origin: 'https://OPS.bank.example:8081' })).ok,
    ).toBe(true);
    expect(
      sameOrigin(req({ host: '127.0.0.1:8081', referer: 'http://127.0.0.1:8081/console/loans/x?diff=1' })).ok,
    ).toBe(true);
  });

  it('refuses another host, another port, a null or missing Origin with no Referer, and non-web schemes', () => {
    for (const h of [
      { host: 'ops.bank.example:8081', origin: 'https://evil.example' },
      { host: 'ops.bank.example:8081', origin: 'https://ops.bank.example:9999' },
      { host: 'ops.bank.example:8081', origin: 'https://ops.bank.example.evil.example:8081' },
      { host: 'ops.bank.example:8081', origin: 'null' },
      { host: 'ops.bank.example:8081' },
      { host: 'ops.bank.example:8081', origin: 'file://ops.bank.example:8081' },
      { host: 'ops.bank.example:8081', origin: 'not a url' },
      { origin: 'https://ops.bank.example:8081' },
    ]) {
      expect(sameOrigin(req(h)).ok, JSON.stringify(h)).toBe(false);
    }
  });

  it('an Origin from another site, or an opaque one, wins over a same-site Referer', () => {
    expect(
      sameOrigin(
        req({ host: 'a.example', origin: 'https://evil.example', referer: 'https://a.example/console/' }),
      ).ok,
    ).toBe(false);
    expect(
      sameOrigin(req({ host: 'a.example', origin: 'null', referer: 'https://a.example/console/' })).ok,
    ).toBe(false);
  });
});
