import type { Db } from './db.js';

export interface Checkpoint {
  name: string;
  /** Cursor of the next page to read; null: the walk started but no page is done yet. */
  cursor: string | null;
  startedAt: number;
  updatedAt: number;
}

/** Where an interrupted queue walk resumes: saved after each page is recorded, cleared at its end. */
export interface CheckpointStore {
  get(name: string): Checkpoint | null;
  save(name: string, cursor: string | null, now: number): void;
  clear(name: string): void;
}

export const QUEUE_CHECKPOINT = 'boarding-queue';

export function createCheckpointStore(db: Db): CheckpointStore {
  const select = db.prepare<[string], { name: string; cursor: string | null; started_at: number; updated_at: number }>(
    'SELECT * FROM checkpoints WHERE name = ?',
  );
  // started_at is kept from the first save of a walk, so `loans`/logs can say how old a walk is.
  const upsert = db.prepare(
    `INSERT INTO checkpoints (name, cursor, started_at, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT(name) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at`,
  );
  const del = db.prepare('DELETE FROM checkpoints WHERE name = ?');
  return {
    get: (name) => {
      const r = select.get(name);
      return r ? { name: r.name, cursor: r.cursor, startedAt: r.started_at, updatedAt: r.updated_at } : null;
    },
    save: (name, cursor, now) => {
      upsert.run(name, cursor, now, now);
    },
    clear: (name) => {
      del.run(name);
    },
  };
}
