/**
 * The file core's batches as an operator reads them: `batches list|show` (BatchView, from the file
 * core's batch store) and the console's Batches page (BatchListItem, from the core's batching
 * capability, with the files of sealed batches). The seal is ops/seal.ts.
 */
import type { FileBatches } from '../core/file/batches.js';
import type { BatchingCapability } from '../core/port.js';
import type { FileBatchRow } from '../store/file-batches.js';
import { FatalError } from '../lib/errors.js';

export type { FileBatches };

/** One batch of the console's Batches page (its JSON API's shape). */
export interface BatchListItem {
  id: string;
  status: 'open' | 'sealing' | 'sealed';
  openedAt: string;
  cutoffAt: string;
  sealedAt: string | null;
  sealReason: string | null;
  sealedBy: string | null;
  loanCount: number;
  recordCount: number;
  principalCents: string | null;
  /** Files of a sealed batch, with their control totals when the layout writes them. */
  files: Array<{ name: string; bytes: number }>;
}

/** The newest batches for the console's Batches page (empty without a batching core). */
export async function listBatchItems(
  batching: Pick<BatchingCapability, 'list'> | undefined,
  limit: number,
): Promise<BatchListItem[]> {
  if (!batching) return [];
  const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());
  return (await batching.list(limit)).map((b) => ({
    id: b.id,
    status: b.status,
    openedAt: iso(b.openedAt) as string,
    cutoffAt: iso(b.cutoffAt) as string,
    sealedAt: iso(b.sealedAt),
    sealReason: b.sealReason,
    sealedBy: b.sealedBy,
    loanCount: b.loanCount,
    recordCount: b.recordCount,
    principalCents: b.principalCents,
    files: b.files,
  }));
}

/** One batch as `batches list|show` prints it. */
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
