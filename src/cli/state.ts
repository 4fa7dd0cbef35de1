import { resolve } from 'node:path';
import type { Command } from 'commander';
import { readLeader } from '../app/session.js';
import {
  backupState,
  holderParts,
  migrateState,
  verifyDatabase,
  type TableComparison,
} from '../app/state.js';
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
      'which connector process leads (boards) on this state database now: its holder id, the lease epoch and how long until the lease expires (read only: it never takes the lease)',
    )
    .option('--json', 'print the lease as JSON')
    .action(async (opts: { json?: boolean }) => {
      const row = await readLeader(ctx);
      const leads = row !== null && row.holder !== null && row.expiresInMs > 0;
      if (opts.json === true)
        out(
          ctx,
          JSON.stringify({
            leader: leads ? row.holder : null,
            epoch: row?.epoch ?? 0,
            expiresInMs: leads ? Math.round(row.expiresInMs) : null,
          }),
        );
      else if (leads) {
        const parts = holderParts(row.holder as string);
        out(
          ctx,
          `leader: ${row.holder}${parts.pid !== null ? ` (pid ${parts.pid} on ${parts.host})` : ''}, epoch ${row.epoch}, lease expires in ${(row.expiresInMs / 1000).toFixed(1)} s unless renewed (every ${ctx.config().store.leadership.renewEveryMs / 1000} s)`,
        );
      } else
        out(
          ctx,
          row === null
            ? 'no connector process has led on this state database yet'
            : `no leader: the lease (epoch ${row.epoch}) is free or expired; a running replica takes it within store.leadership.renewEveryMs`,
        );
    });
  state
    .command('migrate')
    .description(
      'copies the SQLite state (store.path) into an empty PostgreSQL database, online, and verifies the copy table by table',
    )
    .requiredOption(
      '--to <url>',
      'the PostgreSQL database (postgres://user@host:5432/db; the password in BOARDING_STORE_PASSWORD or store.postgres.password)',
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
        summary: (rows) => printSummary(ctx, rows),
      });
    });
}

function printSummary(ctx: CliContext, rows: readonly TableComparison[]): void {
  const w = Math.max(5, ...rows.map((r) => r.table.length));
  out(
    ctx,
    `${'table'.padEnd(w)}  ${'sqlite rows'.padStart(11)}  ${'postgres rows'.padStart(13)}  digest (sha256, 12)  result`,
  );
  for (const r of rows) {
    out(
      ctx,
      `${r.table.padEnd(w)}  ${String(r.sqlite.rows).padStart(11)}  ${String(r.postgres.rows).padStart(13)}  ${r.sqlite.digest.slice(0, 12).padEnd(19)}  ${r.same ? 'same' : `DIFFERS (postgres ${r.postgres.digest.slice(0, 12)})`}`,
    );
  }
}
