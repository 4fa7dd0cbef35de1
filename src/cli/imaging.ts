import type { Command } from 'commander';
import { openImagingSession } from '../app/imaging.js';
import { UsageError } from '../lib/errors.js';
import { listImagingBatches, reexportLoan, showImaging } from '../ops/imaging.js';
import { out, type CliContext } from './context.js';

export function registerImagingCommands(program: Command, ctx: CliContext): void {
  const group = program
    .command('imaging')
    .description('documents exported to the imaging system: list, show, reexport (docs/imaging.md)');

  group
    .command('list')
    .description('imaging batches newest first: status (open, sealing, publishing, sealed), documents, loans')
    .option('--limit <n>', 'how many', (v) => Number(v), 30)
    .option('--json', 'print JSON')
    .action(async (opts: { limit: number; json?: boolean }) => {
      const { exporter } = await openImagingSession(ctx, { platform: false });
      const rows = await listImagingBatches(exporter, opts.limit);
      if (opts.json) return out(ctx, JSON.stringify(rows, null, 2));
      if (rows.length === 0) return out(ctx, 'no imaging batches yet');
      for (const r of rows)
        out(
          ctx,
          `${r.id}  ${r.status.padEnd(10)}  documents ${r.documents}  loans ${r.loans}  bytes ${r.bytes}  ` +
            `sealed ${r.sealedAt ?? '-'}  ${r.sealReason ?? ''}`,
        );
    });

  group
    .command('show')
    .description('one imaging batch, or where each document of a loan went (batch, file, type, sha256)')
    .argument('<id>', 'batch id (yyyy-mm-dd-nnnn) or loan id')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const { exporter } = await openImagingSession(ctx, { platform: false });
      const v = await showImaging(exporter, id);
      if (opts.json) return out(ctx, JSON.stringify(v, null, 2));
      if (v.batch)
        for (const [k, val] of Object.entries(v.batch)) out(ctx, `${k}: ${val === null ? '-' : String(val)}`);
      for (const d of v.documents) {
        const again =
          d.reexport > 0
            ? `  re-export #${d.reexport} by ${d.reexportBy ?? '?'}: ${d.reexportReason ?? ''}`
            : '';
        out(
          ctx,
          `  ${d.loanId}  ${d.documentId}  → ${d.batchId} (${d.batchStatus})  ${d.fileName}  ` +
            `${d.documentType}${d.defaultType ? ' (default type)' : ''}  sha256 ${d.sha256}${again}`,
        );
      }
    });

  group
    .command('reexport')
    .description(
      "send a loan's documents to imaging again, fetched from the platform into a new batch " +
        '(audited: --reason and the operator are kept on each document and in the loan history)',
    )
    .requiredOption('--loan <id>', 'the loan')
    .option('--document <id...>', 'only these documents (default: all the platform lists)')
    .requiredOption('--reason <text>', 'why (audited)')
    .option('--by <name>', 'operator (default: $USER)')
    .action(async (opts: { loan: string; document?: string[]; reason: string; by?: string }) => {
      const s = await openImagingSession(ctx, { platform: true });
      if (s.fetchInput === undefined) throw new UsageError('imaging reexport: no platform');
      const by = opts.by ?? ctx.env['USER'] ?? ctx.env['USERNAME'] ?? 'ops';
      const r = await reexportLoan(
        { exporter: s.exporter, store: s.store, fetchInput: s.fetchInput, now: () => ctx.clock.now() },
        {
          loanId: opts.loan,
          reason: opts.reason,
          by,
          ...(opts.document ? { documentIds: opts.document } : {}),
        },
      );
      out(
        ctx,
        r.documents.length === 0
          ? `nothing re-exported for ${opts.loan} (its documents are already in the open batch, or it has none)`
          : `re-exported ${r.documents.length} document(s) of ${opts.loan} in batch ${r.batchId ?? '-'}`,
      );
    });
}
