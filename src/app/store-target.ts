import type { Config } from '../config/schema.js';
import type { StoreTarget } from '../store/open.js';

/** Where the config puts the state store (store.engine and its settings). */
export function storeTarget(config: Pick<Config, 'store'>): StoreTarget {
  return { engine: 'sqlite', path: config.store.path };
}

/** The store for messages: the SQLite path, or the PostgreSQL URL without its password. */
export function storeTargetName(config: Pick<Config, 'store'>): string {
  return config.store.path;
}
