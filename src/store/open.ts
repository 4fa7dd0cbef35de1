import { openDatabase, type OpenDbOptions } from './db.js';
import { StoreDb } from './sql.js';

/** Where the state lives: store.engine and its settings (src/config). */
export type StoreTarget = { engine: 'sqlite'; path: string };

export type OpenStoreOptions = Pick<OpenDbOptions, "onWarning" | "busyTimeoutMs">;

/** Opens the state store (migrations applied) on the configured engine. */
export async function openStore(target: StoreTarget, opts: OpenStoreOptions = {}): Promise<StoreDb> {
  await Promise.resolve();
  return StoreDb.sqliteOn(openDatabase(target.path, opts));
}
