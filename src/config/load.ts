import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { isMap, isScalar, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { didYouMean } from '../lib/did-you-mean.js';
import { ConfigError } from '../lib/errors.js';
import { isSecretPath, redactUrl } from '../lib/redact.js';
import { parseYamlSource, type YamlSource } from '../lib/yaml-source.js';
import { transportProblems } from './security.js';
import { configSchema, SHIPPED_GENERIC_MAPPINGS, type Config } from './schema.js';

export interface LoadConfigInput {
  env: Record<string, string | undefined>;
  /** YAML text of the config file (undefined: an empty file, so `platform` is reported missing). */
  fileText?: string | undefined;
  /** Used in messages only. */
  filePath?: string | undefined;
  /**
   * Where relative paths in the config start (README "Configuration": the working directory).
   * Default: process.cwd(). Every path key comes out of the loader absolute.
   */
  cwd?: string | undefined;
  /** Whether a path exists (the mapping set's fall-back to the shipped sets); default fs.existsSync. */
  exists?: ((path: string) => boolean) | undefined;
  /**
   * 'optional': a config without a `platform` section loads, with a placeholder platform no client
   * accepts (commands that only read the state database: `customers list`, `loans show`…).
   */
  platform?: 'required' | 'optional' | undefined;
}

/** The placeholder platform of a config loaded without one (never a reachable address: .invalid). */
const NO_PLATFORM = new WeakSet<object>();

/** Whether this platform section is the placeholder of a config that has none (LoadConfigInput.platform). */
export function isMissingPlatform(platform: object): boolean {
  return NO_PLATFORM.has(platform);
}

/** What the loader decided on its own and the operator should know (logged at start, shown by `config check`). */
const NOTES = new WeakMap<Config, readonly string[]>();

/** The loader's notes on a config it returned (e.g. a relative mappings.dir found among the shipped sets). */
export function configNotes(config: Config): readonly string[] {
  return NOTES.get(config) ?? [];
}

function describeValue(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v);
  if (Array.isArray(v)) return 'a list';
  if (v !== null && typeof v === 'object') return 'a map';
  return JSON.stringify(v);
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let cur: unknown = root;
  for (const key of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<PropertyKey, unknown>)[key];
  }
  return cur;
}

/** What a secret value is, never what it says. */
function describeHidden(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'an empty value';
  if (Array.isArray(v)) return 'a list (hidden)';
  const kind =
    typeof v === 'object'
      ? 'a map'
      : typeof v === 'number'
        ? 'a number'
        : typeof v === 'boolean'
          ? 'a boolean'
          : typeof v === 'string'
            ? 'a string'
            : 'a value';
  return `${kind} (hidden)`;
}

const YAML_KINDS: Record<string, string> = {
  object: 'a map',
  array: 'a list',
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
};

/** The keys a strict object of the schema allows at a path (for "did you mean"). */
function keysAt(path: readonly PropertyKey[]): string[] {
  let node: unknown = configSchema;
  const def = (n: unknown): Record<string, unknown> | undefined =>
    (n as { _zod?: { def?: Record<string, unknown> } } | undefined)?._zod?.def;
  const unwrap = (n: unknown): unknown => {
    for (let i = 0; i < 10; i++) {
      const d = def(n);
      if (d === undefined) return n;
      if (d['innerType'] !== undefined) n = d['innerType'];
      else if (d['type'] === 'pipe') n = d['in'];
      else return n;
    }
    return n;
  };
  for (const step of path) {
    const d = def(unwrap(node));
    if (d === undefined) return [];
    if (d['type'] === 'object') node = (d['shape'] as Record<string, unknown>)[String(step)];
    else if (d['type'] === 'array') node = d['element'];
    else if (d['type'] === 'record') node = d['valueType'];
    else return [];
  }
  const d = def(unwrap(node));
  return d?.['type'] === 'object' ? Object.keys(d['shape'] as Record<string, unknown>) : [];
}

interface Problem {
  text: string;
  /** Where in the file: the key itself (an unknown key) or its value. */
  at: { path: readonly PropertyKey[]; key: boolean };
}

