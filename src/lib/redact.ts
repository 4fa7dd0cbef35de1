/**
 * Redaction, in one place: what never leaves the process in a log line, a stored message, an issue
 * text or a printed URL. One set of patterns; each function says where its output goes.
 *
 * Tax ids (issue 43 F7): one rule set, TAX_ID_RULES, for every text that leaves the process (log
 * lines, error messages, stored and quarantine text, reports): a dashed EIN (12-3456789) or SSN
 * (123-45-6789), and a bare run of 9 digits on its own (a core's error body echoing
 * `errorSource: 123456789`). Amounts in log lines are structured numbers, which text rules never
 * touch. Only the mapped records (maskRecordFields) keep other 9-digit values: there a field is a
 * tax id by its name, and the loan's own tax ids are masked wherever they appear.
 *
 * URLs (issue 43 F3/F4/F11): every URL in a text is taken apart by the WHATWG URL parser (a
 * password holding `@` ends at the last `@`, as the driver reads it), never by a pattern.
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
  if (typeof value === 'string') return redactUrlsIn(value).replace(CONNINFO_PASSWORD, '$1***');
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
/** A URL in a text: a scheme, `://`, and everything up to white space or a quote. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi;
/** Punctuation that ends a sentence around a URL rather than belonging to it. */
const URL_TRAILER = /[.,;:!)\]}]+$/;
/**
 * A query parameter whose value may be a secret: libpq's password, passfile, sslpassword, sslkey,
 * any token, key, secret, signature or credential (a presigned address's X-Amz-Signature).
 */
const SECRET_PARAM = /pass|secret|token|key|sig|credential|auth|session|cert/i;
/** `password=…` outside a URL (a libpq key/value connection string, a driver's message). */
const CONNINFO_PASSWORD = /\b((?:ssl)?password\s*=\s*)(?:'[^']*'|[^\s&#"'<>]+)/gi;
const BEARER = /\bBearer\s+[A-Za-z0-9._~+/=-]+/gi;
/** Schemes whose whole query string is hidden in text: a presigned address carries its signature there. */
const WEB_SCHEMES = new Set(['http:', 'https:', 'ws:', 'wss:']);

/**
 * One URL of a text as it may be shown: the password of its user-info `***` (the user name kept:
 * a database role), an http(s) query replaced by `[redacted]`, any other scheme's secret parameters
 * (`?password=`, `?sslkey=`…) `***`, a fragment `[redacted]`. A URL without any of these comes back
 * as it was. A URL the parser refuses keeps nothing of its user-info (up to its last `@`) or query.
 */
