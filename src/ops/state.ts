import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from '../config/schema.js';
import { pgSettingsProblems } from '../config/postgres.js';
import type { Clock } from '../lib/clock.js';
import { FatalError, UsageError } from '../lib/errors.js';
import { redactUrl, urlSecretParts } from '../lib/redact.js';
import { STATE_BACKUP_CHECKPOINT } from '../store/checkpoints.js';
import type { DaemonStatusStore } from '../store/daemon-status.js';
import type { CustomerStore } from '../store/identity/customers.js';
import type { BoardingStore } from '../store/index.js';
import { holderParts, type LeaseRow } from '../store/leadership/leadership.js';
import {
  compareDigests,
  copyTables,
  digestPostgres,
  digestSqlite,
  inSqliteSnapshot,
  nonEmptyTables,
  planTables,
  type TableComparison as StoreTableComparison,
  type TablePlan,
} from '../store/migrations/copy-sqlite-to-pg.js';
import { backupDatabase, verifyDatabase, type VerifyResult } from '../store/sqlite/backup.js';
import type { openDatabase } from '../store/sqlite/db.js';
import type { StoreDb } from '../store/sql.js';
import { runningDaemons } from './daemon-guard.js';

/**
 * The state database's operator actions: `state backup` (plan: where the copy goes; apply: the copy,
 * verified), `state verify`, `state migrate` (plan: the tables to copy into an empty PostgreSQL
 * database and the daemons still writing the source; apply: the copy and its table-by-table
 * comparison), `state leader`. Results are plain data; src/cli/state.ts renders them.
 */

/** One table compared between the SQLite state and the PostgreSQL copy: row counts and content digests. */
export type TableComparison = StoreTableComparison;
export type StateVerification = VerifyResult;

export interface BackupPlan {
  /** The absolute path the copy is written to (0600). */
  target: string;
}

export interface BackupResult {
  target: string;
  pages: number;
  verified: VerifyResult;
}

/** `state backup --out FILE`: checked before anything is opened (no connection to PostgreSQL, no file written). */
export function planBackup(config: Config, input: { out: string; force: boolean }): BackupPlan {
  if (config.store.engine !== 'sqlite')
    throw new UsageError(backupOnPostgresMessage(redactUrl(config.store.postgres.url ?? '')));
  const target = resolve(input.out);
  if (target === resolve(config.store.path))
    throw new UsageError('--out: must not be the state database itself (store.path)');
  if (existsSync(target) && !input.force)
    throw new UsageError(`--out: ${input.out} exists; pass --force to replace it`);
  return { target };
}

/** A consistent online copy of the open SQLite state (safe while the daemon runs), verified. */
export async function applyBackup(
  plan: BackupPlan,
  deps: { db: StoreDb; store: Pick<BoardingStore, 'checkpoints'>; clock: Clock },
): Promise<BackupResult> {
  if (deps.db.sqlite === null) throw new UsageError(backupOnPostgresMessage(deps.db.location));
  const r = backupDatabase(deps.db.sqlite, plan.target);
  const verified = verifyDatabase(plan.target);
  // Recorded only for a copy that verifies: the "backups not taken" alert reads it from the daemon's /metrics.
  if (verified.ok) await deps.store.checkpoints.save(STATE_BACKUP_CHECKPOINT, null, deps.clock.now());
  return { target: plan.target, pages: r.pages, verified };
}

/** What `state backup` says when the state is in PostgreSQL (exit 2: the command does not apply). */
function backupOnPostgresMessage(where: string): string {
  return (
    `state backup: store.engine is postgres: the state is in PostgreSQL (${where}), and this command copies an ` +
    `SQLite state file (store.path) only. ` +
    "Back the state up with the bank's PostgreSQL backups: pg_dump of the database, or the server's base " +
    'backups with WAL archiving (point-in-time recovery); docs/deploy.md "Backup and restore".'
  );
}

/** `state verify FILE`: SQLite integrity, the schema version, the connector's tables (a backup or the live file). */
export function verifyState(file: string): VerifyResult {
  return verifyDatabase(resolve(file));
}

