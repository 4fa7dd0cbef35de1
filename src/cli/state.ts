import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { backupDatabase, verifyDatabase } from '../store/backup.js';
import { openState } from '../app/session.js';
import { FatalError, UsageError } from '../lib/errors.js';
import { out, type CliContext } from './context.js';

export function registerStateCommands(program: Command, ctx: CliContext): void {
  const state = program.command('state').description('back up and verify the state database (idempotency keys, strike ledger, loan history)');
  state
    .command('backup')
    .description('a consistent online copy of store.path (safe while the daemon runs), verified, written 0600')
    .requiredOption('--out <file>', 'the backup file to write')
    .option('--force', 'replace an existing file')
    .action(async (opts: { out: string; force?: boolean }) => {
      const config = ctx.config();
      const target = resolve(opts.out);
      if (target === resolve(config.store.path)) throw new UsageError('--out: must not be the state database itself (store.path)');
      if (existsSync(target) && opts.force !== true) throw new UsageError(`--out: ${opts.out} exists; pass --force to replace it`);
      const { db } = await openState(ctx);
      if (db.sqlite === null) throw new UsageError(`state backup: the state is in ${db.engine} (store.engine); back it up with the database's own tools (pg_dump)`);
      const r = backupDatabase(db.sqlite, target);
      const v = verifyDatabase(target);
      out(ctx, `backup written: ${target} (${r.pages} pages, schema ${v.schemaVersion}; ${Object.entries(v.counts).map(([t, n]) => `${t} ${n}`).join(', ')})`);
    });
  state
    .command('verify')
    .description('checks a backup (or the live file): SQLite integrity, schema version, the connector tables')
    .argument('<file>', 'the database file to check')
    .option('--json', 'print the result as JSON')
    .action((file: string, opts: { json?: boolean }) => {
      const v = verifyDatabase(resolve(file));
      if (opts.json === true) out(ctx, JSON.stringify(v));
      else if (v.ok) out(ctx, `ok: ${file} (schema ${v.schemaVersion}; ${Object.entries(v.counts).map(([t, n]) => `${t} ${n}`).join(', ')})`);
      if (!v.ok) throw new FatalError(`${file} does not verify:\n  ${v.problems.join('\n  ')}`);
    });
}
