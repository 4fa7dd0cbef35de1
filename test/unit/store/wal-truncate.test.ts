import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { truncateWal } from '../../../src/store/sqlite/db.js';
import { openSqliteStore } from '../../../src/store/sqlite/store.js';

/**
 * After a seal the WAL is checkpointed and truncated (the cleared lines leave the -wal file). The
 * process has one SQLite connection: another caller's unit of work (a board's step) may hold a
 * transaction open on it at that moment, and a checkpoint inside a transaction fails with
 * SQLITE_LOCKED ("database table is locked"). Round 5 saw that error roll back a board's step
 * that had the seal's crash recovery inside it. Now the truncation says "not done" and the next
 * seal job run does it.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function store() {
  const dir = mkdtempSync(join(tmpdir(), 'wal-truncate-'));
  dirs.push(dir);
  const path = join(dir, 'state.sqlite');
  return { db: openSqliteStore(path), wal: `${path}-wal` };
}

describe('truncateWal beside an open transaction on the same connection', () => {
  it('is not done while another unit holds a transaction, and does not spoil it; done after', async () => {
    const { db, wal } = store();
    const handle = db.sqlite!;
    let during: { done: boolean; frames: number } | undefined;
    await db.write(async () => {
      await db.run(`INSERT INTO checkpoints (name, cursor, started_at, updated_at) VALUES ('t', 'x', 1, 1)`);
      during = truncateWal(handle);
    });
    expect(during).toEqual({ done: false, frames: 0 });
    // The unit committed what it wrote.
    expect(await db.get(`SELECT cursor FROM checkpoints WHERE name = 't'`)).toEqual({ cursor: 'x' });
    expect(statSync(wal).size).toBeGreaterThan(0);
    const after = truncateWal(handle);
    expect(after.done).toBe(true);
    expect(statSync(wal).size).toBe(0);
    handle.close();
  });
});
