/**
 * Redaction, in one place: what never leaves the process in a log line, a stored message, an issue
 * text or a printed URL. One set of patterns; each function says where its output goes.
 *
 * Tax ids: a full EIN or SSN never appears. Dashed forms (12-3456789, 123-45-6789) are redacted
 * everywhere. A bare run of 9 digits is redacted in text bound for storage and in mapping issues,
 * but not in log lines, where 9-digit cents amounts are common and the structured fields that carry
 * tax ids are removed by name (SECRET_FIELDS) instead.
 */

/** Field and config key names whose values are credentials (the one list: config, logs, storage). */
export const CREDENTIAL_FIELDS = [
  'apiKey',
  'api_key',
  'authorization',
  'password',
  'passwordHash',
  'secret',
  'secrets',
  'token',
  'webhookSecret',
  'tinHashKey',
] as const;

/** Field names whose values are tax ids (in data: a loan, an entity, a log line). */
export const TAX_ID_FIELDS = ['ein', 'ssn', 'tin', 'taxId', 'tax_id'] as const;

/** Field names whose values are secrets or tax ids, whatever their type (a TIN may come as a number). */
export const SECRET_FIELDS = [...CREDENTIAL_FIELDS, ...TAX_ID_FIELDS] as const;

const SECRET_FIELD = new RegExp(`^(${SECRET_FIELDS.join('|')})$`, 'i');

export function isSecretField(name: string): boolean {
  return SECRET_FIELD.test(name);
}

const CREDENTIAL_FIELD = new RegExp(`^(${CREDENTIAL_FIELDS.join('|')})$`, 'i');
/** A name that reads like a credential: any later key spelled like one. */
const SECRET_NAME = /apikey|api_key|secret|password|token|credential|tinhashkey|authorization/i;

/**
 * A dotted config path (`core.http.password`, `webhooks.secrets.0`) that holds a secret: one of
 * its keys is a credential field or reads like one (a config key named `tin` names a column). The config
 * loader's messages, `config check` and
 * the log redaction all go by it, so a secret key added to the config schema is hidden everywhere
 * (test/unit/config/secrets.test.ts walks the schema).
 */
export function isSecretPath(path: string): boolean {
  return path.split('.').some((k) => CREDENTIAL_FIELD.test(k) || SECRET_NAME.test(k));
}

/**
 * A deep copy with the value of every secret path replaced by `hidden(path, value)` (default
 * `(hidden)`; a list of secrets keeps its length). For showing a config.
 */
export function hideSecrets(
  value: unknown,
  hidden: (path: string, v: unknown) => unknown = () => '(hidden)',
  path = '',
): unknown {
  if (path !== '' && isSecretPath(path) && value !== undefined && value !== null) {
    return Array.isArray(value) ? value.map((v, i) => hidden(`${path}.${i}`, v)) : hidden(path, value);
  }
  if (Array.isArray(value)) return value.map((v, i) => hideSecrets(v, hidden, `${path}.${i}`));
  // A URL's password (store.postgres.url may carry one) is a secret wherever the URL is.
  if (typeof value === 'string')
    return value.replace(URL_USERINFO, '$1:***@').replace(URL_PASSWORD_PARAM, '$1***');
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>))
    out[k] = hideSecrets(v, hidden, path === '' ? k : `${path}.${k}`);
  return out;
}

/** pino `redact.paths`: the secret fields at the top level and two levels down, and in headers. */
export const REDACT_PATHS: string[] = [
  ...new Set(
    SECRET_FIELDS.flatMap((k) => [
      k,
      `*.${k}`,
      `*.*.${k}`,
      `headers["${k.toLowerCase()}"]`,
      `*.headers["${k.toLowerCase()}"]`,
    ]),
  ),
];