function redactUrlToken(token: string): string {
  let u: URL;
  try {
    u = new URL(token);
  } catch {
    const scheme = token.indexOf('://') + 3;
    const at = token.lastIndexOf('@');
    const rest = at >= scheme ? `***@${token.slice(at + 1)}` : token.slice(scheme);
    const q = rest.search(/[?#]/);
    return `${token.slice(0, scheme)}${q >= 0 ? `${rest.slice(0, q)}?[redacted]` : rest}`;
  }
  if (u.password === '' && u.search === '' && u.hash === '') return token;
  const user =
    u.username !== '' || u.password !== '' ? `${u.username}${u.password !== '' ? ':***' : ''}@` : '';
  let query = '';
  if (u.search !== '') {
    query = WEB_SCHEMES.has(u.protocol)
      ? '?[redacted]'
      : `?${u.search
          .slice(1)
          .split('&')
          .map((pair) => {
            const eq = pair.indexOf('=');
            const name = decodeURIComponentSafe(eq >= 0 ? pair.slice(0, eq) : pair);
            return eq >= 0 && SECRET_PARAM.test(name) ? `${pair.slice(0, eq)}=***` : pair;
          })
          .join('&')}`;
  }
  return `${u.protocol}//${user}${u.host}${u.pathname}${query}${u.hash !== '' ? '#[redacted]' : ''}`;
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Every URL of a text through redactUrlToken (the one URL rule for text: logs, errors, config check). */
export function redactUrlsIn(text: string): string {
  if (!text.includes('://')) return text;
  return text.replace(URL_IN_TEXT, (m) => {
    const trailer = URL_TRAILER.exec(m)?.[0] ?? '';
    return redactUrlToken(m.slice(0, m.length - trailer.length)) + trailer;
  });
}

/** EIN 12-3456789 or SSN 123-45-6789, not inside a longer run of digits. */
const TIN_DASHED = /(?<![\d-])(\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?![\d-])/g;
/**
 * Nine digits on their own: not part of a longer number or a decimal, and not glued to letters
 * (a token like `r-d3234f079693679d` or a UUID's last group `123456789abc` is an identifier, and
 * redacting inside it broke the ids kept in the audit trail).
 */
const TIN_BARE = /(?<![\p{L}\p{N}.])\d{9}(?![\p{L}\p{N}.])/gu;

/** The one tax-id rule set (F7): every text scrubber masks these, each in its own words. */
const TAX_ID_RULES: readonly RegExp[] = [TIN_DASHED, TIN_BARE];

/** Every tax id of a text replaced by `replacement(match)`. */
function maskTaxIds(text: string, replacement: (m: string) => string): string {
  let out = text;
  for (const rule of TAX_ID_RULES) out = out.replace(rule, replacement);
  return out;
}

/**
 * Every pattern scrubText replaces needs one of these: `_` (pk_/sk_ keys, whsec_), `:` (a URL's
 * scheme), `=` (a password parameter), `-` (a dashed tax id), a run of 9 digits, or the word
 * Bearer. Text with none of them comes back unchanged (most mapped record values: issue 37).
 */
const SCRUB_TRIGGER = /[_:=-]|\d{9}|bearer/i;
/** What scrubSecrets replaces needs one of these: `_` (keys, whsec_), `:` (a URL), `=` (a password), Bearer. */
const SECRET_TRIGGER = /[_:=]|bearer/i;

/** A word BEARER and CONNINFO_PASSWORD need (case-insensitive, as they match). */
const BEARER_WORD = /bearer/i;
const PASSWORD_WORD = /password/i;

/**
 * Keys, secrets, bearer tokens and URLs' secrets: scrubText without the tax-id rules. Each rule
 * runs only on text holding the literal it needs (`_live_`/`_test_`, `whsec_`, `://`, `password`
 * and `=`, `bearer`): most texts that reach here are ids with `_` or `:` and match none, and a
 * rule's scan is dearer than the literal search (issue 44: every mapped record value comes here).
 */
function scrubSecrets(text: string): string {
  let out = text;
  if (out.includes('_live_') || out.includes('_test_')) out = out.replace(API_KEY, '[redacted-key]');
  if (out.includes('whsec_')) out = out.replace(WEBHOOK_SECRET, '[redacted-secret]');
  out = redactUrlsIn(out);
  if (out.includes('=') && PASSWORD_WORD.test(out)) out = out.replace(CONNINFO_PASSWORD, '$1***');
  if (BEARER_WORD.test(out)) out = out.replace(BEARER, 'Bearer [redacted]');
  return out;
}

/**
 * The one scrubber for text that leaves the process (log lines, error messages, stored and
 * quarantine text, reports): keys, secrets, bearer tokens, URLs' passwords and secret queries,
 * and tax ids (TAX_ID_RULES).
 */
export function scrubText(text: string): string {
  if (!SCRUB_TRIGGER.test(text)) return text;
  return maskTaxIds(scrubSecrets(text), () => '[redacted-tin]');
}

/** For text bound for the state database: the same scrubber (one rule set for every destination). */
export function redactForStorage(text: string): string {
  return scrubText(text);
}

/**
 * For mapping issue texts a bank engineer reads: a full tax id (the same rules) becomes `*****`
 * and its last 4 (which identify it safely).
 */
export function maskTins(text: string): string {
  return maskTaxIds(text, (m) => `*****${m.replace(/\D/g, '').slice(-4)}`);
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

const credentialFieldMemo = new Map<string, boolean>();

/** A key whose value is a credential (CREDENTIAL_FIELDS, any case), judged once per name like isTaxIdField. */
function isCredentialField(name: string): boolean {
  const known = credentialFieldMemo.get(name);
  if (known !== undefined) return known;
  const is = CREDENTIAL_FIELD.test(name);
  if (credentialFieldMemo.size < 5000) credentialFieldMemo.set(name, is);
  return is;
}

export function isTaxIdField(name: string): boolean {
  const known = taxIdFieldMemo.get(name);
  if (known !== undefined) return known;
  const is = (TAX_ID_FIELD.test(name) || TAX_ID_FIELD.test(name.toLowerCase())) && !NOT_TAX_ID.test(name);
  if (taxIdFieldMemo.size < 5000) taxIdFieldMemo.set(name, is);
  return is;
}

const last4Mask = (digits: string): string => `*****${digits.slice(-4)}`;

/**
 * A tax id's shapes, whatever its digits: 123-45-6789 or 12-3456789 with `-`, a space or nothing
 * between the groups, not inside a longer run of digits. maskValue keeps a match whose digits are
 * one of the loan's tax ids.
 */
const TIN_SHAPE = /(?<!\d)(?:\d{3}[- ]?\d{2}[- ]?\d{4}|\d{2}[- ]?\d{7})(?!\d)/g;

interface LoanTins {
  /** The loan's tax ids, digits only. */
  digits: ReadonlySet<string>;
  /** Their last 4 digits: a text holding none of them holds none of the tax ids. */
  last4: readonly string[];
}

/**
 * Mapped records as the state database keeps them and the console shows them: a field that is a
 * tax id (by name) becomes `*****` + its last 4; the loan's own tax ids (`tins`: the EIN/SSN
 * digits of its entities) are masked wherever else they appear, in any of TIN_SHAPE's spellings;
 * dashed tax ids, keys and secrets as in any stored text. Other 9-digit values stay: a bank's
 * 9-digit CIF or account number is not a tax id (redactPayload masked every one of them).
 */
export function maskRecordFields(value: unknown, tins: readonly string[]): unknown {
  // One pattern for every loan (TIN_SHAPE), the digits looked up: a pattern per tax id was compiled
  // again for every loan (each has its own), most of the masking's cost (issue 44).
  const loanTins: LoanTins = { digits: new Set(tins), last4: [...new Set(tins.map((t) => t.slice(-4)))] };
  return maskValue(value, loanTins, 0, '');
}

/** Every spelling of one of the loan's tax ids in text replaced by `[redacted-tin]`. */
function maskLoanTins(text: string, tins: LoanTins): string {
  if (!tins.last4.some((l) => text.includes(l))) return text;
  return text.replace(TIN_SHAPE, (m) => (tins.digits.has(m.replace(/[- ]/g, '')) ? '[redacted-tin]' : m));
}

function maskValue(value: unknown, tins: LoanTins, depth: number, key: string): unknown {
  if (typeof value === 'string') {
    if (key !== '' && isTaxIdField(key)) {
      const digits = value.replace(/\D/g, '');
      if (digits.length >= 9) return last4Mask(digits);
    }
    // Not scrubText: a bank's 9-digit CIF or account number stays; the loan's own tax ids go below.
    // Dates and ids carry dashes: only a dashed tax id needs one, the secrets need `_`, `:`, `=` or Bearer.
    let out = SECRET_TRIGGER.test(value) ? scrubSecrets(value) : value;
    if (out.includes('-')) out = out.replace(TIN_DASHED, '[redacted-tin]');
    return maskLoanTins(out, tins);
  }
  if (typeof value === 'number' && key !== '' && isTaxIdField(key)) return last4Mask(String(value));
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_STORED_DEPTH) return '[truncated]';
  if (Array.isArray(value)) return value.map((v) => maskValue(v, tins, depth + 1, key));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] =
      isCredentialField(k) && v !== null && v !== undefined && v !== ''
        ? '[redacted]'
        : maskValue(v, tins, depth + 1, k);
  }
  return out;
}

/**
 * What in a URL carries a secret, each named as the operator wrote it (`the password after "user:"`,
 * `?password=`, `?sslkey=`…); empty when nothing does. A URL given on the command line stays in the
 * shell's history and in /proc/<pid>/cmdline (issue 43 F5): commands refuse one that carries any.
 */
export function urlSecretParts(url: string): string[] {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    // Unparsable: anything between the scheme and the last @ may be a password.
    return /:\/\/[^/?#]*:[^/?#]*@/.test(url) ? ['a password in the user-info (user:password@)'] : [];
  }
  const out: string[] = [];
  if (u.password !== '') out.push('a password in the user-info (user:password@)');
  for (const name of new Set(u.searchParams.keys())) if (SECRET_PARAM.test(name)) out.push(`?${name}=`);
  return out;
}
