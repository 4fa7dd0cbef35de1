import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Issue 34: the store's engine is a strategy. What differs between SQLite and PostgreSQL is asked
 * of the StoreDb's Dialect (src/store/dialect.ts; one implementation in store/sqlite/, one in
 * store/pg/), never decided by comparing the engine's name; and repositories take a StoreDb, never
 * a raw better-sqlite3 handle beside it (the AnyDb union is gone: a raw handle is wrapped once by
 * store/sqlite/store.ts). Outside src/store, code asks a capability (dialect.hasServerClock).
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** `db.engine === …`, `engine !== 'postgres'`, `x.engine === 'sqlite'` on a store handle (config's store.engine is fine). */
const ENGINE_BRANCH = /\b(?:db|store|rt\.db|this)\.engine\s*[!=]==|\bengine\s*[!=]==\s*'(?:sqlite|postgres)'/;

describe('the store engine as a strategy', () => {
  it('no engine-name branch in src/ except on the config (store.engine) and the migration text table', () => {
    const offenders: string[] = [];
    for (const file of sources(join(ROOT, 'src'))) {
      const rel = relative(ROOT, file);
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (/\b(?:config|c|s|target)\.(?:store\.)?engine\b/.test(line)) return;
          if (ENGINE_BRANCH.test(line)) offenders.push(`${rel}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(offenders).toEqual([]);
  });

  it('no repository takes a raw better-sqlite3 handle (AnyDb / toStoreDb are gone)', () => {
    const offenders = sources(join(ROOT, 'src', 'store'))
      .filter((f) => /\b(AnyDb|toStoreDb)\b/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f));
    expect(offenders).toEqual([]);
  });
});