/** Where `state migrate` copies from and to, checked before either is opened. */
export interface MigrationTarget {
  url: string;
  /** The URL as shown (no credentials, no query). */
  where: string;
  /** The SQLite state (store.path, absolute). */
  path: string;
}

/** `state migrate --to URL`: the URL and the source, refused before connecting when they cannot work. */
export function migrationTarget(config: Config, url: string): MigrationTarget {
  if (!/^postgres(ql)?:\/\//.test(url))
    throw new UsageError('--to: expected a postgres:// or postgresql:// URL');
  // A password on the command line stays in the shell history and /proc/<pid>/cmdline (issue 43 F5).
  const secrets = urlSecretParts(url);
  if (secrets.length > 0)
    throw new UsageError(
      `--to: the URL carries ${secrets.join(' and ')}: a password on the command line stays in the shell ` +
        'history and in the process list. Give the URL without it and the password in ' +
        'BOARDING_STORE_PASSWORD (or store.postgres.password)',
    );
  // The URL's own parameters, checked as store.postgres.url is (?host=, TLS parameters…), before connecting.
  const urlProblems = pgSettingsProblems({
    url,
    ssl: config.store.postgres.ssl,
    sslRootCert: config.store.postgres.sslRootCert,
  });
  if (urlProblems.length > 0) throw new UsageError(urlProblems.map(([, m]) => `--to: ${m}`).join('\n'));
  const path = resolve(config.store.path);
  if (!existsSync(path)) throw new UsageError(`store.path: there is no SQLite state at ${path} to migrate`);
  return { url, where: redactUrl(url), path };
}

/** The two ends of a migration, opened by src/app/session.ts openStateMigration. */
export interface MigrationEnds {
  src: ReturnType<typeof openDatabase>;
  target: StoreDb;
  srcDaemons: DaemonStatusStore;
  /** The SQLite state's customers: the fingerprint of the key its tax ids were hashed with. */
  srcCustomers: Pick<CustomerStore, 'keyFingerprint'>;
}

export interface MigrationPlan extends MigrationTarget {
  verifyOnly: boolean;
  tables: TablePlan[];
  /** Daemons running on the SQLite state: what they write after the snapshot is not copied (copy only). */
  runningDaemons: { pid: number; host: string }[];
}

export async function planMigration(
  target: MigrationTarget,
  ends: MigrationEnds,
  input: { verifyOnly: boolean; clock: Clock },
): Promise<MigrationPlan> {
  const tables = await planTables(ends.src, ends.target);
  // Online is allowed (the copy is one snapshot), but what the daemon writes after it is not copied.
  const daemons = input.verifyOnly ? [] : await runningDaemons(ends.srcDaemons, input.clock.now());
  return {
    ...target,
    verifyOnly: input.verifyOnly,
    tables,
    runningDaemons: daemons.map((d) => ({ pid: d.pid, host: d.host })),
  };
}

/**
 * - `identical`: every table the same (after a copy: and the SQLite state did not change meanwhile);
 * - `differs`: the comparison found tables that differ (the copy must not be switched to);
 * - `changed-after-snapshot`: copied and verified, but a process kept writing the SQLite state.
 */
export type MigrationOutcome = 'identical' | 'differs' | 'changed-after-snapshot';

export interface MigrationResult {
  plan: MigrationPlan;
  outcome: MigrationOutcome;
  tables: TableComparison[];
  /** Rows compared (and, unless verify only, copied). */
  rows: number;
  /** The tables behind a `differs` or `changed-after-snapshot` outcome. */
  problemTables: string[];
  /** After a successful copy: the tax-id hash key PostgreSQL must be configured with (never its value). */
  tinKey?: TinKeySource;
}

/** Where the key the SQLite state hashed tax ids with is, and the fingerprint the copy carried over. */
export interface TinKeySource {
  /** null: no customer was hashed yet. */
  fingerprint: string | null;
  from: 'config' | 'key-file' | 'missing-key-file';
  keyFile: string;
}

/**
 * Copies the SQLite state into the empty PostgreSQL database in one snapshot (or only compares, for
 * --verify-only), then compares table by table. A database that already holds a state is refused
 * (never merged into or overwritten): FatalError.
 */
export async function applyMigration(
  plan: MigrationPlan,
  ends: MigrationEnds,
  config: Pick<Config, 'customers' | 'store'>,
  hooks: { onCopied?: (table: string, rows: number) => void } = {},
): Promise<MigrationResult> {
  const { src, target } = ends;
  const snapshot = await inSqliteSnapshot(src, async () => {
    if (!plan.verifyOnly) {
      await target.write(async () => {
        const used = await nonEmptyTables(target, plan.tables);
        if (used.length > 0) {
          throw new FatalError(
            `--to: ${plan.where} already holds a state (rows in ${used.join(', ')}); state migrate copies only ` +
              `into an empty database and never merges into or overwrites one. ` +
              'Create a fresh database (or drop this one and create it ' +
              'again) and run it again; to compare the two, use --verify-only.',
          );
        }
        await copyTables(src, target, plan.tables, (table, rows) => hooks.onCopied?.(table, rows));
      });
    }
    return compareDigests(
      plan.tables,
      digestSqlite(src, plan.tables),
      await digestPostgres(target, plan.tables),
    );
  });
  const rows = snapshot.reduce((n, t) => n + t.sqlite.rows, 0);
  const base = { plan, tables: snapshot, rows };
  const differ = snapshot.filter((t) => !t.same).map((t) => t.table);
  if (differ.length > 0) return { ...base, outcome: 'differs', problemTables: differ };
  if (plan.verifyOnly) return { ...base, outcome: 'identical', problemTables: [] };
  // The copy is of the snapshot; a process that kept writing the SQLite file since would lose
  // those writes at the switch. The live file is digested again to tell.
  const live = await inSqliteSnapshot(src, () => Promise.resolve(digestSqlite(src, plan.tables)));
  const changed = snapshot.filter((t) => {
    const l = live.get(t.table);
    return l === undefined || l.rows !== t.sqlite.rows || l.digest !== t.sqlite.digest;
  });
  if (changed.length > 0)
    return { ...base, outcome: 'changed-after-snapshot', problemTables: changed.map((t) => t.table) };
  const fingerprint = await ends.srcCustomers.keyFingerprint();
  return { ...base, outcome: 'identical', problemTables: [], tinKey: tinKeySource(config, fingerprint) };
}

/**
 * The tax-id hash key on PostgreSQL (required there, one for every replica): the copy carried the
 * SQLite state's key fingerprint over (customer_settings), so the key to configure is the one this
 * SQLite state used.
 */
function tinKeySource(config: Pick<Config, 'customers' | 'store'>, fingerprint: string | null): TinKeySource {
  const keyFile = `${config.store.path}.tinkey`;
  const from =
    config.customers.tinHashKey !== undefined
      ? 'config'
      : existsSync(keyFile)
        ? 'key-file'
        : 'missing-key-file';
  return { fingerprint, from, keyFile };
}

/** `state leader`: who leads on this state now, as the lease row says (read only: it never takes the lease). */
export interface LeaderView {
  leader: string | null;
  epoch: number;
  expiresInMs: number | null;
  /** The holder's pid and host when its id has the connector's shape. */
  pid: number | null;
  host: string | null;
  /** false: no connector process ever led on this state database. */
  everLed: boolean;
}

export function leaderView(row: LeaseRow | null): LeaderView {
  const leads = row !== null && row.holder !== null && row.expiresInMs > 0;
  const parts = leads ? holderParts(row.holder as string) : { pid: null, host: null };
  return {
    leader: leads ? row.holder : null,
    epoch: row?.epoch ?? 0,
    expiresInMs: leads ? Math.round(row.expiresInMs) : null,
    pid: parts.pid,
    host: parts.host,
    everLed: row !== null,
  };
}
