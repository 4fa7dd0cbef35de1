import { describe, expect, it } from 'vitest';
import { adminHostNames, adminHostWarning, isWildcardHost } from '../../../src/http/allowed-hosts.js';

describe('admin listener host names', () => {
  it('every spelling of the unspecified address is a wildcard; loopback, one address and names are not', () => {
    for (const h of ['0.0.0.0', '::', '[::]', '::0', '0:0:0:0:0:0:0:0', ''])
      expect(isWildcardHost(h), h).toBe(true);
    for (const h of ['127.0.0.1', '::1', 'localhost', '10.1.2.3', 'ops.bank.example'])
      expect(isWildcardHost(h), h).toBe(false);
  });

  it('a wildcard admin.host adds no name of its own: only loopback names get through', () => {
    expect(adminHostNames({ host: '0.0.0.0' })).toEqual(['localhost', '127.0.0.1', '::1']);
    expect(adminHostNames({ host: '::' })).toEqual(['localhost', '127.0.0.1', '::1']);
    expect(adminHostNames({ host: '10.1.2.3' })).toEqual(['localhost', '127.0.0.1', '::1', '10.1.2.3']);
    expect(adminHostNames({ host: '0.0.0.0', allowedHosts: ['Ops.Bank.Example.'] })).toEqual([
      'ops.bank.example',
    ]);
  });

  it('regression: admin.host 0.0.0.0 or :: without admin.allowedHosts gave no warning (the DNS name got 421)', () => {
    for (const host of ['0.0.0.0', '::']) {
      const w = adminHostWarning({ host });
      expect(w, host).toContain(`${host} listens on every interface`);
      expect(w).toContain('gets 421');
      expect(w).toContain('admin.allowedHosts');
      expect(adminHostWarning({ host, allowedHosts: [] }), 'an empty list is no list').not.toBeNull();
      expect(adminHostWarning({ host, allowedHosts: ['ops.bank.example'] })).toBeNull();
    }
    expect(adminHostWarning({ host: '127.0.0.1' })).toBeNull();
    expect(adminHostWarning({ host: 'ops.bank.example' })).toBeNull();
  });
});
