import { isMap, isScalar, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from '../lib/errors.js';
import { isSecretPath, redactUrl } from '../lib/redact.js';
import { transportProblems } from './security.js';
import { configSchema, type Config } from './schema.js';

export interface LoadConfigInput {
  env: Record<string, string | undefined>;
  /** YAML text of the config file (undefined: an empty file, so `platform` is reported missing). */
  fileText?: string | undefined;
  /** Used in messages only. */
  filePath?: string | undefined;
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
  const kind = typeof v === 'object' ? 'a map' : typeof v === 'number' ? 'a number' : typeof v === 'boolean' ? 'a boolean' : typeof v === 'string' ? 'a string' : 'a value';
  return `${kind} (hidden)`;
}

const YAML_KINDS: Record<string, string> = { object: 'a map', array: 'a list', string: 'a string', number: 'a number', int: 'an integer', boolean: 'true or false' };

function formatIssue(issue: z.core.$ZodIssue, raw: unknown): string[] {
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((k) => `${path ? `${path}.` : ''}${k}: unknown key (check spelling; see README "Configuration")`);
  }
  const got = valueAt(raw, issue.path);
  // A URL value may carry credentials or a signed query string: shown with both hidden.
  const gotText = isSecretPath(path) ? describeHidden(got) : describeValue(typeof got === 'string' && /^[a-z][a-z0-9+.-]*:\/\//i.test(got) ? redactUrl(got) : got);
  let expected = issue.message;
  if (expected.startsWith('Invalid input')) {
    // zod's own wording ("Invalid input: expected object, received undefined"): say it in the
    // words of a YAML file, and that a missing section is required.
    const kind = issue.code === 'invalid_type' ? (YAML_KINDS[issue.expected] ?? issue.expected) : issue.code.replaceAll('_', ' ');
    expected = got === undefined ? `required (${kind})` : `expected ${kind}`;
  }
  return [`${path || '(root)'}: ${expected}, got ${gotText}`];
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

/** Pure: env + file text in, validated config out, or a ConfigError listing every problem. */
export function loadConfig(input: LoadConfigInput): Config {
  const source = input.filePath ?? 'no config file';
  let raw: unknown;
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
  }

  const obj = raw as Record<string, unknown>;
  const env = input.env;
  const apiKey = env['BOARDING_API_KEY'];
  if (apiKey !== undefined && apiKey !== '') {
    const platform = (obj['platform'] ??= {}) as Record<string, unknown>;
    platform['apiKey'] = apiKey;
  }
  const secrets = env['BOARDING_WEBHOOK_SECRETS'];
  if (secrets !== undefined && secrets !== '') {
    const webhooks = (obj['webhooks'] ??= {}) as Record<string, unknown>;
    webhooks['secrets'] = secrets.split(',').map((s) => s.trim()).filter(Boolean);
  }
  const corePassword = env['BOARDING_CORE_PASSWORD'];
  const coreApiKey = env['BOARDING_CORE_API_KEY'];
  if ((obj['core'] as Record<string, unknown> | undefined)?.['adapter'] === 'mambu') {
    // Mambu: the secret goes into core.mambu.auth (an API key, or a Basic login's password).
    if ((coreApiKey !== undefined && coreApiKey !== '') || (corePassword !== undefined && corePassword !== '')) {
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
    const problems = parsed.error.issues.flatMap((i) => formatIssue(i, obj));
    throw new ConfigError(`invalid configuration (${source}):\n  ${problems.join('\n  ')}`, problems);
  }
  const config = parsed.data;
  assertEnvironmentMatchesKey(config);
  const transport = transportProblems(config);
  if (transport.length > 0) throw new ConfigError(`invalid configuration (${source}):\n  ${transport.join('\n  ')}`, transport);
  if (config.core.adapter === 'http' && !config.core.http) {
    throw new ConfigError(`invalid configuration (${source}):\n  core.http: expected a map (required when core.adapter is http), got nothing`);
  }
  if (config.core.adapter === 'mambu' && !config.core.mambu) {
    throw new ConfigError(`invalid configuration (${source}):\n  core.mambu: expected a map (required when core.adapter is mambu: baseUrl and auth at least), got nothing`);
  }
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
      `platform.apiKey: a live key (pk_live_…) may only be used with platform.environment: production, got ${environment}`,
    );
  }
  if (apiKey.startsWith('pk_test_') && environment === 'production') {
    throw new ConfigError(
      'platform.apiKey: a test key (pk_test_…) may only be used with platform.environment: staging or development, got production',
    );
  }
}
