import type { ImagingExport } from '../imaging/export.js';
import { UsageError } from '../lib/errors.js';
import type { MappingInput } from '../mapping/types.js';
import type { BoardingStore } from '../store/index.js';
import type { ImagingBatchRow, ImagingBatchStatus, ImagingDocumentRow } from '../store/imaging.js';
import type { LoanStore } from '../store/loans.js';
import type { OpPlan } from './loan-plan.js';
import { acknowledgedOnly } from './reboard.js';

/**
 * Operator actions on the imaging export (docs/imaging.md): batches and where each document went,
 * and the audited re-export. Data only: the CLI renders it, the console can wrap it.
 */

export interface ImagingBatchView {
  id: string;
  status: ImagingBatchRow['status'];
  openedAt: string;
  cutoffAt: string | null;
  sealedAt: string | null;
  sealReason: string | null;
  sealedBy: string | null;
  documents: number;
  loans: number;
  bytes: number;
  folder: string;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

async function view(exporter: ImagingExport, b: ImagingBatchRow): Promise<ImagingBatchView> {
  const c = await exporter.store.counts(b.id);
  return {
    id: b.id,
    status: b.status,
    openedAt: iso(b.openedAt) as string,
    cutoffAt: iso(b.cutoffAt),
    sealedAt: iso(b.sealedAt),
    sealReason: b.sealReason,
    sealedBy: b.sealedBy,
    documents: c.documents,
    loans: c.loans,
    bytes: c.bytes,
    folder: exporter.batchDir(b.id),
  };
}

export async function listImagingBatches(
  exporter: ImagingExport,
  limit: number,
): Promise<ImagingBatchView[]> {
  return Promise.all((await exporter.store.list(limit)).map((b) => view(exporter, b)));
}

export interface ImagingDocumentView {
  loanId: string;
  documentId: string;
  batchId: string;
  batchStatus: string;
  fileName: string;
  documentType: string;
  defaultType: boolean;
  sha256: string;
  bytes: number;
  exportedAt: string;
  /** 0: the first export; n: the n-th re-export (by whom and why). */
  reexport: number;
  reexportBy: string | null;
  reexportReason: string | null;
}

/** One exported document as the CLI and the console show it (where it went, under which type). */
export function imagingDocumentView(
  d: ImagingDocumentRow & { status: ImagingBatchStatus },
): ImagingDocumentView {
  return {
    loanId: d.loanId,
    documentId: d.documentId,
    batchId: d.batchId,
    batchStatus: d.status,
    fileName: d.fileName,
    documentType: d.documentType,
    defaultType: d.fellBack,
    sha256: d.sha256,
    bytes: d.bytes,
    exportedAt: new Date(d.exportedAt).toISOString(),
    reexport: d.reexport,
    reexportBy: d.reexportBy,
    reexportReason: d.reexportReason,
  };
}

/** A batch, or a loan's documents (where each went): `id` is a batch id or a loan id. */
export async function showImaging(
  exporter: ImagingExport,
  id: string,
): Promise<{ batch: ImagingBatchView | null; documents: ImagingDocumentView[] }> {
  const batch = /^\d{4}-\d{2}-\d{2}-\d{4,}$/.test(id) ? await exporter.store.get(id) : undefined;
  const rows =
    batch !== undefined
      ? (await exporter.store.documentsOf(id)).map((d) => ({ ...d, status: batch.status }))
      : await exporter.store.documentsOfLoan(id);
  if (batch === undefined && rows.length === 0)
    throw new UsageError(
      `imaging show: ${id} is neither an imaging batch nor a loan with exported documents`,
    );
  return {
    batch: batch === undefined ? null : await view(exporter, batch),
    documents: rows.map(imagingDocumentView),
  };
}

/**
 * Whether a four-eyes re-export would take this loan: an acknowledged loan (its documents went with
 * its board). Changes nothing.
 */
export function planReexport(loans: Pick<LoanStore, 'get'>, id: string): Promise<OpPlan> {
  return acknowledgedOnly(loans, id, 're-exported to imaging');
}

export interface ReexportRequest {
  loanId: string;
  /** Only these documents (default: every document of the loan the platform lists now). */
  documentIds?: readonly string[];
  reason: string;
  by: string;
}

/**
 * Sends a loan's documents to imaging again (the importer lost them, a document type was wrong):
 * fetched again from the platform into a new batch, marked as the n-th re-export with who and why,
 * and audited in the loan's history. The first export's rows stay: the tie-out counts first exports.
 */
export async function reexportLoan(
  deps: {
    exporter: ImagingExport;
    store: BoardingStore;
    fetchInput: (loanId: string, signal?: AbortSignal) => Promise<MappingInput>;
    now: () => number;
  },
  req: ReexportRequest,
): Promise<{ batchId: string | null; documents: string[] }> {
  if (req.reason.trim() === '')
    throw new UsageError('imaging reexport: --reason must say why (it is audited)');
  const loan = await deps.store.loans.get(req.loanId);
  if (loan === undefined || loan === null)
    throw new UsageError(`imaging reexport: unknown loan ${req.loanId}`);
  const input = await deps.fetchInput(req.loanId);
  const known = new Set(input.documents.map((d) => d.id));
  const missing = (req.documentIds ?? []).filter((d) => !known.has(d));
  if (missing.length > 0)
    throw new UsageError(
      `imaging reexport: loan ${req.loanId} has no document ${missing.join(', ')} on the platform`,
    );
  const r = await deps.exporter.exportLoan(
    {
      loanId: req.loanId,
      releaseMarker: loan.releaseMarker ?? 'release',
      loan: input.loan,
      entities: input.entities,
      documents: input.documents,
      identity: input.identity,
    },
    undefined,
    { by: req.by, reason: req.reason, ...(req.documentIds ? { documentIds: req.documentIds } : {}) },
  );
  await deps.store.loans.recordEvent(
    req.loanId,
    {
      kind: 'ops',
      reason: `imaging reexport: ${req.reason}`,
      actor: req.by,
      detail: { batchId: r.batchId, documents: r.exported, skipped: r.skipped },
    },
    deps.now(),
  );
  return { batchId: r.batchId, documents: r.exported };
}
