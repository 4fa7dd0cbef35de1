import { imagingDocumentView } from '../ops/imaging.js';
import { ImagingStore } from '../store/imaging.js';
import type { StoreDb } from '../store/sql.js';
import type { LoanDocuments, LoanHistoryEvent } from './contract.js';

/**
 * Where a loan's documents went, for the loan page (issue 45): the count its last core write took
 * (the `written` transition's detail) and each document's imaging export (batch, file, type,
 * re-exports), from the imaging tables.
 */
export async function loanDocuments(
  db: StoreDb,
  loanId: string,
  events: readonly LoanHistoryEvent[],
  imagingEnabled: boolean,
): Promise<LoanDocuments> {
  let writtenToCore: number | null = null;
  for (const e of events)
    if (e.kind === 'transition' && e.toState === 'written') {
      const n = (e.detail as { documents?: unknown } | null)?.documents;
      writtenToCore = typeof n === 'number' ? n : writtenToCore;
    }
  const store = new ImagingStore(db);
  const rows = await store.documentsOfLoan(loanId);
  const listed = await db.get<{ n: number }>(
    `SELECT documents AS n FROM imaging_loans WHERE loan_id = ? ORDER BY exported_at DESC LIMIT 1`,
    [loanId],
  );
  return {
    writtenToCore,
    listed: listed === undefined ? null : Number(listed.n),
    imagingEnabled,
    imaging: rows.map((d) => {
      const v = imagingDocumentView(d);
      return {
        documentId: v.documentId,
        batchId: v.batchId,
        batchStatus: v.batchStatus,
        fileName: v.fileName,
        documentType: v.documentType,
        defaultType: v.defaultType,
        sha256: v.sha256,
        reexport: v.reexport,
        reexportBy: v.reexportBy,
      };
    }),
  };
}
