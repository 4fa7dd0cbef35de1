import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from '../config/schema.js';
import { FatalError, UsageError } from '../lib/errors.js';
import { backupDatabase, verifyDatabase } from '../store/sqlite/backup.js';
import { holderParts } from '../store/leadership/leadership.js';
import {
  compareDigests,
  copyTables,
  digestPostgres,
  digestSqlite,
  inSqliteSnapshot,
  nonEmptyTables,
  planTables,
  type TableComparison,
} from '../store/migrations/copy-sqlite-to-pg.js';
import { redactUrl, redactUrlsIn, urlSecretParts } from '../lib/redact.js';
import { pgSettingsProblems } from '../config/postgres.js';
import { STATE_BACKUP_CHECKPOINT } from '../store/checkpoints.js';
import { runningDaemons } from '../ops/daemon-guard.js';
import { createCustomerStore } from '../store/identity/customers.js';
import { sqliteStore } from '../store/sqlite/store.js';
import { openState, openStateMigration, readLeader, type CommandScope } from './session.js';

export { verifyDatabase, type TableComparison };

/** `state backup --out FILE`: a consistent online copy of store.path, verified, written 0600. */
export async function backupState(ctx: CommandScope, input: { out: string; force: boolean }) {
  const config = ctx.config();
  // Checked before anything is opened: no connection to PostgreSQL, no file written.
  if (config.store.engine !== 'sqlite')
    throw new UsageError(backupOnPostgresMessage(redactUrl(config.store.postgres.url ?? '')));
  const target = resolve(input.out);
  if (target === resolve(config.store.path))
    throw new UsageError('--out: must not be the state database itself (store.path)');
  if (existsSync(target) && !input.force)
    throw new UsageError(`--out: ${input.out} exists; pass --force to replace it`);
  const { db, store } = await openState(ctx);
  if (db.sqlite === null) throw new UsageError(backupOnPostgresMessage(db.location));
  const r = backupDatabase(db.sqlite, target);
  const verified = verifyDatabase(target);
  // Recorded only for a copy that verifies: the "backups not taken" alert reads it from the daemon's /metrics.
  if (verified.ok) await store.checkpoints.save(STATE_BACKUP_CHECKPOINT, null, ctx.clock.now());
  return { target, pages: r.pages, verified };
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

/**
 * `state migrate --to URL [--verify-only]`: copies the SQLite state into an empty PostgreSQL
 * database in one snapshot and verifies it table by table (or only compares). Lines for the
 * operator go to `say` as they happen; a FatalError when the copy must not be switched to.
 */
export async function migrateState(
  ctx: CommandScope,
  input: {
    url: string;
    verifyOnly: boolean;
    say: (text: string) => void;
    summary: (rows: readonly TableComparison[]) => void;
  },
): Promise<void> {
  const { url, verifyOnly } = input;
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
  const config = ctx.config();
  // The URL's own parameters, checked as store.postgres.url is (?host=, TLS parameters…), before connecting.
  const urlProblems = pgSettingsProblems({
    url,
    ssl: config.store.postgres.ssl,
    sslRootCert: config.store.postgres.sslRootCert,
  });
  if (urlProblems.length > 0) throw new UsageError(urlProblems.map(([, m]) => `--to: ${m}`).join('\n'));
  const where = redactUrl(url);
  const path = resolve(config.store.path);
  if (!existsSync(path)) throw new UsageError(`store.path: there is no SQLite state at ${path} to migrate`);
  const { src, target, srcDaemons } = await openStateMigration(ctx, path, url).catch((err: unknown) => {
    throw new FatalError((err as Error).message.replace(/^store\.postgres\.url:/, '--to:'));
  });
  const plans = await planTables(src, target);
  if (!verifyOnly) {
    // Online is allowed (the copy is one snapshot), but what the daemon writes after it is not copied.
    for (const d of await runningDaemons(srcDaemons, ctx.clock.now())) {
      input.say(
        `note: a daemon (pid ${d.pid} on ${d.host}) is running on ${path}: what it writes after the snapshot is ` +
          `not copied; stop it before switching`,
      );
    }
  }
  input.say(
    `${verifyOnly ? 'comparing' : 'migrating'} ${path} ` +
      `${verifyOnly ? 'with' : 'into'} ${where} (${plans.length} tables)`,
  );

  const snapshot = await inSqliteSnapshot(src, async () => {
    if (!verifyOnly) {
      await target.write(async () => {
        const used = await nonEmptyTables(target, plans);
        if (used.length > 0) {
          throw new FatalError(
            `--to: ${where} already holds a state (rows in ${used.join(', ')}); state migrate copies only into ` +
              `an empty database and never merges into or overwrites one. ` +
              'Create a fresh database (or drop this one and create it ' +
              'again) and run it again; to compare the two, use --verify-only.',
          );
        }
        await copyTables(src, target, plans, (table, rows) => input.say(`copied ${table}: ${rows} rows`));
      });
    }
    const sqlite = digestSqlite(src, plans);
    const postgres = await digestPostgres(target, plans);
    return compareDigests(plans, sqlite, postgres);
  });
  input.summary(snapshot);
  const differ = snapshot.filter((t) => !t.same).map((t) => t.table);
  if (differ.length > 0) {
    throw new FatalError(
      `verification failed: ${differ.join(', ')} ` +
        `${differ.length === 1 ? 'differs' : 'differ'} between ${path} and ${where}`,
    );
  }
  if (verifyOnly) {
    input.say(
      `identical: ${snapshot.length} tables, ${snapshot.reduce((n, t) => n + t.sqlite.rows, 0)} rows`,
    );
    return;
  }
  // The copy is of the snapshot; a process that kept writing the SQLite file since would lose
  // those writes at the switch. The live file is digested again to tell.
  const live = await inSqliteSnapshot(src, () => Promise.resolve(digestSqlite(src, plans)));
  const changed = snapshot.filter((t) => {
    const l = live.get(t.table);
    return l === undefined || l.rows !== t.sqlite.rows || l.digest !== t.sqlite.digest;
  });
  if (changed.length > 0) {
    throw new FatalError(
      `copied and verified, but the SQLite state changed after the snapshot ` +
        `(${changed.map((t) => t.table).join(', ')}): a process (the daemon?) is still writing ${path}. ` +
        `Do not switch: stop the daemon, then migrate again into ` +
        `a fresh, empty database (${where} now holds the snapshot).`,
    );
  }
  input.say(
    `identical: ${snapshot.length} tables, ${snapshot.reduce((n, t) => n + t.sqlite.rows, 0)} rows copied and ` +
      `verified; ${path} did not change meanwhile`,
  );
  input.say(tinKeyAdvice(config, await createCustomerStore(sqliteStore(src)).keyFingerprint()));
  input.say(
    `next: stop the daemon on SQLite (if it is not already) and run \`state migrate --to … --verify-only\` once ` +
      `more (exit 0: nothing was written since); ` +
      `then set store.engine: postgres and store.postgres.url: ${redactUrlsIn(url)} (the password in ` +
      `BOARDING_STORE_PASSWORD or store.postgres.password) and start the daemon. Keep ${path} as the ` +
      `fall-back until the bank has run on PostgreSQL.`,
  );
}

/**
 * The tax-id hash key on PostgreSQL (required there, one for every replica): the copy carried the
 * SQLite state's key fingerprint over (customer_settings), so the key to configure is the one this
 * SQLite state used. Its value is never printed: where it is, and the fingerprint it must match.
 */
function tinKeyAdvice(config: Config, fingerprint: string | null): string {
  const keyFile = `${config.store.path}.tinkey`;
  const where =
    config.customers.tinHashKey !== undefined
      ? 'the value of customers.tinHashKey (or BOARDING_TIN_HASH_KEY) this SQLite connector uses now'
      : existsSync(keyFile)
        ? `the contents of ${keyFile} (the key the connector generated beside the SQLite state)`
        : `the key the SQLite state was hashed with (${keyFile} is missing: restore it from a backup)`;
  if (fingerprint === null) {
    return (
      `customers.tinHashKey: required on PostgreSQL (every replica the same); no customer was hashed yet, ` +
      `so set it to ${where}, or to a new secret of at least 16 characters`
    );
  }
  return (
    `customers.tinHashKey: the customers' tax-id hashes were carried over with the fingerprint of their key ` +
    `(${fingerprint}); set customers.tinHashKey (or BOARDING_TIN_HASH_KEY) ` +
    `on every replica to ${where}. Another key is refused at start`
  );
}

/** `state leader`: who leads on this state now (read only: it never takes the lease), as JSON and as a line. */
export async function leaderNow(ctx: CommandScope): Promise<{ json: unknown; text: string }> {
  const row = await readLeader(ctx);
  const leads = row !== null && row.holder !== null && row.expiresInMs > 0;
  const json = {
    leader: leads ? row.holder : null,
    epoch: row?.epoch ?? 0,
    expiresInMs: leads ? Math.round(row.expiresInMs) : null,
  };
  if (leads) {
    const parts = holderParts(row.holder as string);
    const pid = parts.pid !== null ? ` (pid ${parts.pid} on ${parts.host})` : '';
    const every = ctx.config().store.leadership.renewEveryMs / 1000;
    return {
      json,
      text:
        `leader: ${row.holder}${pid}, epoch ${row.epoch}, lease expires in ` +
        `${(row.expiresInMs / 1000).toFixed(1)} s unless renewed (every ${every} s)`,
    };
  }
  return {
    json,
    text:
      row === null
        ? 'no connector process has led on this state database yet'
        : `no leader: the lease (epoch ${row.epoch}) is free or expired; a running replica takes it within ` +
          `store.leadership.renewEveryMs`,
  };
}

/** The table by table comparison of `state migrate`. */
export function migrationTableText(rows: readonly TableComparison[]): string {
  const w = Math.max(5, ...rows.map((r) => r.table.length));
  const head =
    `${'table'.padEnd(w)}  ${'sqlite rows'.padStart(11)}  ` +
    `${'postgres rows'.padStart(13)}  digest (sha256, 12)  result`;
  return [
    head,
    ...rows.map(
      (r) =>
        `${r.table.padEnd(w)}  ${String(r.sqlite.rows).padStart(11)}  ${String(r.postgres.rows).padStart(13)}  ` +
        `${r.sqlite.digest.slice(0, 12).padEnd(19)}  ` +
        `${r.same ? 'same' : `DIFFERS (postgres ${r.postgres.digest.slice(0, 12)})`}`,
    ),
  ].join('\n');
}
