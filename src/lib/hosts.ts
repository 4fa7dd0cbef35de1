import { isIP } from 'node:net';

/**
 * Host classes a webhook target must not be (the platform's rule, checked by the sandbox and,
 * after DNS resolution, by the connector before it registers an endpoint).
 */
const METADATA_HOSTS = new Set(['metadata.google.internal', 'metadata', 'metadata.azure.internal', 'instance-data', '169.254.169.254', 'fd00:ec2::254']);

/**
 * The IPv4 address inside an IPv4-mapped/compatible IPv6 literal, in either notation
 * (`::ffff:127.0.0.1`, or `::ffff:7f00:1` as URL parsing normalises it), else the host unchanged.
 */
function unwrapMappedV4(host: string): string {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  const dotted = /^::(?:ffff:)?(\d+\.\d+\.\d+\.\d+)$/.exec(h);
  if (dotted?.[1]) return dotted[1];
  const hex = /^::(?:ffff:)?([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(h);
  if (hex?.[1] && hex[2]) {
    const hi = parseInt(hex[1], 16);
    const lo = parseInt(hex[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return h;
}

function ipv4Parts(host: string): number[] | null {
  if (isIP(host) !== 4) return null;
  return host.split('.').map(Number);
}

export function isLoopbackHost(host: string): boolean {
  // IPv4-mapped IPv6 (::ffff:127.0.0.1) is how a dual-stack socket reports an IPv4 peer.
  const h = unwrapMappedV4(host);
  if (h === 'localhost' || h.endsWith('.localhost') || h === '::1') return true;
  const v4 = ipv4Parts(h);
  return v4 !== null && v4[0] === 127;
}

/** Private, link-local, unspecified or cloud-metadata hosts: never a webhook target. */
export function isPrivateHost(host: string): boolean {
  const h = unwrapMappedV4(host);
  if (METADATA_HOSTS.has(h)) return true;
  const v4 = ipv4Parts(h);
  if (v4) {
    const [a = 0, b = 0] = v4;
    return a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127);
  }
  if (isIP(h) === 6) return h === '::' || h.startsWith('fc') || h.startsWith('fd') || h.startsWith('fe80');
  return h.endsWith('.internal') || h.endsWith('.local');
}
