/**
 * The file core's batches as an operator reads them: `batches list|show` (the seal is ops/seal.ts).
 */
import type { FileBatches } from '../core/file/batches.js';
import type { FileBatchRow } from '../store/file-batches.js';
import { FatalError } from '../lib/errors.js';

export type { FileBatches };

export interface BatchView {
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

async function batchView(batches: FileBatches, b: FileBatchRow): Promise<BatchView> {
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

export async function listBatches(batches: FileBatches, limit: number): Promise<BatchView[]> {
  return Promise.all((await batches.store.list(limit)).map((b) => batchView(batches, b)));
}

/** One batch with its directory and loans; a FatalError when there is no such batch. */
export async function showBatch(batches: FileBatches, id: string) {
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
  return { ...(await batchView(batches, b)), dir: batches.batchDir(id), loanList: loans };
}
