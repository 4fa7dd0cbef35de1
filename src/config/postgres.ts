/**
 * store.postgres as a whole (issue 33), pure: the URL says where and who; the password and TLS are
 * keys of their own, which the URL may not contradict (node-postgres would let the URL win).
 */
export type PgSslMode = 'disable' | 'require' | 'verify-ca' | 'verify-full';
export const PG_SSL_MODES = [
  'disable',
  'require',
  'verify-ca',
  'verify-full',
] as const satisfies readonly PgSslMode[];

/** URL query parameters that decide TLS in libpq or node-postgres: store.postgres.ssl / sslRootCert decide instead. */
const TLS_PARAMS = [
  'sslmode',
  'ssl',
  'sslcert',
  'sslkey',
  'sslrootcert',
  'sslcrl',
  'sslcrldir',
  'sslpassword',
  'sslnegotiation',
  'sslsni',
  'sslcompression',
  'requiressl',
  'uselibpqcompat',
  'ssl_min_protocol_version',
  'ssl_max_protocol_version',
];
/**
 * libpq parameters that would replace what the URL's authority and path say (issue 43 F11:
 * `postgresql://u@wrong.example/db?host=127.0.0.1` connected to 127.0.0.1 while `config check`, logs
 * and errors named wrong.example): refused, so what is shown is what the connector connects to.
 */
const AUTHORITY_PARAMS: Record<string, string> = {
  host: 'the host',
  hostaddr: 'the host',
  port: 'the port',
  user: 'the user name',
  dbname: 'the database (the path)',
  service: 'the host, port and database',
  servicefile: 'the host, port and database',
};
/**
 * Parameters the connector reads from the URL itself (everything else is refused, never silently
 * ignored). Not application_name: the connector names its sessions per process (a takeover ends a
 * stale leader's sessions by that name).
 */
const PLAIN_PARAMS = ['password', 'options'];

/** The URL's password: in its user-info or as `?password=` (node-postgres accepts both). */
export function urlPassword(url: string): string | undefined {
  try {
    const u = new URL(url);
    const q = u.searchParams.get('password');
    if (q !== null && q !== '') return q;
    return u.password !== '' ? decodeURIComponent(u.password) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What is wrong with store.postgres as a whole, each problem as [key, message]: a password in the
 * URL and beside it; a TLS parameter in the URL that disagrees with store.postgres.ssl /
 * sslRootCert (one that agrees is harmless); a parameter the connector does not read.
 */
export function pgSettingsProblems(s: {
  url: string;
  password?: string | undefined;
  ssl: PgSslMode;
  sslRootCert?: string | undefined;
}): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let u: URL;
  try {
    u = new URL(s.url);
  } catch {
    return [
      ['url', 'expected a postgres:// URL that parses (percent-encode special characters in the user name)'],
    ];
  }
  if (s.password !== undefined && urlPassword(s.url) !== undefined) {
    out.push([
      'password',
      'a password is in store.postgres.url and in store.postgres.password (or BOARDING_STORE_PASSWORD): ' +
        'give it in one place only, preferably BOARDING_STORE_PASSWORD with a URL that holds none',
    ]);
  }
  for (const [name, value] of u.searchParams) {
    const key = name.toLowerCase();
    if (key === 'sslmode') {
      if (value !== s.ssl)
        out.push([
          'url',
          `?sslmode=${value} in the URL disagrees with store.postgres.ssl (${s.ssl}): TLS is set by ` +
            'store.postgres.ssl only; remove sslmode from the URL',
        ]);
    } else if (key === 'sslrootcert') {
      if (value !== s.sslRootCert)
        out.push([
          'url',
          '?sslrootcert in the URL disagrees with store.postgres.sslRootCert: the CA is set by ' +
            'store.postgres.sslRootCert only; remove sslrootcert from the URL',
        ]);
    } else if (AUTHORITY_PARAMS[key] !== undefined) {
      out.push([
        'url',
        `?${name} in the URL: ${AUTHORITY_PARAMS[key]} is written in the URL itself ` +
          '(postgres://user@host:port/database; a socket directory percent-encoded as the host, ' +
          'postgres://user@%2Fvar%2Frun%2Fpostgresql/database), so that config check, logs and errors name ' +
          `what the connector connects to; remove ${name} from the query`,
      ]);
    } else if (TLS_PARAMS.includes(key)) {
      out.push([
        'url',
        `?${name} in the URL: TLS is set by store.postgres.ssl and store.postgres.sslRootCert only; ` +
          `remove ${name} from the URL`,
      ]);
    } else if (!PLAIN_PARAMS.includes(key)) {
      out.push([
        'url',
        `?${name} in the URL is not a parameter the connector reads (it reads ${PLAIN_PARAMS.join(', ')}); remove it`,
      ]);
    }
  }
  return out;
}