function formatIssue(issue: z.core.$ZodIssue, raw: unknown): Problem[] {
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const allowed = keysAt(issue.path);
    return issue.keys.map((k) => ({
      text:
        `${path ? `${path}.` : ''}${k}: unknown key${didYouMean(k, allowed)} ` +
        '(check spelling; see README "Configuration")',
      at: { path: [...issue.path, k], key: true },
    }));
  }
  const got = valueAt(raw, issue.path);
  // A URL value may carry credentials or a signed query string: shown with both hidden.
  const gotText = isSecretPath(path)
    ? describeHidden(got)
    : describeValue(typeof got === 'string' && /^[a-z][a-z0-9+.-]*:\/\//i.test(got) ? redactUrl(got) : got);
  let expected = issue.message;
  if (expected.startsWith('Invalid input')) {
    // zod's own wording ("Invalid input: expected object, received undefined"): say it in the
    // words of a YAML file, and that a missing section is required.
    const kind =
      issue.code === 'invalid_type'
        ? (YAML_KINDS[issue.expected] ?? issue.expected)
        : issue.code.replaceAll('_', ' ');
    expected = got === undefined ? `required (${kind})` : `expected ${kind}`;
  }
  const hint =
    issue.code === 'invalid_value' && typeof got === 'string' && !isSecretPath(path)
      ? didYouMean(got, issue.values.map(String))
      : '';
  return [
    { text: `${path || '(root)'}: ${expected}, got ${gotText}${hint}`, at: { path: issue.path, key: false } },
  ];
}

/**
 * Bank codes in `mappings.defaults` (branch 0012, GL 1.50) are identifiers, not numbers: YAML 1.2
 * reads an unquoted `0012` as 12, silently changing the code every record carries. A plain scalar
 * whose number would not print back as written keeps its text.
 */
function keepCodesAsWritten(doc: Document, raw: Record<string, unknown>): void {
  const node = doc.getIn(['mappings', 'defaults'], true);
  const defaults = (raw['mappings'] as Record<string, unknown> | undefined)?.['defaults'];
  if (!isMap(node) || defaults === null || typeof defaults !== 'object') return;
  for (const pair of node.items) {
    if (!isScalar(pair.key) || !isScalar(pair.value)) continue;
    const { value, source } = pair.value as { value: unknown; source?: string };
    if (typeof value === 'number' && typeof source === 'string' && source !== String(value)) {
      (defaults as Record<string, unknown>)[String(pair.key.value)] = source;
    }
  }
}

/**
 * A problem's place in the file, `bank.yaml:12:5: `, when the config came from a file and the key
 * (or, for a missing one, its nearest parent) is in it; '' otherwise (from the environment).
 */
function whereIn(
  src: YamlSource | undefined,
  filePath: string | undefined,
  at: Problem['at'],
  fromEnv: ReadonlyMap<string, string>,
): string {
  const key = at.path.map(String).join('.');
  for (const [prefix, variable] of fromEnv)
    if (key === prefix || key.startsWith(`${prefix}.`)) return `${variable}: `;
  if (src === undefined || filePath === undefined) return '';
  const pos = at.key ? src.keyPosOf(at.path) : src.posOf(at.path);
  return `${filePath}:${pos.line}:${pos.column}: `;
}

/** `key.path: …` problems (transport rules) located by their leading key. */
function keyedProblem(text: string): Problem {
  const key = /^([A-Za-z0-9_.]+): /.exec(text)?.[1];
  return { text, at: { path: key === undefined ? [] : key.split('.'), key: false } };
}

/** Keys the environment set (a problem with one points at the variable, not at the file). */
const ENV_KEYS: ReadonlyArray<readonly [string, string]> = [
  ['platform.apiKey', 'BOARDING_API_KEY'],
  ['webhooks.secrets', 'BOARDING_WEBHOOK_SECRETS'],
  ['core.http.password', 'BOARDING_CORE_PASSWORD'],
  ['store.postgres.password', 'BOARDING_STORE_PASSWORD'],
  ['customers.tinHashKey', 'BOARDING_TIN_HASH_KEY'],
  ['log.level', 'LOG_LEVEL'],
];

