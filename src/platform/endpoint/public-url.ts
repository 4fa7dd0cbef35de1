import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { specialHostProblem } from '../../lib/hosts.js';

export type Resolver = (host: string) => Promise<string[]>;

const systemResolver: Resolver = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/**
 * Why a URL may not be registered as this connector's webhook endpoint, or null. The platform
 * refuses private targets too, but the connector does not rely on it: https only, no credentials,
 * and neither the host nor any address it resolves to may be loopback, private, link-local, a
 * cloud metadata service or in any other special-purpose range (lib/hosts.ts; a name can point
 * anywhere, so the literal host is not enough).
 * `allowLocal` (platform.environment: development, the sandbox) lets http and loopback through.
 */
export async function webhookTargetProblem(
  raw: string,
  opts: { allowLocal: boolean; resolve?: Resolver },
): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'expected an absolute URL such as https://connector.bank.example/webhooks/platform';
  }
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.protocol !== 'https:' && !(opts.allowLocal && url.protocol === 'http:')) {
    return (
      'expected an https:// URL' +
      (opts.allowLocal ? '' : ' (http is accepted only with platform.environment: development)')
    );
  }
  if (opts.allowLocal) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const classify = specialHostProblem;
  const literal = classify(host);
  if (literal !== null) return `${host} is ${literal}: the platform must reach a public address`;
  if (isIP(host) !== 0) return null;
  let addresses: string[];
  try {
    addresses = await (opts.resolve ?? systemResolver)(host);
  } catch (err) {
    return `${host} does not resolve (${(err as { code?: string }).code ?? 'lookup failed'})`;
  }
  for (const a of addresses) {
    const bad = classify(a);
    if (bad !== null) return `${host} resolves to ${a}, ${bad}: the platform must reach a public address`;
  }
  return null;
}