const API_KEY = /\b(pk|sk)_(live|test)_[A-Za-z0-9_-]+/g;
const WEBHOOK_SECRET = /\bwhsec_[A-Za-z0-9+/=_-]+/g;
/** user:password@ in a URL (a PostgreSQL URL with its password). */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/]+):[^\s@/]+@/gi;
/** ?password=… (or sslpassword) in any URL's query: node-postgres reads a password from there too. */
const URL_PASSWORD_PARAM = /([?&](?:ssl)?password=)[^&\s#"'<>]*/gi;
const BEARER = /\bBearer\s+[A-Za-z0-9._~+/=-]+/gi;
/** A URL with a query string: presigned addresses carry their signature there. */
const URL_QUERY = /\b(https?:\/\/[^\s?#"'<>]+)\?[^\s#"'<>]*/g;
/** EIN 12-3456789 or SSN 123-45-6789, not inside a longer run of digits. */
const TIN_DASHED = /(?<![\d-])(\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?![\d-])/g;
/**
 * Nine digits on their own: not part of a longer number or a decimal, and not glued to letters
 * (a token like `r-d3234f079693679d` or a UUID's last group `123456789abc` is an identifier, and
 * redacting inside it broke the ids kept in the audit trail).
 */
const TIN_BARE = /(?<![\p{L}\p{N}.])\d{9}(?![\p{L}\p{N}.])/gu;

/**
 * Every pattern scrubText replaces needs one of these: `_` (pk_/sk_ keys, whsec_), `:` (a URL's
 * scheme), `=` (a password parameter), `-` (a dashed tax id), or the word Bearer. Text with none of
 * them comes back unchanged without the seven replaces (most mapped record values: issue 37).
 */
const SCRUB_TRIGGER = /[_:=-]|bearer/i;

/** For log lines and error texts shown to people: keys, secrets, bearer tokens, presigned queries, dashed tax ids. */
export function scrubText(text: string): string {
  if (!SCRUB_TRIGGER.test(text)) return text;
  return text
    .replace(API_KEY, '[redacted-key]')
    .replace(WEBHOOK_SECRET, '[redacted-secret]')
    .replace(URL_USERINFO, '$1:***@')
    .replace(URL_PASSWORD_PARAM, '$1***')
    .replace(BEARER, 'Bearer [redacted]')
    .replace(URL_QUERY, '$1?[redacted]')
    .replace(TIN_DASHED, '[redacted-tin]');
}

/** For text bound for the state database (error messages, event details): scrubText plus bare 9-digit tax ids. */
export function redactForStorage(text: string): string {
  return scrubText(text).replace(TIN_BARE, '[redacted-tin]');
}

/**
 * For mapping issue texts a bank engineer reads: a full tax id becomes `*****` and its last 4 (which identify
 * it safely).
 */
export function maskTins(text: string): string {
  const last4 = (m: string): string => `*****${m.replace(/\D/g, '').slice(-4)}`;
  return text.replace(TIN_DASHED, last4).replace(TIN_BARE, last4);
}

const MAX_STORED_DEPTH = 12;

/**
 * Anything the store keeps (a webhook body, mapped records, an event's detail, a stored response):
 * every string redacted, secret fields replaced whatever their type, errors flattened to name and
 * message, and nothing below a depth the connector reads kept (a hostile payload must not hide a
 * value where redaction does not look). Numbers and structure are unchanged.
 */
export function redactPayload(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactForStorage(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_STORED_DEPTH) return '[truncated]';
  if (Array.isArray(value)) return value.map((v) => redactPayload(v, depth + 1));
  if (value instanceof Error) return { name: value.name, message: redactForStorage(value.message) };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] =
      isSecretField(k) && v !== null && v !== undefined && v !== ''
        ? '[redacted]'
        : redactPayload(v, depth + 1);
  }
  return out;
}

/** Deep copy for a log line: every string scrubbed, errors flattened with their stack. */
export function scrubDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) {
    const out: Record<string, unknown> = { type: value.name, message: scrubText(value.message) };
    if (value.stack) out['stack'] = scrubText(value.stack);
    for (const [k, v] of Object.entries(value)) out[k] = scrubDeep(v, depth + 1);
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = scrubDeep(v, depth + 1);
  return out;
}

/** URLs whose user name is a database role, shown (the password never is). */
const ROLE_SCHEMES = new Set(['postgres:', 'postgresql:']);

/**
 * A URL as it may be shown or logged, the one rule for every URL (config errors, the platform's
 * and the state database's): scheme, host and path; the password, other user-info and the query
 * string (a presigned signature, a `?password=`) replaced by `(hidden)`, the fragment dropped; a
 * PostgreSQL URL keeps its role name. Text that is not a URL is scrubbed like any other text.
 */
