import type { Command } from 'commander';
import { openBatches } from '../app/session.js';
import { FatalError } from '../lib/errors.js';
import { listBatches, showBatch } from '../ops/batches.js';
import { sealEarly } from '../ops/seal.js';
import { out, type CliContext } from './context.js';
import { shownTime, zonedForText, zonedJson } from './times.js';

export function registerBatchesCommands(program: Command, ctx: CliContext): void {
  const group = program
    .command('batches')
    .description('file core batches: list, show, seal early (docs/core.md)');

  group
    .command('list')
    .description(
      'batches newest first: status (open, sealing, sealed), ' +
        'loans, corrections, records, principal, trigger file present',
    )
    .option('--limit <n>', 'how many', (v) => Number(v), 30)
    .option('--json', 'print JSON')
    .action(async (opts: { limit: number; json?: boolean }) => {
      const batches = await openBatches(ctx);
      const rows = await listBatches(batches, opts.limit);
      const zone = ctx.config().bank.timeZone;
      if (opts.json) return out(ctx, JSON.stringify(zonedJson(rows, zone), null, 2));
      if (rows.length === 0) return out(ctx, 'no batches yet');
      for (const r of rows) {
        out(
          ctx,
          `${r.id}  ${r.status.padEnd(7)}  loans ${r.loans}  corrections ${r.corrections}  records ${r.records}  ` +
            `principal_cents ${r.principalCents ?? '-'}  cutoff ${shownTime(r.cutoffAt, zone)}  trigger ` +
            `${r.triggerFile ? 'yes' : 'no'}`,
        );
      }
    });

  group
    .command('show')
    .description(
      'one batch: status, cut-off, when it was frozen and sealed, who sealed it and why, counts, and its loans',
    )
    .argument('<id>', 'batch id (yyyy-mm-dd-nnn)')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const batches = await openBatches(ctx);
      const v = await showBatch(batches, id);
      const loans = v.loanList;
      const zone = ctx.config().bank.timeZone;
      if (opts.json) return out(ctx, JSON.stringify(zonedJson(v, zone), null, 2));
      const { loanList: _l, ...fields } = zonedForText(v, zone);
      for (const [k, val] of Object.entries<string | number | boolean | null>(fields))
        out(ctx, `${k}: ${val === null ? '-' : String(val)}`);
      for (const l of loans)
        out(
          ctx,
          `  ${l.loanId}  ${l.kind}  records ${l.records}  principal_cents ` +
            `${l.principalCents ?? '-'}  boarded ${shownTime(l.boardedAt, zone)}`,
        );
    });

  group
    .command('seal')
    .description(
      'seal the open batch now, before its cut-off (audited: --reason and the operator are kept on the batch)',
    )
    .requiredOption('--reason <text>', 'why the batch is sealed early')
    .option('--by <name>', 'operator (default: $USER)')
    .option('--id <id>', 'seal only if this is the open batch')
    .action(async (opts: { reason: string; by?: string; id?: string }) => {
      const batches = await openBatches(ctx);
      await batches.recover();
      const by = opts.by ?? ctx.env['USER'] ?? ctx.env['USERNAME'] ?? 'ops';
      const sealed = await sealEarly(batches, { reason: opts.reason, by, id: opts.id });
      if (!sealed.ok) throw new FatalError(`batches seal: ${sealed.message}`);
      const id = sealed.id;
      out(ctx, `sealed ${id} (${batches.batchDir(id)})`);
    });
}
