import type { Command } from 'commander';
import { openFileBatches } from '../app/session.js';
import type { FileBatches } from '../core/file/batches.js';
import { FatalError, UsageError } from '../lib/errors.js';
import { loadLayout } from '../mapping-sets/loader.js';
import type { FileBatchRow } from '../store/file-batches.js';
import { out, type CliContext } from './context.js';

async function openBatches(ctx: CliContext): Promise<FileBatches> {
  const config = ctx.config();
  if (config.core.adapter !== 'file') throw new UsageError('batches: core.adapter is not file');
  const layout = loadLayout(config.mappings.dir, { timeZone: config.bank.timeZone });
  if (layout === undefined)
    throw new FatalError(
      `batches: the mapping set ${config.mappings.dir} declares no layout.yaml, so the file core writes no batches`,
    );
  const batches = await openFileBatches(ctx, layout);
  if (batches === undefined) throw new FatalError('batches: core.file.csvBatches is false');
  return batches;
}

interface BatchView {
  id: string;
  status: string;
  openedAt: string;
  cutoffAt: string;
  /** When it stopped taking boards (the cut-off job, a board past the cut-off, a changed layout, or ops). */
  frozenAt: string | null;
  /** When its files, control.csv and trigger file were complete (later than frozenAt after a crash mid-seal). */
  sealedAt: string | null;
  sealReason: string | null;
  sealedBy: string | null;
  loans: number;
  corrections: number;
  records: number;
  principalCents: string | null;
  triggerFile: boolean;
}

async function view(batches: FileBatches, b: FileBatchRow): Promise<BatchView> {
  const counts = await batches.store.counts(b.id);
  return {
    id: b.id,
    status: b.status,
    openedAt: new Date(b.openedAt).toISOString(),
    cutoffAt: new Date(b.cutoffAt).toISOString(),
    frozenAt: b.sealingAt === null ? null : new Date(b.sealingAt).toISOString(),
    sealedAt: b.sealedAt === null ? null : new Date(b.sealedAt).toISOString(),
    sealReason: b.sealReason,
    sealedBy: b.sealedBy,
    loans: counts.loans,
    corrections: counts.corrections,
    records: counts.records,
    // Totals are fixed at the seal; an open batch shows what it holds so far.
    principalCents: b.principalCents ?? (await batches.store.principalOf(b.id)),
    triggerFile: b.status === 'open' ? false : await batches.triggerPresent(b.id),
  };
}

export function registerBatchesCommands(program: Command, ctx: CliContext): void {
  const group = program
    .command('batches')
    .description('file core batches: list, show, seal early (docs/core.md)');

  group
    .command('list')
    .description(
      'batches newest first: status (open, sealing, sealed), loans, corrections, records, principal, trigger file present',
    )
    .option('--limit <n>', 'how many', (v) => Number(v), 30)
    .option('--json', 'print JSON')
    .action(async (opts: { limit: number; json?: boolean }) => {
      const batches = await openBatches(ctx);
      const rows = await Promise.all((await batches.store.list(opts.limit)).map((b) => view(batches, b)));
      if (opts.json) return out(ctx, JSON.stringify(rows, null, 2));
      if (rows.length === 0) return out(ctx, 'no batches yet');
      for (const r of rows) {
        out(
          ctx,
          `${r.id}  ${r.status.padEnd(7)}  loans ${r.loans}  corrections ${r.corrections}  records ${r.records}  principal_cents ${r.principalCents ?? '-'}  cutoff ${r.cutoffAt}  trigger ${r.triggerFile ? 'yes' : 'no'}`,
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
      const b = await batches.store.get(id);
      if (b === undefined) throw new FatalError(`batches show: no batch ${id}`);
      const loanRows = [];
      for await (const l of batches.store.loansOf(id)) loanRows.push(l);
      const loans = loanRows.map((l) => ({
        loanId: l.loanId,
        kind: l.kind,
        records: l.recordCount,
        principalCents: l.principalCents,
        boardedAt: new Date(l.boardedAt).toISOString(),
      }));
      const v = { ...(await view(batches, b)), dir: batches.batchDir(id), loanList: loans };
      if (opts.json) return out(ctx, JSON.stringify(v, null, 2));
      const { loanList: _l, ...fields } = v;
      for (const [k, val] of Object.entries<string | number | boolean | null>(fields))
        out(ctx, `${k}: ${val === null ? '-' : String(val)}`);
      for (const l of loans)
        out(
          ctx,
          `  ${l.loanId}  ${l.kind}  records ${l.records}  principal_cents ${l.principalCents ?? '-'}  boarded ${l.boardedAt}`,
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
      const id = await batches.sealNow(opts.reason, by, opts.id);
      if (id === undefined)
        throw new FatalError(
          opts.id ? `batches seal: ${opts.id} is not the open batch` : 'batches seal: no open batch',
        );
      out(ctx, `sealed ${id} (${batches.batchDir(id)})`);
    });
}
