import { describe, expect, it } from 'vitest';
import { isLoopbackHost, isPrivateHost, specialHostProblem, specialRange } from '../../../src/lib/hosts.js';
import { webhookTargetProblem } from '../../../src/platform/endpoint/public-url.js';

/*
 * One row per entry of the IANA IPv4 and IPv6 special-purpose address registries (plus multicast,
 * the deprecated site-local block and the IETF-reserved ::/8), each with an address inside it.
 * Classification comes from ipaddr.js's range tables (lib/hosts.ts), not from this list.
 */
const SPECIAL: Array<[range: string, address: string]> = [
  // IPv4 (RFC 6890 registry)
  ['0.0.0.0/8 "this network"', '0.1.2.3'],
  ['0.0.0.0/32 "this host"', '0.0.0.0'],
  ['10.0.0.0/8 private', '10.200.3.4'],
  ['100.64.0.0/10 shared (CGN)', '100.100.100.200'],
  ['127.0.0.0/8 loopback', '127.9.9.9'],
  ['169.254.0.0/16 link local', '169.254.10.1'],
  ['169.254.169.254 metadata', '169.254.169.254'],
  ['172.16.0.0/12 private', '172.31.255.254'],
  ['192.0.0.0/24 IETF protocol assignments', '192.0.0.100'],
  ['192.0.0.0/29 IPv4 service continuity', '192.0.0.1'],
  ['192.0.0.8/32 dummy', '192.0.0.8'],
  ['192.0.0.9/32 PCP anycast', '192.0.0.9'],
  ['192.0.0.10/32 TURN anycast', '192.0.0.10'],
  ['192.0.0.170/32 NAT64 discovery', '192.0.0.170'],
  ['192.0.0.171/32 NAT64 discovery', '192.0.0.171'],
  ['192.0.2.0/24 TEST-NET-1', '192.0.2.7'],
  ['192.31.196.0/24 AS112-v4', '192.31.196.1'],
  ['192.52.193.0/24 AMT', '192.52.193.1'],
  ['192.88.99.0/24 6to4 relay anycast (deprecated)', '192.88.99.1'],
  ['192.168.0.0/16 private', '192.168.255.1'],
  ['192.175.48.0/24 direct delegation AS112', '192.175.48.1'],
  ['198.18.0.0/15 benchmarking', '198.18.0.1'],
  ['198.18.0.0/15 benchmarking (upper half)', '198.19.255.254'],
  ['198.51.100.0/24 TEST-NET-2', '198.51.100.1'],
  ['203.0.113.0/24 TEST-NET-3', '203.0.113.9'],
  ['224.0.0.0/4 multicast', '239.1.2.3'],
  ['240.0.0.0/4 reserved', '250.1.2.3'],
  ['255.255.255.255/32 limited broadcast', '255.255.255.255'],
  // IPv6 (RFC 6890 registry)
  ['::1/128 loopback', '::1'],
  ['::/128 unspecified', '::'],
  ['::/8 IETF reserved (IPv4-compatible)', '::7f00:1'],
  ['::ffff:0:0/96 IPv4-mapped loopback', '::ffff:127.0.0.1'],
  ['::ffff:0:0/96 IPv4-mapped private (hex)', '::ffff:a00:1'],
  ['::ffff:0:0/96 IPv4-mapped metadata', '::ffff:a9fe:a9fe'],
  ['::ffff:0:0:0/96 IPv4-translated loopback', '::ffff:0:7f00:1'],
  ['64:ff9b::/96 NAT64 of loopback', '64:ff9b::7f00:1'],
  ['64:ff9b::/96 NAT64 of private', '64:ff9b::10.0.0.1'],
  ['64:ff9b:1::/48 local-use NAT64', '64:ff9b:1::8.8.8.8'],
  ['100::/64 discard-only', '100::1'],
  ['100:0:0:1::/64 dummy prefix', '100:0:0:1::1'],
  ['2001::/23 IETF protocol assignments', '2001:1::1'],
  ['2001::/32 TEREDO', '2001::1'],
  ['2001:1::2/128 TURN anycast', '2001:1::2'],
  ['2001:1::3/128 DNS-SD SRP anycast', '2001:1::3'],
  ['2001:2::/48 benchmarking', '2001:2::1'],
  ['2001:3::/32 AMT', '2001:3::1'],
  ['2001:4:112::/48 AS112-v6', '2001:4:112::1'],
  ['2001:10::/28 ORCHID (deprecated)', '2001:10::1'],
  ['2001:20::/28 ORCHIDv2', '2001:20::1'],
  ['2001:30::/28 drone remote ID', '2001:30::1'],
  ['2001:db8::/32 documentation', '2001:db8::1'],
  ['2002::/16 6to4 of loopback', '2002:7f00:1::1'],
  ['2620:4f:8000::/48 direct delegation AS112', '2620:4f:8000::1'],
  ['3fff::/20 documentation', '3fff::1'],
  ['5f00::/16 segment routing SIDs', '5f00::1'],
  ['fc00::/7 unique local', 'fc00::1'],
  ['fc00::/7 unique local (AWS metadata)', 'fd00:ec2::254'],
  ['fe80::/10 link local', 'fe80::1'],
  ['fe80::/10 link local, not only fe80::/16', 'fe90::1'],
  ['fe80::/10 link local, upper end', 'febf::1'],
  ['fe80::/10 link local with a zone', 'fe80::1%eth0'],
  ['fec0::/10 site local (deprecated)', 'fec0::1'],
  ['ff00::/8 multicast', 'ff02::1'],
  ['outside 2000::/3 (unassigned)', '4000::1'],
];

