import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/*
 * Host classes a URL the connector calls or registers must not be: loopback, private, link-local,
 * cloud metadata and every other special-purpose range (checked by the sandbox, by `webhooks
 * register` after DNS resolution, and by document downloads on the resolved address they connect
 * to). Addresses are classified with ipaddr.js's range tables (the IANA IPv4 and IPv6
 * special-purpose registries), not hand-written prefixes: only what it calls `unicast` (and, for
 * IPv6, inside the global unicast block 2000::/3) is public. Addresses that carry an IPv4 address
 * (IPv4-mapped, IPv4-translated, NAT64 64:ff9b::/96, 6to4) are classified by that address.
 */

/** Names of cloud metadata services (their addresses are link-local or unique-local anyway). */
const METADATA_HOSTS = new Set([
  'metadata.google.internal',
  'metadata',
  'metadata.azure.internal',
  'instance-data',
  'instance-data.ec2.internal',
]);

/** The special range an address is in ('loopback', 'private', 'linkLocal', 'reserved'…), or null when public. */
export function specialRange(address: string): string | null {
  const a = address.replace(/^\[|\]$/g, '');
  if (isIP(a.split('%')[0] ?? a) === 0) return null;
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(a);
  } catch {
    return 'unparsable';
  }
  if (ip.kind() === 'ipv4') {
    const range = ip.range();
    return range === 'unicast' ? null : range;
  }
  const v6 = ip as ipaddr.IPv6;
  const range = v6.range();
  const embedded = embeddedIPv4(v6, range);
  if (embedded !== undefined) {
    if (embedded === null) return range;
    const inner = specialRange(embedded.toString());
    return inner === null ? null : `${range} of ${embedded.toString()}, ${inner}`;
  }
  if (range !== 'unicast') return range;
  // ipaddr.js calls everything outside its special tables unicast, including the IETF-reserved
  // ::/8 (deprecated IPv4-compatible ::a.b.c.d) and the unassigned blocks: only 2000::/3 is routed.
  return v6.match(ipaddr.IPv6.parse('2000::'), 3) ? null : 'reserved';
}

/**
 * The IPv4 address an IPv6 address carries, for the ranges that carry one; null for such a range
 * whose address cannot be recovered (then the range itself decides); undefined for other ranges.
 */
function embeddedIPv4(ip: ipaddr.IPv6, range: string): ipaddr.IPv4 | null | undefined {
  const p = ip.parts;
  const v4 = (hi: number, lo: number): ipaddr.IPv4 => new ipaddr.IPv4([hi >> 8, hi & 255, lo >> 8, lo & 255]);
  switch (range) {
    case 'ipv4Mapped': // ::ffff:a.b.c.d
    case 'rfc6145': // ::ffff:0:a.b.c.d
      return v4(p[6] ?? 0, p[7] ?? 0);
    case 'rfc6052': // NAT64: the well-known 64:ff9b::/96 carries it in the last 32 bits
      return p[0] === 0x64 && p[1] === 0xff9b && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0
        ? v4(p[6] ?? 0, p[7] ?? 0)
        : null;
    case '6to4': // 2002:AABB:CCDD::/48
      return v4(p[1] ?? 0, p[2] ?? 0);
    default:
      return undefined;
  }
}

/** Host names that never name a public service: localhost and the private-use suffixes. */
function specialName(host: string): string | null {
  const h = host.toLowerCase().replace(/\.$/, '');
  if (h === 'localhost' || h.endsWith('.localhost')) return 'loopback';
  if (METADATA_HOSTS.has(h)) return 'metadata';
  if (h.endsWith('.internal') || h.endsWith('.local') || h.endsWith('.home.arpa')) return 'private name';
  return null;
}

/** Why a host (name or address) is not a public one, or null: the same words wherever it is checked. */
export function specialHostProblem(host: string): string | null {
  const h = host.replace(/^\[|\]$/g, '');
  if (isIP(h.split('%')[0] ?? h) !== 0) {
    const range = specialRange(h);
    return range === null ? null : describeRange(range);
  }
  const name = specialName(h);
  return name === null ? null : describeRange(name);
}

function describeRange(range: string): string {
  if (range.startsWith('loopback') || range.endsWith(', loopback')) return `a loopback address (${range})`;
  if (/metadata/.test(range)) return 'a cloud metadata host';
  return `a private, link-local, metadata or other special-purpose address (${range})`;
}

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  if (isIP(h.split('%')[0] ?? h) === 0) return specialName(h) === 'loopback';
  const range = specialRange(h);
  // IPv4-mapped IPv6 (::ffff:127.0.0.1) is how a dual-stack socket reports an IPv4 peer.
  return range !== null && (range === 'loopback' || range.endsWith(', loopback'));
}

/** Private, link-local, unspecified, metadata or any other special-purpose host that is not loopback. */
export function isPrivateHost(host: string): boolean {
  return !isLoopbackHost(host) && specialHostProblem(host) !== null;
}

/** Why an allow-list entry (host name, `*.domain`, address or CIDR) is not one, or null. */
export function allowEntryProblem(entry: string): string | null {
  if (entry.includes('/'))
    return ipaddr.isValidCIDR(entry) ? null : `${entry} is not a CIDR such as 10.20.0.0/16`;
  if (isIP(entry) !== 0) return null;
  return /^(\*\.)?([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]*[a-z0-9])?$/i.test(entry)
    ? null
    : `${entry} is not a host name, *.domain, address or CIDR`;
}
