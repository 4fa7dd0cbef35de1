import { createHash } from 'node:crypto';
import type { Db } from '../sqlite/db.js';
import type { StoreDb } from '../sql.js';

/**
 * `state migrate --to postgres://…` (issue 26 point 6): copies an SQLite state database into
 * PostgreSQL and verifies the copy.
 *
 * - The source is one read transaction on the SQLite file (WAL: a daemon may keep writing; the
 *   transaction sees one consistent snapshot for as long as it is open). Rows are streamed
 *   (`iterate()`), never held in memory: the copy costs the same memory at 100,000 loans as at 100.
 * - The target is brought to the current schema by the one migration history (openStore), then
 *   every table of the SQLite file is copied in ONE PostgreSQL transaction, in batches of
 *   multi-row INSERTs: a failure leaves the target as empty as it was.
 * - The target must be empty (every table the copy writes): a copy never merges into or overwrites
 *   a state that is there. There is no --force: a second copy into a used database would either
 *   clash with its keys or, if it replaced them, destroy a state that may be live. A failed copy
 *   rolls back, so the same database can be used again.
 * - Serial columns (loan_events.seq, console_audit.seq, the rowid columns PostgreSQL gives the
 *   tables read in arrival order) are copied as they are, then their sequences are set past the
 *   highest value (and past SQLite's AUTOINCREMENT high-water mark, so no number is ever reused).
 * - Verification: per table, the row count and a SHA-256 of the rows (values as JSON, in the
 *   column order of the plan) read in primary-key order on both sides; byte order for text
 *   (PostgreSQL `COLLATE "C"`, SQLite's BINARY), NULLs first.
 */

export interface TablePlan {
  table: string;
  /** The columns written on PostgreSQL (generated columns excluded), in order. */
  columns: string[];
  /** What SQLite selects for each column: the column itself, or its implicit rowid. */
  sqliteExprs: string[];
  /** The ORDER BY columns (the primary key; every column when there is none). */
  orderBy: string[];
  /** Text columns (ordered with COLLATE "C" on PostgreSQL). */
  textColumns: Set<string>;
  /** PostgreSQL columns filled from a sequence (serial/identity). */
  serialColumns: string[];
}

export interface TableDigest {
  rows: number;
  digest: string;
}

export interface TableComparison {
  table: string;
  sqlite: TableDigest;
  postgres: TableDigest;
  same: boolean;
}

const q = (ident: string): string => `"${ident.replace(/"/g, '""')}"`;

/**
 * Tables a trigger keeps from another table's rows (migration 21: the pools' allocated counts): the
 * copy of their source rebuilds them on PostgreSQL, and a copy of their own would count twice.
 */
const TRIGGER_KEPT: ReadonlySet<string> = new Set(['bank_number_counts']);

/** The tables of the SQLite file to copy, referenced tables before those that reference them. */
function sqliteTables(src: Db): string[] {
  const names = (
    src
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
      )
      .all() as Array<{ name: string }>
  ).map((r) => r.name);
  const deps = new Map(
    names.map((n) => [
      n,
      (src.pragma(`foreign_key_list(${q(n)})`) as Array<{ table: string }>)
        .map((f) => f.table)
        .filter((t) => t !== n),
    ]),
  );
  const ordered: string[] = [];
  const visit = (n: string, path: Set<string>): void => {
    if (ordered.includes(n) || path.has(n)) return;
    path.add(n);
    for (const d of deps.get(n) ?? []) if (deps.has(d)) visit(d, path);
    ordered.push(n);
  };
  for (const n of names) visit(n, new Set());
  return ordered.filter((n) => !TRIGGER_KEPT.has(n));
}

/**
 * Matches every SQLite table with its PostgreSQL twin (both from the one migration history):
 * throws naming the table and column when they differ (a schema the connector did not make).
 */
