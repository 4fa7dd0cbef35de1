import { isLoopbackHost, isPrivateHost } from '../lib/hosts.js';

export { isLoopbackHost, isPrivateHost };

/** Returns a problem description, or null when the URL may receive deliveries. */
export function webhookUrlProblem(raw: string, allowLoopback: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute URL';
  }
  const loopback = isLoopbackHost(url.hostname);
  if (loopback && allowLoopback)
    return url.protocol === 'https:' || url.protocol === 'http:' ? null : 'must start with https://';
  if (url.protocol !== 'https:' || !raw.toLowerCase().startsWith('https://'))
    return 'must start with https://';
  if (loopback) return 'loopback hosts are not allowed';
  if (isPrivateHost(url.hostname)) return 'private, link-local and metadata hosts are not allowed';
  if (url.username || url.password) return 'must not carry credentials';
  return null;
}
