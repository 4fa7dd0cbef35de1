import { resolve } from 'node:path';
import type { Command } from 'commander';
import { backupState, leaderNow, migrateState, migrationTableText, verifyDatabase } from '../app/state.js';
import { FatalError } from '../lib/errors.js';
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
      const {
        target,
        pages,
        verified: v,
      } = await backupState(ctx, { out: opts.out, force: opts.force === true });
      out(
        ctx,
        `backup written: ${target} (${pages} pages, schema ${v.schemaVersion}; ${Object.entries(v.counts)
          .map(([t, n]) => `${t} ${n}`)
          .join(', ')})`,
      );
    });
  state
    .command('verify')
    .description('checks a backup (or the live file): SQLite integrity, schema version, the connector tables')
    .argument('<file>', 'the database file to check')
    .option('--json', 'print the result as JSON')
    .action((file: string, opts: { json?: boolean }) => {
      const v = verifyDatabase(resolve(file));
      if (opts.json === true) out(ctx, JSON.stringify(v));
      else if (v.ok)
        out(
          ctx,
          `ok: ${file} (schema ${v.schemaVersion}; ${Object.entries(v.counts)
            .map(([t, n]) => `${t} ${n}`)
            .join(', ')})`,
        );
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
      const lease = await leaderNow(ctx);
      out(ctx, opts.json === true ? JSON.stringify(lease.json) : lease.text);
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
      await migrateState(ctx, {
        url: opts.to,
        verifyOnly: opts.verifyOnly === true,
        say: (text) => out(ctx, text),
        summary: (rows) => out(ctx, migrationTableText(rows)),
      });
    });
}
