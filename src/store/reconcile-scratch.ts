import Database from 'better-sqlite3';

/**
 * The reconciliation's working table: one row per loan id, with what each source (connector,
 * platform, core) said about it, in a private temporary SQLite database (on disk, deleted when
 * closed or when the process dies; only a few MB of page cache in memory). Reconciliation is a
 * full outer join of three sources that arrive in unrelated orders; joining here instead of in a
 * Map keeps its memory flat in the number of loans (issue 24).
 *
 * Side records are opaque text (the reports module's compact JSON). Rows come back in arrival
 * order (the first source that named the loan decides its place), which is the order the report
 * lists its exceptions in.
 */
export interface ScratchRow {
  seq: number;
  id: string;
  s: string | null;
  p: string | null;
  c: string | null;
}

export interface ReconcileScratch {
  /** Connector records (`wrote`: the connector wrote the loan to the core). */
  putStore(rows: ReadonlyArray<{ id: string; rec: string; wrote: boolean }>): void;
  putPlatform(rows: ReadonlyArray<{ id: string; rec: string }>): void;
  /** Core records: set on loans already known; a loan not yet known is added when `addUnknown(id)`. */
  putCore(rows: ReadonlyArray<{ id: string; rec: string }>, addUnknown: (id: string) => boolean): void;
  /** After `afterSeq`, in arrival order: loans the platform lists or the connector wrote (core look-ups). */
  lookupPage(afterSeq: number, limit: number): Array<{ seq: number; id: string }>;
  /** After `afterSeq`, in arrival order, every loan with its three sides. */
  page(afterSeq: number, limit: number): ScratchRow[];
  /** How many loans lookupPage walks. */
  lookupCount(): number;
  /** One loan's row; undefined when no source named it. */
  get(id: string): ScratchRow | undefined;
  size(): number;
  close(): void;
}

export function openReconcileScratch(): ReconcileScratch {
  // '' = a private temporary database on disk (SQLite deletes it on close).
  const db = new Database('');
  db.pragma('journal_mode = OFF');
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -4096');
  db.exec(`CREATE TABLE merged (
    seq   INTEGER PRIMARY KEY,
    id    TEXT NOT NULL UNIQUE,
    s     TEXT,
    p     TEXT,
    c     TEXT,
    wrote INTEGER NOT NULL DEFAULT 0
  )`);
  const putS = db.prepare<[string, string, number]>(
    `INSERT INTO merged (id, s, wrote) VALUES (?, ?, ?) ON CONFLICT ` +
      `(id) DO UPDATE SET s = excluded.s, wrote = excluded.wrote`,
  );
  const putP = db.prepare<[string, string]>(
    `INSERT INTO merged (id, p) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET p = excluded.p`,
  );
  const setC = db.prepare<[string, string]>(`UPDATE merged SET c = ? WHERE id = ?`);
  const addC = db.prepare<[string, string]>(`INSERT INTO merged (id, c) VALUES (?, ?)`);
  const lookup = db.prepare<[number, number], { seq: number; id: string }>(
    `SELECT seq, id FROM merged WHERE seq > ? AND (p IS NOT NULL OR wrote = 1) ORDER BY seq LIMIT ?`,
  );
  const page = db.prepare<[number, number], ScratchRow>(
    `SELECT seq, id, s, p, c FROM merged WHERE seq > ? ORDER BY seq LIMIT ?`,
  );
  const lookupCount = db.prepare<[], { n: number }>(
    `SELECT COUNT(*) AS n FROM merged WHERE p IS NOT NULL OR wrote = 1`,
  );
  const one = db.prepare<[string], ScratchRow>(`SELECT seq, id, s, p, c FROM merged WHERE id = ?`);
  const count = db.prepare<[], { n: number }>(`SELECT COUNT(*) AS n FROM merged`);
  const storeTx = db.transaction((rows: ReadonlyArray<{ id: string; rec: string; wrote: boolean }>) => {
    for (const r of rows) putS.run(r.id, r.rec, r.wrote ? 1 : 0);
  });
  const platformTx = db.transaction((rows: ReadonlyArray<{ id: string; rec: string }>) => {
    for (const r of rows) putP.run(r.id, r.rec);
  });
  const coreTx = db.transaction(
    (rows: ReadonlyArray<{ id: string; rec: string }>, addUnknown: (id: string) => boolean) => {
      for (const r of rows) {
        if (setC.run(r.rec, r.id).changes === 0 && addUnknown(r.id)) addC.run(r.id, r.rec);
      }
    },
  );
  return {
    putStore: (rows) => storeTx(rows),
    putPlatform: (rows) => platformTx(rows),
    putCore: (rows, addUnknown) => coreTx(rows, addUnknown),
    lookupPage: (afterSeq, limit) => lookup.all(afterSeq, limit),
    page: (afterSeq, limit) => page.all(afterSeq, limit),
    lookupCount: () => lookupCount.get()?.n ?? 0,
    get: (id) => one.get(id),
    size: () => count.get()?.n ?? 0,
    close: () => db.close(),
  };
}