export function redactUrl(url: string | URL): string {
  let u: URL;
  try {
    u = typeof url === 'string' ? new URL(url) : url;
  } catch {
    return scrubText(String(url));
  }
  // A database URL's user name is the role that connects (a refused login must name it); any other
  // user-info may itself be a token. A password never leaves.
  const role = ROLE_SCHEMES.has(u.protocol) ? u.username : '';
  const credentials =
    role !== ''
      ? `${role}${u.password !== '' ? ':(hidden)' : ''}@`
      : u.username !== '' || u.password !== ''
        ? '(hidden)@'
        : '';
  return `${u.protocol}//${credentials}${u.host}${u.pathname}${u.search !== '' ? '?(hidden)' : ''}`;
}

/** A record field that holds a tax id (taxId, tax_id, tin, ssn, ein, customerTin…), not its type or last 4. */
const TAX_ID_FIELD = new RegExp(
  `^(${TAX_ID_FIELDS.join('|')}|tax_?id_?number|fein|itin)$|(tax_?id|_tin|_ssn|_ein)$|[a-z](Tin|Ssn|Ein|TaxId)$`,
);
const NOT_TAX_ID = /(type|last_?4|kind|present|source)$/i;

/** Field names repeat from loan to loan: each is judged once (bounded, so hostile input cannot grow it). */
const taxIdFieldMemo = new Map<string, boolean>();

export function isTaxIdField(name: string): boolean {
  const known = taxIdFieldMemo.get(name);
  if (known !== undefined) return known;
  const is = (TAX_ID_FIELD.test(name) || TAX_ID_FIELD.test(name.toLowerCase())) && !NOT_TAX_ID.test(name);
  if (taxIdFieldMemo.size < 5000) taxIdFieldMemo.set(name, is);
  return is;
}

const last4Mask = (digits: string): string => `*****${digits.slice(-4)}`;

/** A loan's tax id written with or without separators (123-45-6789, 12 3456789, 123456789). */
function spacedTin(t: string): RegExp {
  return new RegExp(
    `(?<!\\d)${t.slice(0, 3)}[- ]?${t.slice(3, 5)}[- ` +
      `]?${t.slice(5)}(?!\\d)|(?<!\\d)${t.slice(0, 2)}[- ]?${t.slice(2)}(?!\\d)`,
    'g',
  );
}

/**
 * Mapped records as the state database keeps them and the console shows them: a field that is a
 * tax id (by name) becomes `*****` + its last 4; the loan's own tax ids (`tins`: the EIN/SSN
 * digits of its entities) are masked wherever else they appear; dashed tax ids, keys and secrets
 * as in any stored text. Other 9-digit values stay: a bank's 9-digit CIF or account number is not
 * a tax id (redactPayload masked every one of them).
 */
export function maskRecordFields(value: unknown, tins: readonly string[]): unknown {
  // Each tax id's pattern is compiled once per call, not once per value holding its last 4 digits
  // (amounts and dates often do): compiling them was most of the masking's cost (issue 37).
  const patterns = tins.map((t) => ({ last4: t.slice(-4), re: spacedTin(t) }));
  return maskValue(value, patterns, 0, '');
}

function maskValue(
  value: unknown,
  tins: ReadonlyArray<{ last4: string; re: RegExp }>,
  depth: number,
  key: string,
): unknown {
  if (typeof value === 'string') {
    if (key !== '' && isTaxIdField(key)) {
      const digits = value.replace(/\D/g, '');
      if (digits.length >= 9) return last4Mask(digits);
    }
    let out = scrubText(value);
    for (const t of tins) if (out.includes(t.last4)) out = out.replace(t.re, '[redacted-tin]');
    return out;
  }
  if (typeof value === 'number' && key !== '' && isTaxIdField(key)) return last4Mask(String(value));
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_STORED_DEPTH) return '[truncated]';
  if (Array.isArray(value)) return value.map((v) => maskValue(v, tins, depth + 1, key));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] =
      CREDENTIAL_FIELD.test(k) && v !== null && v !== undefined && v !== ''
        ? '[redacted]'
        : maskValue(v, tins, depth + 1, k);
  }
  return out;
}
