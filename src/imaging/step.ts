import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { redactForStorage } from '../lib/redact.js';
import type { MappingInput } from '../mapping/types.js';
import type { BoardingStore } from '../store/index.js';
import type { LoanRow } from '../store/loans.js';
import type { ImagingExport, LoanExportResult } from './export.js';

/**
 * The pipeline's imaging step (board-loan.ts calls it after the core write, before the ack): a
 * loan's release is exported once (imaging_loans), so a retry of the acknowledgement costs one
 * read. `input` is what the core write just fetched and mapped; after a restart between the write
 * and the ack it is fetched again (the loan, its entities, its documents list) with the CIFs the
 * customer match recorded.
 */
export interface ImagingStep {
  exportLoan(row: LoanRow, input: MappingInput | undefined, signal: AbortSignal): Promise<void>;
}

export function createImagingStep(deps: {
  exporter: ImagingExport;
  /** The loan's mapping input read again (loan, entities, documents) when the attempt has none. */
  fetchInput: (row: LoanRow, signal: AbortSignal) => Promise<Omit<MappingInput, 'identity'>>;
  store: BoardingStore;
  clock: Clock;
  logger: Logger;
}): ImagingStep {
  const { exporter, store, clock } = deps;
  return {
    async exportLoan(row, given, signal) {
      const release = row.releaseMarker ?? 'release';
      if (await exporter.loanExported(row.id, release)) {
        // Committed before a crash or a failed write: its folder is written before the ack.
        await exporter.finishLoan(row.id);
        return;
      }
      const input = given ?? (await refetch(row, signal));
      const result = await exporter.exportLoan(
        {
          loanId: row.id,
          releaseMarker: release,
          loan: input.loan,
          entities: input.entities,
          documents: input.documents,
          identity: input.identity,
        },
        signal,
      );
      await recordReviews(row.id, result);
    },
  };

  async function refetch(row: LoanRow, signal: AbortSignal): Promise<MappingInput> {
    const input = await deps.fetchInput(row, signal);
    const customers: Record<string, { cif: string | null; matchedBy: string; existing: boolean }> = {};
    for (const c of await store.customers.forLoan(row.id))
      customers[c.entityId] = { cif: c.cif, matchedBy: c.matchedBy, existing: c.existing };
    return {
      ...input,
      identity: { accountNumber: row.accountNumber, customers } as NonNullable<MappingInput['identity']>,
    };
  }

  async function recordReviews(loanId: string, result: LoanExportResult): Promise<void> {
    if (result.reviews.length === 0) return;
    await store.loans.recordEvent(
      loanId,
      {
        kind: 'warning',
        reason: `${result.reviews.length} imaging review item(s)`,
        detail: {
          warnings: result.reviews.slice(0, 50).map((r) => ({
            code: 'imaging_document_type',
            field: `document.${r.documentId}`,
            message: redactForStorage(r.message),
            at: 'imaging',
          })),
        },
      },
      clock.now(),
    );
  }
}
