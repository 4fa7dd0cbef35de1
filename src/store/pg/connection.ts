import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type pg from 'pg';
import { pgSettingsProblems, urlPassword, type PgSslMode } from '../../config/postgres.js';
import { ConfigError } from '../../lib/errors.js';

/**
 * How the connector connects to PostgreSQL (issue 33): store.postgres.url says where and who,
 * store.postgres.password (or BOARDING_STORE_PASSWORD) the password, store.postgres.ssl and
 * sslRootCert the TLS. node-postgres lets a URL's own `password`, `sslmode` and `ssl*` parameters
 * replace the options given beside it (an empty password in the URL replaced the configured one;
 * `?sslmode=disable` turned verify-full off), so the URL is never handed to the driver: it is
 * parsed here, and a URL that disagrees with the keys is a config error naming the key.
 */
export type { PgSslMode };

export interface PgConnectionSettings {
  url: string;
  /** store.postgres.password or BOARDING_STORE_PASSWORD. */
  password?: string | undefined;
  ssl: PgSslMode;
  sslRootCert?: string | undefined;
  connectTimeoutMs: number;
}

/** The CA bundle store.postgres.sslRootCert names; a file that cannot be read is a config error naming the key. */
function readRootCert(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`store.postgres.sslRootCert: cannot read ${path}: ${(err as Error).message}`);
  }
}

/**
 * node's TLS options for a mode: require encrypts only; verify-ca checks the chain; verify-full the chain and
 * the host name.
 */
export function tlsOptions(s: Pick<PgConnectionSettings, 'ssl' | 'sslRootCert'>): false | ConnectionOptions {
  if (s.ssl === 'disable') return false;
  if (s.ssl === 'require') return { rejectUnauthorized: false };
  const ca = s.sslRootCert !== undefined ? { ca: readRootCert(s.sslRootCert) } : {};
  return s.ssl === 'verify-ca'
    ? { rejectUnauthorized: true, ...ca, checkServerIdentity: () => undefined }
    : { rejectUnauthorized: true, ...ca };
}

/**
 * The driver's options from the settings alone: host, port, user and database from the URL, the
 * password from the settings (else the URL's), TLS from store.postgres.ssl. Throws a ConfigError
 * naming the key when the settings disagree (pgSettingsProblems).
 */
export function pgClientConfig(s: PgConnectionSettings): pg.ClientConfig {
  const problems = pgSettingsProblems(s);
  if (problems.length > 0)
    throw new ConfigError(problems.map(([k, m]) => `store.postgres.${k}: ${m}`).join('\n'));
  const u = new URL(s.url);
  const q = (name: string): string | undefined => u.searchParams.get(name) ?? undefined;
  // Host, port, role and database from the URL's own parts only: a ?host= (or port, user, dbname)
  // is refused above, so what logs and errors name is what is connected to (issue 43 F11).
  const host = decodeURIComponent(u.hostname.replace(/^\[(.+)\]$/, '$1'));
  const port = u.port;
  const database = decodeURIComponent(u.pathname.replace(/^\//, ''));
  const user = decodeURIComponent(u.username);
  const password = s.password ?? urlPassword(s.url);
  const options = q('options');
  return {
    ...(host !== '' ? { host } : {}),
    ...(port !== '' ? { port: Number(port) } : {}),
    ...(database !== '' ? { database } : {}),
    ...(user !== '' ? { user } : {}),
    ...(password !== undefined ? { password } : {}),
    ...(options !== undefined ? { options } : {}),
    ssl: tlsOptions(s),
    connectionTimeoutMillis: s.connectTimeoutMs,
  };
}
