import type { StoreDb } from './sql.js';

export interface Checkpoint {
  name: string;
  /** Cursor of the next page to read; null: the walk started but no page is done yet. */
  cursor: string | null;
  startedAt: number;
  updatedAt: number;
}

/** Where an interrupted queue walk resumes: saved after each page is recorded, cleared at its end. */
export interface CheckpointStore {
  get(name: string): Promise<Checkpoint | null>;
  save(name: string, cursor: string | null, now: number): Promise<void>;
  clear(name: string): Promise<void>;
}

export const QUEUE_CHECKPOINT = 'boarding-queue';

/**
 * When `state backup` last wrote a verified copy (updated_at): the daemon's /metrics reads it
 * (boarding_state_backup_last_success_timestamp_seconds), so a backup job that stopped running
 * alerts even though it runs in another process. SQLite only (PostgreSQL is the bank's backups).
 */
export const STATE_BACKUP_CHECKPOINT = 'state-backup';

export function createCheckpointStore(db: StoreDb): CheckpointStore {
  // started_at is kept from the first save of a walk, so `loans`/logs can say how old a walk is.
  const UPSERT = `INSERT INTO checkpoints (name, cursor, started_at, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT(name) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at`;
  return {
    get: async (name) => {
      const r = await db.get<{ name: string; cursor: string | null; started_at: number; updated_at: number }>(
        'SELECT * FROM checkpoints WHERE name = ?',
        [name],
      );
      return r ? { name: r.name, cursor: r.cursor, startedAt: r.started_at, updatedAt: r.updated_at } : null;
    },
    save: async (name, cursor, now) => {
      await db.run(UPSERT, [name, cursor, now, now]);
    },
    clear: async (name) => {
      await db.run('DELETE FROM checkpoints WHERE name = ?', [name]);
    },
  };
}
