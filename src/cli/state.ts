import type { Command } from 'commander';
import { openState, openStateMigration, readLeader } from '../app/session.js';
import type { Config } from '../config/schema.js';
import { FatalError } from '../lib/errors.js';
import { redactUrlsIn } from '../lib/redact.js';
import {
  applyBackup,
  applyMigration,
  leaderView,
  migrationTarget,
  planBackup,
  planMigration,
  verifyState,
  type LeaderView,
  type MigrationResult,
  type StateVerification,
  type TableComparison,
  type TinKeySource,
} from '../ops/state.js';
import { out, type CliContext } from './context.js';

export function registerStateCommands(program: Command, ctx: CliContext): void {
  const state = program
    .command('state')
    .description('back up and verify the state database (idempotency keys, strike ledger, loan history)');
  state
    .command('backup')
    .description(
      'a consistent online copy of store.path (safe while the daemon runs), verified, written 0600',
    )
    .requiredOption('--out <file>', 'the backup file to write')
    .option('--force', 'replace an existing file')
    .action(async (opts: { out: string; force?: boolean }) => {
      const plan = planBackup(ctx.config(), { out: opts.out, force: opts.force === true });
      const { db, store } = await openState(ctx);
      const r = await applyBackup(plan, { db, store, clock: ctx.clock });
      out(ctx, `backup written: ${r.target} (${r.pages} pages, ${countsText(r.verified)})`);
    });
  state
    .command('verify')
    .description('checks a backup (or the live file): SQLite integrity, schema version, the connector tables')
    .argument('<file>', 'the database file to check')
    .option('--json', 'print the result as JSON')
    .action((file: string, opts: { json?: boolean }) => {
      const v = verifyState(file);
      if (opts.json === true) out(ctx, JSON.stringify(v));
      else if (v.ok) out(ctx, `ok: ${file} (${countsText(v)})`);
      if (!v.ok) throw new FatalError(`${file} does not verify:\n  ${v.problems.join('\n  ')}`);
    });
  state
    .command('leader')
    .description(
      'which connector process leads (boards) on this state database now: its holder id, the lease epoch and how ' +
        'long until the lease expires (read only: it never takes the lease)',
    )
    .option('--json', 'print the lease as JSON')
    .action(async (opts: { json?: boolean }) => {
      const lease = leaderView(await readLeader(ctx));
      out(
        ctx,
        opts.json === true
          ? JSON.stringify({ leader: lease.leader, epoch: lease.epoch, expiresInMs: lease.expiresInMs })
          : leaderText(lease, ctx.config().store.leadership.renewEveryMs),
      );
    });
  state
    .command('migrate')
    .description(
      'copies the SQLite state (store.path) into an empty PostgreSQL ' +
        'database, online, and verifies the copy table by table',
    )
    .requiredOption(
      '--to <url>',
      'the PostgreSQL database (postgres://user@host:5432/db; the ' +
        'password in BOARDING_STORE_PASSWORD or store.postgres.password)',
    )
    .option(
      '--verify-only',
      'copy nothing: compare the SQLite state with the PostgreSQL database (row counts and content digests)',
    )
    .action(async (opts: { to: string; verifyOnly?: boolean }) => {
      await migrate(ctx, opts.to, opts.verifyOnly === true);
    });
}

function countsText(v: StateVerification): string {
  return `schema ${v.schemaVersion}; ${Object.entries(v.counts)
    .map(([t, n]) => `${t} ${n}`)
    .join(', ')}`;
}

