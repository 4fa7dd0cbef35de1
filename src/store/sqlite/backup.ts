import { chmodSync, closeSync, existsSync, openSync, renameSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Db } from './db.js';
import { STATE_FILE_MODE } from './db.js';
import { MIGRATIONS } from '../migrations/migrations.js';

/**
 * The state database holds what cannot be rebuilt from elsewhere: the idempotency keys (a lost
 * one risks a second board or acknowledgement) and the rate-limit strike ledger (a lost one risks
 * the strike that revokes the key). A backup is `VACUUM INTO` from the live database: a consistent
 * snapshot (one read transaction; in WAL mode the daemon keeps writing) rebuilt page by page from
 * the live rows, so it never carries a free page or a freed cell: what the seal cleared (full tax
 * ids in rendered lines) is not in any backup. The copy goes to a file created owner-only before
 * the first byte (SQLite gives its journal the same mode), in rollback mode so that opening it
 * creates no -wal/-shm beside it, and is verified, then renamed into place; nothing else is left
 * behind, also when it fails.
 */
export function backupDatabase(db: Db, out: string): { pages: number } {
  const tmp = `${out}.partial-${process.pid}`;
  const companions = [tmp, ...SQLITE_COMPANIONS.map((suffix) => `${tmp}${suffix}`)];
  for (const f of companions) rmSync(f, { force: true });
  try {
    // Created 0600 here (O_EXCL: never someone else's file), not by SQLite with the umask's 0644.
    closeSync(openSync(tmp, 'wx', STATE_FILE_MODE));
    db.prepare('VACUUM INTO ?').run(tmp);
    chmodSync(tmp, STATE_FILE_MODE);
    const check = verifyDatabase(tmp);
    if (!check.ok) throw new Error(`the copy does not verify: ${check.problems.join('; ')}`);
    const pages = pageCount(tmp);
    renameSync(tmp, out);
    return { pages };
  } finally {
    for (const f of companions) rmSync(f, { force: true });
  }
}

/** Files SQLite may create beside a database. */
const SQLITE_COMPANIONS = ['-journal', '-wal', '-shm'];

function pageCount(path: string): number {
  const copy = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return copy.pragma('page_count', { simple: true }) as number;
  } finally {
    copy.close();
  }
}

export interface VerifyResult {
  ok: boolean;
  problems: string[];
  schemaVersion: number | null;
  counts: Record<string, number>;
}

const REQUIRED_TABLES = [
  'loans',
  'loan_events',
  'checkpoints',
  'idempotency_keys',
  'rate_spend',
  'rate_strikes',
  'webhook_inbox',
  'leases',
];

/** Opens a copy read-only: SQLite's integrity check, the schema version, the tables the connector needs. */
export function verifyDatabase(path: string): VerifyResult {
  const problems: string[] = [];
  const counts: Record<string, number> = {};
  if (!existsSync(path))
    return { ok: false, problems: [`${path}: no such file`], schemaVersion: null, counts };
  let db: Db;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    return {
      ok: false,
      problems: [`${path}: not an SQLite database (${(err as Error).message})`],
      schemaVersion: null,
      counts,
    };
  }
  try {
    let schemaVersion: number | null = null;
    try {
      const integrity = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
      const bad = integrity.map((r) => r.integrity_check).filter((r) => r !== 'ok');
      if (bad.length > 0) problems.push(`integrity check: ${bad.slice(0, 5).join('; ')}`);
      schemaVersion = db.pragma('user_version', { simple: true }) as number;
      if (schemaVersion === 0) problems.push('schema version 0: not a connector state database');
      else if (schemaVersion > MIGRATIONS.length)
        problems.push(
          `schema version ${schemaVersion} is newer than this connector knows (${MIGRATIONS.length})`,
        );
      const tables = new Set(
        (
          db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>
        ).map((r) => r.name),
      );
      for (const t of REQUIRED_TABLES) {
        if (!tables.has(t)) problems.push(`table ${t} is missing`);
        else counts[t] = (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
      }
    } catch (err) {
      problems.push(`${path}: ${(err as Error).message}`);
    }
    return { ok: problems.length === 0, problems, schemaVersion, counts };
  } finally {
    db.close();
  }
}