const PUBLIC = [
  '8.8.8.8',
  '93.184.215.14',
  '1.1.1.1',
  '100.63.255.255',
  '100.128.0.1',
  '172.32.0.1',
  '198.20.0.1',
  '2606:4700::1111',
  '2a00:1450:4001::1',
  '::ffff:8.8.8.8',
  '64:ff9b::808:808',
  '2002:808:808::1',
];

describe('special-purpose address ranges (regression: fe90::1, fec0::1, 64:ff9b::7f00:1 and 198.18.0.1 were accepted)', () => {
  it.each(SPECIAL)('%s: %s is special', (_range, address) => {
    expect(specialRange(address)).not.toBeNull();
    expect(specialHostProblem(address)).not.toBeNull();
    expect(specialHostProblem(`[${address}]`)).not.toBeNull();
  });

  it.each(PUBLIC)('%s is public', (address) => {
    expect(specialRange(address)).toBeNull();
    expect(specialHostProblem(address)).toBeNull();
  });

  it('addresses carrying an IPv4 address are classified by it, and say so', () => {
    expect(specialRange('64:ff9b::7f00:1')).toBe('rfc6052 of 127.0.0.1, loopback');
    expect(specialRange('::ffff:10.0.0.1')).toBe('ipv4Mapped of 10.0.0.1, private');
    expect(isLoopbackHost('64:ff9b::7f00:1')).toBe(true);
    expect(isLoopbackHost('::ffff:7f00:1')).toBe(true);
    expect(isPrivateHost('64:ff9b::a00:1')).toBe(true);
  });

  it('names that are never public', () => {
    for (const h of [
      'localhost',
      'api.localhost',
      'metadata.google.internal',
      'metadata',
      'db.internal',
      'printer.local',
      'nas.home.arpa',
    ])
      expect(specialHostProblem(h), h).not.toBeNull();
    expect(specialHostProblem('docs.bank.example')).toBeNull();
  });

  it.each(['fe90::1', 'fec0::1', '64:ff9b::7f00:1', '198.18.0.1'])(
    'webhooks register refuses %s, literally and after DNS resolution',
    async (address) => {
      const literal = address.includes(':') ? `[${address}]` : address;
      expect(
        await webhookTargetProblem(`https://${literal}/webhooks/platform`, { allowLocal: false }),
      ).not.toBeNull();
      expect(
        await webhookTargetProblem('https://hooks.bank.example/webhooks/platform', {
          allowLocal: false,
          resolve: () => Promise.resolve(['93.184.215.14', address]),
        }),
      ).toMatch(new RegExp(`resolves to ${address.replace(/[.:]/g, '\\$&')}`));
    },
  );
});