/** `state migrate`: the plan's notes, each table as copied, the comparison, then the verdict or next steps. */
async function migrate(ctx: CliContext, url: string, verifyOnly: boolean): Promise<void> {
  const config = ctx.config();
  const target = migrationTarget(config, url);
  const ends = await openStateMigration(ctx, target.path, url).catch((err: unknown) => {
    throw new FatalError((err as Error).message.replace(/^store\.postgres\.url:/, '--to:'));
  });
  const plan = await planMigration(target, ends, { verifyOnly, clock: ctx.clock });
  for (const d of plan.runningDaemons) {
    out(
      ctx,
      `note: a daemon (pid ${d.pid} on ${d.host}) is running on ${plan.path}: what it writes after the snapshot ` +
        `is not copied; stop it before switching`,
    );
  }
  out(
    ctx,
    `${verifyOnly ? 'comparing' : 'migrating'} ${plan.path} ` +
      `${verifyOnly ? 'with' : 'into'} ${plan.where} (${plan.tables.length} tables)`,
  );
  const r = await applyMigration(plan, ends, config, {
    onCopied: (table, rows) => out(ctx, `copied ${table}: ${rows} rows`),
  });
  out(ctx, migrationTableText(r.tables));
  for (const line of migrationVerdict(r, config, url)) out(ctx, line);
}

/** The lines after the comparison; a FatalError when the copy must not be switched to. */
function migrationVerdict(r: MigrationResult, config: Config, url: string): string[] {
  const { path, where } = r.plan;
  if (r.outcome === 'differs') {
    throw new FatalError(
      `verification failed: ${r.problemTables.join(', ')} ` +
        `${r.problemTables.length === 1 ? 'differs' : 'differ'} between ${path} and ${where}`,
    );
  }
  if (r.outcome === 'changed-after-snapshot') {
    throw new FatalError(
      `copied and verified, but the SQLite state changed after the snapshot ` +
        `(${r.problemTables.join(', ')}): a process (the daemon?) is still writing ${path}. ` +
        `Do not switch: stop the daemon, then migrate again into ` +
        `a fresh, empty database (${where} now holds the snapshot).`,
    );
  }
  if (r.plan.verifyOnly) return [`identical: ${r.tables.length} tables, ${r.rows} rows`];
  return [
    `identical: ${r.tables.length} tables, ${r.rows} rows copied and verified; ${path} did not change meanwhile`,
    ...(r.tinKey ? [tinKeyAdvice(config, r.tinKey)] : []),
    `next: stop the daemon on SQLite (if it is not already) and run \`state migrate --to … --verify-only\` once ` +
      `more (exit 0: nothing was written since); ` +
      `then set store.engine: postgres and store.postgres.url: ${redactUrlsIn(url)} (the password in ` +
      `BOARDING_STORE_PASSWORD or store.postgres.password) and start the daemon. Keep ${path} as the ` +
      `fall-back until the bank has run on PostgreSQL.`,
  ];
}

/** Where the tax-id hash key PostgreSQL needs is, and the fingerprint it must match; never its value. */
function tinKeyAdvice(config: Config, k: TinKeySource): string {
  const where =
    k.from === 'config'
      ? 'the value of customers.tinHashKey (or BOARDING_TIN_HASH_KEY) this SQLite connector uses now'
      : k.from === 'key-file'
        ? `the contents of ${k.keyFile} (the key the connector generated beside the SQLite state)`
        : `the key the SQLite state was hashed with (${k.keyFile} is missing: restore it from a backup)`;
  if (k.fingerprint === null) {
    return (
      `customers.tinHashKey: required on PostgreSQL (every replica the same); no customer was hashed yet, ` +
      `so set it to ${where}, or to a new secret of at least 16 characters`
    );
  }
  return (
    `customers.tinHashKey: the customers' tax-id hashes were carried over with the fingerprint of their key ` +
    `(${k.fingerprint}); set customers.tinHashKey (or BOARDING_TIN_HASH_KEY) ` +
    `on every replica to ${where}. Another key is refused at start`
  );
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

function leaderText(l: LeaderView, renewEveryMs: number): string {
  if (l.leader !== null && l.expiresInMs !== null) {
    const pid = l.pid !== null ? ` (pid ${l.pid} on ${l.host})` : '';
    return (
      `leader: ${l.leader}${pid}, epoch ${l.epoch}, lease expires in ` +
      `${(l.expiresInMs / 1000).toFixed(1)} s unless renewed (every ${renewEveryMs / 1000} s)`
    );
  }
  return !l.everLed
    ? 'no connector process has led on this state database yet'
    : `no leader: the lease (epoch ${l.epoch}) is free or expired; a running replica takes it within ` +
        `store.leadership.renewEveryMs`;
}
