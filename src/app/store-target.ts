import type { Config } from '../config/schema.js';
import type { StoreTarget } from '../store/open.js';
import { redactUrl } from '../lib/redact.js';

/** Where the config puts the state store (store.engine and its settings). */
export function storeTarget(config: Pick<Config, 'store'>): StoreTarget {
  const s = config.store;
  if (s.engine === 'sqlite') return { engine: 'sqlite', path: s.path };
  const p = s.postgres;
  // The schema refuses engine postgres without a URL; this is the type's word for it.
  if (p.url === undefined)
    throw new Error(
      'store.postgres.url: expected a postgres:// URL (required when store.engine is postgres)',
    );
  return {
    engine: 'postgres',
    url: p.url,
    ...(p.password !== undefined ? { password: p.password } : {}),
    ssl: p.ssl,
    ...(p.sslRootCert !== undefined ? { sslRootCert: p.sslRootCert } : {}),
    poolSize: p.poolSize,
    connectTimeoutMs: p.connectTimeoutMs,
  };
}

/** The store for messages: the SQLite path, or the PostgreSQL URL without its password. */
export function storeTargetName(config: Pick<Config, 'store'>): string {
  return config.store.engine === 'postgres' ? redactUrl(config.store.postgres.url ?? '') : config.store.path;
}
