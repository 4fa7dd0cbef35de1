import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { specialHostProblem } from '../lib/hosts.js';

export { allowEntryProblem } from '../lib/hosts.js';

/*
 * Where presigned document addresses may lead. A presigned URL comes from the platform, so a
 * compromised or confused platform could point the connector at anything inside the bank's
 * network (the core, a metadata service, an admin page). Every address a download connects to is
 * checked with the same special-range rule as `webhooks register` (lib/hosts.ts), AFTER DNS
 * resolution and ON the address the socket then connects to: the check runs inside the socket's
 * own lookup, so a name that resolves to a public address for a check and to 127.0.0.1 a moment
 * later (DNS rebinding) cannot get through.
 */

export interface DocumentHostPolicy {
  /** `boarding.documentHosts.allow`: host names (`docs.bank.internal`, `*.bank.internal`), addresses or CIDRs. */
  allow: readonly string[];
  /** Loopback addresses pass (platform.environment: development, i.e. the local sandbox). */
  allowLoopback: boolean;
}

type Resolved = Array<{ address: string; family: number }>;
export type DocumentResolver = (host: string) => Promise<Resolved>;

const systemResolver: DocumentResolver = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses),
    );
  });

/** Thrown (through the socket) when a download's host or address is refused: never retried by the transport. */
export class DocumentHostRefused extends Error {
  readonly code = 'EDOCUMENTHOSTREFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'DocumentHostRefused';
  }
}

interface CompiledPolicy {
  names: Set<string>;
  suffixes: string[];
  ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
  allowLoopback: boolean;
}

function compile(policy: DocumentHostPolicy): CompiledPolicy {
  const c: CompiledPolicy = {
    names: new Set(),
    suffixes: [],
    ranges: [],
    allowLoopback: policy.allowLoopback,
  };
  for (const raw of policy.allow) {
    const entry = raw.trim().toLowerCase();
    if (entry.includes('/')) c.ranges.push(ipaddr.parseCIDR(entry));
    else if (isIP(entry) !== 0) {
      const ip = ipaddr.parse(entry);
      c.ranges.push([ip, ip.kind() === 'ipv4' ? 32 : 128]);
    } else if (entry.startsWith('*.')) c.suffixes.push(entry.slice(1));
    else c.names.add(entry);
  }
  return c;
}

function nameAllowed(c: CompiledPolicy, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return c.names.has(h) || c.suffixes.some((s) => h.endsWith(s));
}

function addressAllowed(c: CompiledPolicy, address: string): boolean {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.process(address.split('%')[0] ?? address);
  } catch {
    return false;
  }
  return c.ranges.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits));
}

/**
 * Why connecting to `address` for `host` is refused, or null: the one rule for a URL's literal
 * host (an IP literal, or a name that is never public: address = host) and for every address a
 * name resolves to.
 */
function refusal(c: CompiledPolicy, host: string, address: string): string | null {
  if (nameAllowed(c, host) || addressAllowed(c, address)) return null;
  const problem = specialHostProblem(address);
  if (problem === null) return null;
  if (c.allowLoopback && problem.startsWith('a loopback address')) return null;
  const shown = host === address ? address : `${host} resolves to ${address}, which`;
  const sandbox = problem.startsWith('a loopback address')
    ? ' (a local sandbox: platform.environment: development allows loopback)'
    : '';
  return (
    `${shown} is ${problem}: document downloads only go to public addresses; add ${host} or its range to ` +
    `boarding.documentHosts.allow if your document store is internal${sandbox}`
  );
}

export interface DocumentHostGuard {
  /** A refusal for a URL's literal host (an IP literal never reaches the lookup), or null. */
  checkLiteral: (hostname: string) => string | null;
  /**
   * For undici's `connect.lookup` (net.connect's lookup): resolves, checks every address, connects only to
   * checked ones.
   */
  lookup: (
    hostname: string,
    options: LookupOptions,
    callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ) => void;
}

export function documentHostGuard(
  policy: DocumentHostPolicy,
  resolver: DocumentResolver = systemResolver,
): DocumentHostGuard {
  const c = compile(policy);
  return {
    // A name's addresses are checked at connect time (lookup); names that are never public go now.
    checkLiteral: (hostname) => {
      const host = hostname.replace(/^\[|\]$/g, '');
      return refusal(c, host, host);
    },
    lookup: (hostname, options, callback) => {
      resolver(hostname).then(
        (all) => {
          const wanted =
            options.family === 4 || options.family === 6
              ? all.filter((a) => a.family === options.family)
              : all;
          if (wanted.length === 0) {
            callback(
              Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }),
              options.all === true ? [] : '',
              0,
            );
            return;
          }
          // Every address must pass: the socket may try any of them (happy eyeballs).
          for (const a of wanted) {
            const why = refusal(c, hostname, a.address);
            if (why !== null) {
              callback(new DocumentHostRefused(why), options.all === true ? [] : '', 0);
              return;
            }
          }
          const [first] = wanted;
          if (options.all === true || first === undefined) callback(null, wanted);
          else callback(null, first.address, first.family);
        },
        (err: NodeJS.ErrnoException) => callback(err, options.all === true ? [] : '', 0),
      );
    },
  };
}

/** The guard's refusal inside an error undici threw, if it is one. */
export function findRefusal(err: unknown): DocumentHostRefused | null {
  let cur: unknown = err;
  for (let i = 0; i < 5 && cur !== null && typeof cur === 'object'; i++) {
    if (cur instanceof DocumentHostRefused) return cur;
    cur = (cur as { cause?: unknown }).cause;
  }
  return null;
}
