import { isLoopbackHost } from '../lib/hosts.js';
import { redactUrl } from '../lib/redact.js';
import type { Config } from './schema.js';

/** The URL keys whose transport the connector checks; each carries a secret or loan data. */
function urlKeys(config: Config): Array<[key: string, url: string]> {
  const out: Array<[string, string]> = [['platform.baseUrl', config.platform.baseUrl]];
  if (config.core.http) out.push(['core.http.baseUrl', config.core.http.baseUrl]);
  if (config.core.mambu) out.push(['core.mambu.baseUrl', config.core.mambu.baseUrl]);
  if (config.webhooks.publicUrl !== undefined) out.push(['webhooks.publicUrl', config.webhooks.publicUrl]);
  return out;
}

/**
 * Transport rules (secure by default in production, design.md round 2):
 * - anywhere: no credentials or query string in a URL key — they end up in logs, in `config check`
 *   output and in proxies' access logs; credentials have their own keys (or the environment);
 * - production: https only for the platform, the core and the public webhook URL, since the API
 *   key and the core's Basic credentials would otherwise cross the network in clear, and
 *   `core.http.insecureTls` is refused (a certificate nobody verifies is no TLS).
 * Returns the problems, each naming its key; empty when the config may run.
 */
export function transportProblems(config: Config): string[] {
  const problems: string[] = [];
  const production = config.platform.environment === 'production';
  for (const [key, raw] of urlKeys(config)) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      continue; // the schema already named it
    }
    if (url.username !== '' || url.password !== '') {
      problems.push(
        `${key}: a URL must not carry credentials (user:password@); use the key's own setting or the ` +
          'environment (e.g. BOARDING_CORE_PASSWORD)',
      );
    }
    if (url.search !== '')
      problems.push(
        `${key}: a URL must not carry a query string (${url.search.length} characters after "?"); give ` +
          'the base URL only',
      );
    if (production && url.protocol !== 'https:') {
      problems.push(
        `${key}: expected an https:// URL with platform.environment: production, got ` +
          `${url.protocol}//${url.host} (secrets and loan data would cross the network in clear)`,
      );
    }
  }
  if (production && config.core.http?.insecureTls === true) {
    problems.push(
      "core.http.insecureTls: refused with platform.environment: production (the core's certificate must " +
        'be verified; add its CA to NODE_EXTRA_CA_CERTS instead)',
    );
  }
  if (production && config.core.mambu?.insecureTls === true) {
    problems.push(
      "core.mambu.insecureTls: refused with platform.environment: production (the core's certificate " +
        'must be verified; add its CA to NODE_EXTRA_CA_CERTS instead)',
    );
  }
  problems.push(...stateDatabaseTlsProblems(config));
  return problems;
}

/** The state database's host as the driver reads it: empty or a socket directory (`/…`) is this host. */
function isLocalDatabase(url: string): boolean {
  let host: string;
  try {
    host = decodeURIComponent(new URL(url).hostname);
  } catch {
    return false; // the schema already named it
  }
  return host === '' || host.startsWith('/') || isLoopbackHost(host);
}

/**
 * Issue 43 F9: in production the state database (loan states, idempotency keys, the strike ledger,
 * the customers' tax-id hashes) is reached over verified TLS when it is on another host: ssl
 * verify-full, or verify-ca with store.postgres.verifyCaReason saying why the host name cannot be
 * checked. disable and require (encrypted, certificate unchecked: anyone on the path can answer)
 * are refused, as an http core URL or insecureTls is.
 */
function stateDatabaseTlsProblems(config: Config): string[] {
  const pg = config.store.postgres;
  if (config.platform.environment !== 'production' || config.store.engine !== 'postgres') return [];
  if (pg.url === undefined || isLocalDatabase(pg.url)) return [];
  if (pg.ssl === 'verify-full') return [];
  if (pg.ssl === 'verify-ca') {
    if (pg.verifyCaReason !== undefined && pg.verifyCaReason.trim() !== '') return [];
    return [
      `store.postgres.verifyCaReason: store.postgres.ssl is verify-ca (the server's host name is not checked) ` +
        `for ${redactUrl(pg.url)} with platform.environment: production: say why in ` +
        'store.postgres.verifyCaReason, or use ssl: verify-full',
    ];
  }
  const why =
    pg.ssl === 'disable'
      ? 'loan data and the password would cross the network in clear'
      : "the server's certificate is not verified, so anyone on the path can answer";
  return [
    `store.postgres.ssl: ${pg.ssl} refused with platform.environment: production for a state database on ` +
      `another host (${redactUrl(pg.url)}): ${why}; use verify-full (with store.postgres.sslRootCert for a ` +
      'private CA), or verify-ca with store.postgres.verifyCaReason',
  ];
}

/** Risky settings allowed outside production: said once at start. */
export function transportWarnings(config: Config): string[] {
  const warnings: string[] = [];
  if (config.core.http?.insecureTls === true) {
    warnings.push(
      "core.http.insecureTls: true — the core's TLS certificate is not verified (allowed only because " +
        `platform.environment is ${config.platform.environment})`,
    );
  }
  return warnings;
}
