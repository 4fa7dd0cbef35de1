import Database from 'better-sqlite3';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

/**
 * The transaction a StoreDb's caller runs in travels in AsyncLocalStorage. On Node 20 every
 * AsyncLocalStorage that has run stays in the process's list until disabled, and each promise made
 * afterwards copies a slot for every one of them: one made per object (per store opened) makes the
 * whole process slower with every object, for ever (src/store/sql.ts; the unit suite's legal-space
 * file took 83.6 s instead of 11 s). So there is one per purpose, made when its module loads.
 */
const SRC = join(import.meta.dirname, '..', '..', '..', 'src');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const p = join(dir, e);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function table(): Database.Database {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (v TEXT)');
  return db;
}

describe('StoreDb transactions in async context', () => {
  it('every AsyncLocalStorage in src/ is made once, at module level (never per object or per call)', () => {
    const found: string[] = [];
    let total = 0;
    for (const f of sources(SRC)) {
      readFileSync(f, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (!/new AsyncLocalStorage\b/.test(line)) return;
          total += 1;
          if (!/^(export )?const \w+ = new AsyncLocalStorage\b/.test(line))
            found.push(`${relative(SRC, f)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found).toEqual([]);
    expect(total).toBeGreaterThan(0); // src/store/sql.ts's pair: not vacuous
  });

  it('two stores nested in one async chain keep their own transactions', async () => {
    const a = sqliteStore(table());
    const b = sqliteStore(table());
    await a.write(async () => {
      await a.run('INSERT INTO t (v) VALUES (?)', ['a1']);
      expect(a.inTransaction).toBe(true);
      expect(b.inTransaction).toBe(false);
      await b.write(async () => {
        await b.run('INSERT INTO t (v) VALUES (?)', ['b1']);
        expect(a.inTransaction).toBe(true);
        expect(b.inTransaction).toBe(true);
      });
      // b committed on its own; a's transaction is still the one its statements run in.
      expect(b.inTransaction).toBe(false);
      expect(b.sqlite?.inTransaction).toBe(false);
      expect(a.sqlite?.inTransaction).toBe(true);
      await a.run('INSERT INTO t (v) VALUES (?)', ['a2']);
      // outside() of b leaves a's transaction alone; outside() of a leaves it.
      expect(await b.outside(() => Promise.resolve(a.inTransaction))).toBe(true);
      expect(await a.outside(() => Promise.resolve(a.inTransaction))).toBe(false);
    });
    expect(a.sqlite?.inTransaction).toBe(false);
    expect(await a.all('SELECT v FROM t ORDER BY v')).toEqual([{ v: 'a1' }, { v: 'a2' }]);
    expect(await b.all('SELECT v FROM t')).toEqual([{ v: 'b1' }]);
    a.sqlite?.close();
    b.sqlite?.close();
  });

  it('a rollback of one store leaves the other store’s commit in place', async () => {
    const a = sqliteStore(table());
    const b = sqliteStore(table());
    await expect(
      a.write(async () => {
        await a.run('INSERT INTO t (v) VALUES (?)', ['a1']);
        await b.write(() => b.run('INSERT INTO t (v) VALUES (?)', ['b1']));
        throw new Error('stop');
      }),
    ).rejects.toThrow('stop');
    expect(await a.all('SELECT v FROM t')).toEqual([]);
    expect(await b.all('SELECT v FROM t')).toEqual([{ v: 'b1' }]);
    a.sqlite?.close();
    b.sqlite?.close();
  });
});
