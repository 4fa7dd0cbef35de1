/**
 * The admin listener answers only the host names it is configured for (`admin.allowedHosts`):
 * a page on another site that rebinds its own DNS name to 127.0.0.1 reaches the listener with
 * that name in `Host`, and without this check could read /reports/latest or /metrics from the
 * victim's browser. Loopback names are allowed by default, and `admin.host` when it names one
 * address (a wildcard such as 0.0.0.0 names none: list the names people use in allowedHosts).
 */
import type { RequestHandler } from 'express';
import ipaddr from 'ipaddr.js';

const LOOPBACK = ['localhost', '127.0.0.1', '::1'];

/** 0.0.0.0, ::, [::] (any spelling of the unspecified address) or nothing: every interface, no one name. */
export function isWildcardHost(host: string): boolean {
  const h = hostName(host);
  return h === '' || (ipaddr.isValid(h) && ipaddr.parse(h).range() === 'unspecified');
}

/** A Host header (or a configured name) as compared: lower case, no port, no brackets, no trailing dot. */
export function hostName(value: string): string {
  let h = value.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    h = end > 0 ? h.slice(1, end) : h;
  } else {
    const colon = h.indexOf(':');
    // One colon: host:port. Several: a bare IPv6 address (no port can be told apart: kept whole).
    if (colon >= 0 && h.indexOf(':', colon + 1) < 0) h = h.slice(0, colon);
  }
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/** The names the admin listener answers: the configured list, else loopback plus admin.host. */
export function adminHostNames(admin: {
  host: string;
  allowedHosts?: readonly string[] | undefined;
}): string[] {
  if (admin.allowedHosts !== undefined && admin.allowedHosts.length > 0)
    return [...new Set(admin.allowedHosts.map(hostName))];
  const own = hostName(admin.host);
  return [...new Set([...LOOPBACK, ...(isWildcardHost(own) ? [] : [own])])];
}

/**
 * `config check`: admin.host listens on every interface but admin.allowedHosts is not set, so only
 * the loopback names get through; whoever reaches the console by the machine's DNS name or address
 * gets 421. Null when the names are listed or the host names one address.
 */
export function adminHostWarning(admin: {
  host: string;
  allowedHosts?: readonly string[] | undefined;
}): string | null {
  if (!isWildcardHost(admin.host)) return null;
  if (admin.allowedHosts !== undefined && admin.allowedHosts.length > 0) return null;
  return (
    `${admin.host} listens on every interface, but without admin.allowedHosts the console, /metrics ` +
    `and /readyz answer only ${LOOPBACK.join(', ')} in the Host header: a browser or probe that uses ` +
    "this machine's DNS name or address gets 421; list those names in admin.allowedHosts " +
    '(e.g. [ops.bank.example])'
  );
}

/**
 * An address literal inside one of the ranges (admin.allowedHosts "10.0.0.0/8": Prometheus and the
 * kubelet reach a pod by its address). Only literals match: a rebinding attack brings a name, and a
 * page served from the address itself is that origin already.
 */
function inRanges(name: string, ranges: ReadonlyArray<[ipaddr.IPv4 | ipaddr.IPv6, number]>): boolean {
  if (ranges.length === 0 || !ipaddr.isValid(name)) return false;
  const addr = ipaddr.process(name);
  return ranges.some(([net, bits]) => addr.kind() === net.kind() && addr.match(net, bits));
}

/**
 * 421 Misdirected Request for a `Host` not in the list (400 without one), before any route runs.
 * `onRefused` is told the refused name (logged by the caller, rate-limited there).
 */
export function allowedHostsGuard(
  names: readonly string[],
  onRefused?: (host: string) => void,
): RequestHandler {
  const allowed = new Set(names.filter((n) => !n.includes('/')).map(hostName));
  const ranges = names.filter((n) => n.includes('/')).map((n) => ipaddr.parseCIDR(n.trim()));
  return (req, res, next) => {
    const raw = req.headers.host;
    if (raw === undefined || raw.trim() === '') {
      res.status(400).type('text/plain').send('Host header required\n');
      return;
    }
    const name = hostName(raw);
    if (!allowed.has(name) && !inRanges(name, ranges)) {
      onRefused?.(name.slice(0, 100));
      res
        .status(421)
        .type('text/plain')
        .send(`This listener does not answer for host ${name.slice(0, 100)} (admin.allowedHosts)\n`);
      return;
    }
    next();
  };
}