export async function planTables(src: Db, target: StoreDb): Promise<TablePlan[]> {
  const pgCols = await target.all<{
    table_name: string;
    column_name: string;
    data_type: string;
    is_generated: string;
    column_default: string | null;
    is_identity: string;
  }>(
    `SELECT table_name, column_name, data_type, is_generated, column_default, is_identity
       FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
  );
  const byTable = new Map<string, typeof pgCols>();
  for (const c of pgCols) byTable.set(c.table_name, [...(byTable.get(c.table_name) ?? []), c]);
  const plans: TablePlan[] = [];
  const problems: string[] = [];
  for (const table of sqliteTables(src)) {
    const cols = byTable.get(table);
    if (cols === undefined) {
      problems.push(`table ${table} is in the SQLite state but not in PostgreSQL`);
      continue;
    }
    const sqliteInfo = src.pragma(`table_info(${q(table)})`) as Array<{ name: string; pk: number }>;
    const sqliteNames = new Set(sqliteInfo.map((c) => c.name));
    const written = cols.filter((c) => c.is_generated === 'NEVER');
    const columns: string[] = [];
    const sqliteExprs: string[] = [];
    for (const c of written) {
      if (sqliteNames.has(c.column_name)) sqliteExprs.push(q(c.column_name));
      else if (c.column_name === 'rowid') sqliteExprs.push('rowid');
      else {
        problems.push(`${table}.${c.column_name} is in PostgreSQL but not in the SQLite state`);
        continue;
      }
      columns.push(c.column_name);
    }
    const pgNames = new Set(cols.map((c) => c.column_name));
    for (const n of sqliteNames)
      if (!pgNames.has(n)) problems.push(`${table}.${n} is in the SQLite state but not in PostgreSQL`);
    const pk = sqliteInfo
      .filter((c) => c.pk > 0)
      .sort((a, b) => a.pk - b.pk)
      .map((c) => c.name);
    plans.push({
      table,
      columns,
      sqliteExprs,
      orderBy: pk.length > 0 ? pk : columns,
      textColumns: new Set(
        written
          .filter((c) => c.data_type === 'text' || c.data_type === 'character varying')
          .map((c) => c.column_name),
      ),
      serialColumns: written
        .filter((c) => c.is_identity === 'YES' || (c.column_default ?? '').startsWith('nextval('))
        .map((c) => c.column_name),
    });
  }
  if (problems.length > 0)
    throw new Error(`the SQLite state and the PostgreSQL schema differ:\n  ${problems.join('\n  ')}`);
  return plans;
}

/** The tables of the plan that already hold rows on PostgreSQL. */
export async function nonEmptyTables(target: StoreDb, plans: readonly TablePlan[]): Promise<string[]> {
  const found: string[] = [];
  for (const p of plans)
    if ((await target.get(`SELECT 1 AS x FROM ${q(p.table)} LIMIT 1`)) !== undefined) found.push(p.table);
  return found;
}

/** Rows per INSERT: PostgreSQL takes at most 65,535 parameters per statement. */
function batchRows(columns: number): number {
  return Math.max(1, Math.min(1000, Math.floor(30_000 / Math.max(1, columns))));
}

const sqliteSelect = (p: TablePlan): string =>
  `SELECT ${p.sqliteExprs.join(', ')} FROM ${q(p.table)} ORDER BY ` +
  `${p.orderBy.map((c) => `${c === 'rowid' ? 'rowid' : q(c)} ASC NULLS FIRST`).join(', ')}`;

const pgSelect = (p: TablePlan): string =>
  `SELECT ${p.columns.map(q).join(', ')} FROM ${q(p.table)} ORDER BY ` +
  `${p.orderBy.map((c) => `${q(c)}${p.textColumns.has(c) ? ' COLLATE "C"' : ''} ASC NULLS FIRST`).join(', ')}`;

/** One row as the digest sees it: the same text on both engines for the same values. */
function rowText(values: readonly unknown[]): string {
  return JSON.stringify(
    values.map((v) =>
      typeof v === 'bigint' ? Number(v) : Buffer.isBuffer(v) ? { hex: v.toString('hex') } : v,
    ),
  );
}

/**
 * Copies every planned table into the target inside the caller's PostgreSQL write transaction,
 * streaming from `src` (which the caller holds in one read transaction). Returns rows per table.
 */
export async function copyTables(
  src: Db,
  target: StoreDb,
  plans: readonly TablePlan[],
  onTable?: (table: string, rows: number) => void,
): Promise<Map<string, number>> {
  const copied = new Map<string, number>();
  for (const p of plans) {
    const per = batchRows(p.columns.length);
    const rowSql = `(${p.columns.map(() => '?').join(', ')})`;
    const head = `INSERT INTO ${q(p.table)} (${p.columns.map(q).join(', ')}) VALUES `;
    let batch: unknown[] = [];
    let inBatch = 0;
    let n = 0;
    const flush = async (): Promise<void> => {
      if (inBatch === 0) return;
      await target.run(head + Array.from({ length: inBatch }, () => rowSql).join(', '), batch);
      batch = [];
      inBatch = 0;
    };
    for (const row of src.prepare(sqliteSelect(p)).raw(true).iterate() as IterableIterator<unknown[]>) {
      for (const v of row) batch.push(typeof v === 'bigint' ? v.toString() : v);
      inBatch += 1;
      n += 1;
      if (inBatch >= per) await flush();
    }
    await flush();
    copied.set(p.table, n);
    onTable?.(p.table, n);
  }
  await fixSequences(src, target, plans);
  return copied;
}

/** Sets each serial column's sequence past the highest value copied and SQLite's AUTOINCREMENT mark. */
async function fixSequences(src: Db, target: StoreDb, plans: readonly TablePlan[]): Promise<void> {
  const hasSeqTable =
    src.prepare("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").get() !== undefined;
  for (const p of plans) {
    for (const col of p.serialColumns) {
      const max =
        (await target.get<{ m: number | null }>(`SELECT max(${q(col)}) AS m FROM ${q(p.table)}`))?.m ?? null;
      const mark =
        hasSeqTable && col !== 'rowid'
          ? ((
              src.prepare('SELECT seq FROM sqlite_sequence WHERE name = ?').get(p.table) as
                { seq: number } | undefined
            )?.seq ?? null)
          : null;
      const floor = Math.max(max === null ? 0 : Number(max), mark === null ? 0 : Number(mark));
      if (floor < 1) continue;
      await target.get(`SELECT setval(pg_get_serial_sequence(?, ?), ?, true) AS v`, [q(p.table), col, floor]);
    }
  }
}

/** Count and digest of every planned table of the SQLite file (in the caller's read transaction). */
export function digestSqlite(src: Db, plans: readonly TablePlan[]): Map<string, TableDigest> {
  const out = new Map<string, TableDigest>();
  for (const p of plans) {
    const h = createHash('sha256');
    let rows = 0;
    for (const row of src.prepare(sqliteSelect(p)).raw(true).iterate() as IterableIterator<unknown[]>) {
      h.update(rowText(row));
      h.update('\n');
      rows += 1;
    }
    out.set(p.table, { rows, digest: h.digest('hex') });
  }
  return out;
}

/** Count and digest of every planned table on PostgreSQL: one snapshot, read through a cursor. */
export async function digestPostgres(
  target: StoreDb,
  plans: readonly TablePlan[],
): Promise<Map<string, TableDigest>> {
  return target.read(async () => {
    const out = new Map<string, TableDigest>();
    for (const p of plans) {
      const h = createHash('sha256');
      let rows = 0;
      await target.run(`DECLARE migrate_digest NO SCROLL CURSOR FOR ${pgSelect(p)}`);
      for (;;) {
        const page = await target.all<Record<string, unknown>>('FETCH 2000 FROM migrate_digest');
        if (page.length === 0) break;
        for (const r of page) {
          h.update(rowText(p.columns.map((c) => r[c])));
          h.update('\n');
          rows += 1;
        }
      }
      await target.run('CLOSE migrate_digest');
      out.set(p.table, { rows, digest: h.digest('hex') });
    }
    return out;
  });
}

export function compareDigests(
  plans: readonly TablePlan[],
  a: Map<string, TableDigest>,
  b: Map<string, TableDigest>,
): TableComparison[] {
  return plans.map((p) => {
    const s = a.get(p.table) ?? { rows: 0, digest: '' };
    const t = b.get(p.table) ?? { rows: 0, digest: '' };
    return { table: p.table, sqlite: s, postgres: t, same: s.rows === t.rows && s.digest === t.digest };
  });
}

/** Runs fn inside one read transaction on the SQLite connection (a consistent snapshot). */
export async function inSqliteSnapshot<T>(src: Db, fn: () => Promise<T>): Promise<T> {
  src.exec('BEGIN');
  try {
    // The snapshot starts at the first read, not at BEGIN.
    src.prepare('SELECT count(*) FROM sqlite_master').get();
    return await fn();
  } finally {
    src.exec('COMMIT');
  }
}
