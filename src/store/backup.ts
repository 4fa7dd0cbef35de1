import { chmodSync, existsSync, renameSync, rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Db } from './db.js';
import { STATE_FILE_MODE } from './db.js';
import { MIGRATIONS } from './migrations.js';

/**
 * The state database holds what cannot be rebuilt from elsewhere: the idempotency keys (a lost
 * one risks a second board or acknowledgement) and the rate-limit strike ledger (a lost one risks
 * the strike that revokes the key). A backup is SQLite's online backup of the live database — a
 * consistent snapshot taken page by page while the daemon keeps writing — written beside the
 * target and renamed into place, owner-only, so a half-written copy never looks like a backup.
 */
export async function backupDatabase(db: Db, out: string): Promise<{ pages: number }> {
  const tmp = `${out}.partial-${process.pid}`;
  rmSync(tmp, { force: true });
  try {
    // After the first step, the rest in one step: it holds a read snapshot (WAL: writers carry
    // on), so a busy daemon cannot restart the backup for ever, which small steps would allow.
    const progress = await db.backup(tmp, { progress: () => Number.MAX_SAFE_INTEGER });
    chmodSync(tmp, STATE_FILE_MODE);
    const check = verifyDatabase(tmp);
    if (!check.ok) throw new Error(`the copy does not verify: ${check.problems.join('; ')}`);
    renameSync(tmp, out);
    return { pages: progress.totalPages };
  } finally {
    rmSync(tmp, { force: true });
  }
}

export interface VerifyResult {
  ok: boolean;
  problems: string[];
  schemaVersion: number | null;
  counts: Record<string, number>;
}

const REQUIRED_TABLES = ['loans', 'loan_events', 'checkpoints', 'idempotency_keys', 'rate_spend', 'rate_strikes', 'webhook_inbox', 'leases'];

/** Opens a copy read-only: SQLite's integrity check, the schema version, the tables the connector needs. */
export function verifyDatabase(path: string): VerifyResult {
  const problems: string[] = [];
  const counts: Record<string, number> = {};
  if (!existsSync(path)) return { ok: false, problems: [`${path}: no such file`], schemaVersion: null, counts };
  let db: Db;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    return { ok: false, problems: [`${path}: not an SQLite database (${(err as Error).message})`], schemaVersion: null, counts };
  }
  try {
    let schemaVersion: number | null = null;
    try {
      const integrity = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
      const bad = integrity.map((r) => r.integrity_check).filter((r) => r !== 'ok');
      if (bad.length > 0) problems.push(`integrity check: ${bad.slice(0, 5).join('; ')}`);
      schemaVersion = db.pragma('user_version', { simple: true }) as number;
      if (schemaVersion === 0) problems.push('schema version 0: not a connector state database');
      else if (schemaVersion > MIGRATIONS.length) problems.push(`schema version ${schemaVersion} is newer than this connector knows (${MIGRATIONS.length})`);
      const tables = new Set((db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((r) => r.name));
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