function configError(
  source: string,
  src: YamlSource | undefined,
  filePath: string | undefined,
  problems: Problem[],
  env: Record<string, string | undefined> = {},
): ConfigError {
  const fromEnv = new Map(ENV_KEYS.filter(([, variable]) => (env[variable] ?? '') !== ''));
  const located = problems.map((p) => `${whereIn(src, filePath, p.at, fromEnv)}${p.text}`);
  return new ConfigError(
    `invalid configuration (${source}):\n  ${located.join('\n  ')}`,
    problems.map((p) => p.text),
  );
}

/**
 * The config keys that name a file or directory: made absolute at load, so no part of the program sees
 * a relative one.
 */
const PATH_KEYS: ReadonlyArray<readonly string[]> = [
  ['store', 'path'],
  ['store', 'postgres', 'sslRootCert'],
  ['core', 'file', 'dir'],
  ['mappings', 'dir'],
  ['reports', 'dir'],
  ['customers', 'extract', 'path'],
  ['imaging', 'dir'],
  ['imaging', 'stagingDir'],
];

/** store.path values that are not files (SQLite's in-memory database and URI names). */
const isSqliteName = (v: string): boolean => v === ':memory:' || v.startsWith('file:');

/**
 * Every path key made absolute from `cwd`. A relative mappings.dir that does not exist there but
 * names a set the connector ships (`./mappings/generic`, as config/example.yaml says) is that
 * shipped set: a copy of the example used outside the repository still finds its mappings.
 */
function resolvePaths(config: Config, cwd: string, exists: (p: string) => boolean, notes: string[]): void {
  const shippedRoot = dirname(SHIPPED_GENERIC_MAPPINGS);
  for (const path of PATH_KEYS) {
    const parent = valueAt(config, path.slice(0, -1)) as Record<string, unknown> | undefined;
    const leaf = path[path.length - 1] as string;
    const value = parent?.[leaf];
    if (
      typeof value !== 'string' ||
      isAbsolute(value) ||
      (leaf === 'path' && path[0] === 'store' && isSqliteName(value))
    )
      continue;
    let absolute = resolve(cwd, value);
    if (path.join('.') === 'mappings.dir' && !exists(absolute)) {
      const shipped = /^mappings\/([A-Za-z0-9._-]+)$/.exec(
        relative(cwd, absolute).split('\\').join('/'),
      )?.[1];
      const candidate = shipped === undefined ? undefined : join(shippedRoot, shipped);
      if (candidate !== undefined && exists(join(candidate, 'mapping.yaml'))) {
        notes.push(
          `mappings.dir: ${value} does not exist under ${cwd}; using the shipped set ${candidate} (write ` +
            'an absolute path to choose another)',
        );
        absolute = candidate;
      }
    }
    parent![leaf] = absolute;
  }
}

/**
 * Pure but for `exists` (default: the file system): env + file text in, validated config out, or a
 * ConfigError listing every problem.
 */
export function loadConfig(input: LoadConfigInput): Config {
  const source = input.filePath ?? 'no config file';
  let raw: unknown;
  let src: YamlSource | undefined;
  if (input.fileText === undefined) {
    raw = {};
  } else {
    const doc = parseDocument(input.fileText, { prettyErrors: true, uniqueKeys: true });
    if (doc.errors.length > 0) {
      const problems = doc.errors.map((e) => {
        const pos = e.linePos?.[0];
        return `${source}${pos ? `:${pos.line}:${pos.col}` : ''}: ${e.message.split('\n')[0] ?? e.message}`;
      });
      throw new ConfigError(`invalid YAML in ${source}:\n  ${problems.join('\n  ')}`, problems);
    }
    raw = doc.toJS() ?? {};
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw new ConfigError(`${source}: expected a YAML map at the top level`);
    }
    keepCodesAsWritten(doc, raw as Record<string, unknown>);
    // Positions only (the values above keep the codes as written).
    src = parseYamlSource(source, input.fileText, () => false);
  }

  const obj = raw as Record<string, unknown>;
  const env = input.env;
  const noPlatform = input.platform === 'optional' && obj['platform'] === undefined;
  if (noPlatform)
    obj['platform'] = {
      baseUrl: 'https://platform.not-configured.invalid/api',
      apiKey: 'pk_test_not_configured',
      environment: 'development',
    };
  const apiKey = env['BOARDING_API_KEY'];
  if (apiKey !== undefined && apiKey !== '' && !noPlatform) {
    const platform = (obj['platform'] ??= {}) as Record<string, unknown>;
    platform['apiKey'] = apiKey;
  }
  const secrets = env['BOARDING_WEBHOOK_SECRETS'];
  if (secrets !== undefined && secrets !== '') {
    const webhooks = (obj['webhooks'] ??= {}) as Record<string, unknown>;
    webhooks['secrets'] = secrets
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  }
  const corePassword = env['BOARDING_CORE_PASSWORD'];
  const coreApiKey = env['BOARDING_CORE_API_KEY'];
  if ((obj['core'] as Record<string, unknown> | undefined)?.['adapter'] === 'mambu') {
    // Mambu: the secret goes into core.mambu.auth (an API key, or a Basic login's password).
    if (
      (coreApiKey !== undefined && coreApiKey !== '') ||
      (corePassword !== undefined && corePassword !== '')
    ) {
      const core = obj['core'] as Record<string, unknown>;
      const mambu = (core['mambu'] ??= {}) as Record<string, unknown>;
      const auth = (mambu['auth'] ??= {}) as Record<string, unknown>;
      if (coreApiKey !== undefined && coreApiKey !== '') auth['apiKey'] = coreApiKey;
      else auth['password'] = corePassword;
    }
  } else if (corePassword !== undefined && corePassword !== '') {
    const core = (obj['core'] ??= {}) as Record<string, unknown>;
    const http = (core['http'] ??= {}) as Record<string, unknown>;
    http['password'] = corePassword;
  }
  const storePassword = env['BOARDING_STORE_PASSWORD'];
  if (storePassword !== undefined && storePassword !== '') {
    const store = (obj['store'] ??= {}) as Record<string, unknown>;
    const postgres = (store['postgres'] ??= {}) as Record<string, unknown>;
    postgres['password'] = storePassword;
  }
  const tinHashKey = env['BOARDING_TIN_HASH_KEY'];
  if (tinHashKey !== undefined && tinHashKey !== '') {
    const customers = (obj['customers'] ??= {}) as Record<string, unknown>;
    customers['tinHashKey'] = tinHashKey;
  }
  if (env['LOG_LEVEL']) {
    const log = (obj['log'] ??= {}) as Record<string, unknown>;
    log['level'] = env['LOG_LEVEL'];
  }

  const parsed = configSchema.safeParse(obj);
  if (!parsed.success) {
    throw configError(
      source,
      src,
      input.filePath,
      parsed.error.issues.flatMap((i) => formatIssue(i, obj)),
      env,
    );
  }
  const config = parsed.data;
  assertEnvironmentMatchesKey(config);
  const transport = transportProblems(config);
  if (transport.length > 0) throw configError(source, src, input.filePath, transport.map(keyedProblem), env);
  if (config.core.adapter === 'http' && !config.core.http) {
    throw configError(source, src, input.filePath, [
      keyedProblem(
        'core.http: expected a map (required when core.adapter is http or fineract: baseUrl, username, ' +
          'password at least), got nothing',
      ),
    ]);
  }
  if (config.core.adapter === 'mambu' && !config.core.mambu) {
    throw configError(source, src, input.filePath, [
      keyedProblem(
        'core.mambu: expected a map (required when core.adapter is mambu: baseUrl and auth at least), got nothing',
      ),
    ]);
  }
  if (noPlatform) NO_PLATFORM.add(config.platform);
  const notes: string[] = [];
  resolvePaths(config, input.cwd ?? process.cwd(), input.exists ?? existsSync, notes);
  NOTES.set(config, notes);
  return config;
}

/**
 * A live key must never be pointed at staging and vice versa: refused before any request, because
 * a misdirected live key spends the production rate budget (and its revocation strikes).
 */
export function assertEnvironmentMatchesKey(config: Pick<Config, 'platform'>): void {
  const { apiKey, environment } = config.platform;
  if (apiKey.startsWith('pk_live_') && environment !== 'production') {
    throw new ConfigError(
      'platform.apiKey: a live key (pk_live_…) may only be used with platform.environment: production, ' +
        `got ${environment}`,
    );
  }
  if (apiKey.startsWith('pk_test_') && environment === 'production') {
    throw new ConfigError(
      'platform.apiKey: a test key (pk_test_…) may only be used with platform.environment: staging or ' +
        'development, got production',
    );
  }
}
