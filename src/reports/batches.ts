import type { BatchTieRows } from '../store/file-batches.js';

/**
 * File core batches in the reconciliation report: sealed batches tied to the loans the connector
 * boarded (count and principal), and the loans boarded but in no sealed batch although their
 * batch's cut-off has passed (the core's import job will not see them until the batch is sealed).
 * A separate section: absent when the file core writes no batches.
 */
export interface BatchTieSection {
  sealedBatches: number;
  /** First boards (not corrections) in sealed batches, and in batches frozen for their seal. */
  sealed: { count: number; cents: string };
  corrections: number;
  /** First boards in the open batch, before its cut-off. */
  open: { count: number; cents: string; batchId: string | null; cutoffAt: string | null };
  /** Loans acknowledged to the platform (connector state). */
  acknowledged: { count: number; cents: string };
  /** sealed + open = acknowledged, count and principal. */
  ties: boolean;
  /** Acknowledged loans whose batch is past its cut-off and not sealed, or that are in no batch at all. */
  notSealedPastCutoff: Array<{ loanId: string; batchId: string | null; cutoffAt: string | null }>;
}

/** The section from the store's rows (FileBatchStore.tieOut); null when the file core writes no batches. */
export function computeBatchTie(rows: BatchTieRows | null): BatchTieSection | null {
  if (rows === null) return null;
  // Stored as integer cents; anything else (never written by the file core) counts as 0, not a crash.
  const cents = (v: string | number | null): bigint =>
    (typeof v === 'number' && Number.isSafeInteger(v)) || (typeof v === 'string' && /^-?\d+$/.test(v))
      ? BigInt(v)
      : 0n;
  const sum = (rows: Array<{ cents: string | number | null }>): string =>
    rows.reduce((s, r) => s + cents(r.cents), 0n).toString();

  const {
    sealedCents: sealedRows,
    corrections,
    open,
    openCents: openRows,
    acknowledgedCents: acked,
    notSealedPastCutoff: missing,
  } = rows;
  const sealed = { count: sealedRows.length, cents: sum(sealedRows) };
  const openPart = {
    count: openRows.length,
    cents: sum(openRows),
    batchId: open?.id ?? null,
    cutoffAt: open ? new Date(open.cutoffAt).toISOString() : null,
  };
  const acknowledged = { count: acked.length, cents: sum(acked) };
  return {
    sealedBatches: rows.sealedBatches,
    sealed,
    corrections,
    open: openPart,
    acknowledged,
    ties:
      sealed.count + openPart.count === acknowledged.count &&
      BigInt(sealed.cents) + BigInt(openPart.cents) === BigInt(acknowledged.cents),
    notSealedPastCutoff: missing.map((m) => ({
      loanId: m.loanId,
      batchId: m.batchId,
      cutoffAt: m.cutoffAt === null ? null : new Date(m.cutoffAt).toISOString(),
    })),
  };
}

/** Notes for the report when the batches do not tie (the details are in the section). */
export function batchTieNotes(s: BatchTieSection | null): string[] {
  if (s === null) return [];
  const notes: string[] = [];
  if (s.notSealedPastCutoff.length > 0) {
    notes.push(
      `${s.notSealedPastCutoff.length} boarded loan(s) are in no sealed batch although the cut-off has ` +
        `passed (the core's import job has not received them): ${s.notSealedPastCutoff
          .slice(0, 10)
          .map((m) => m.loanId)
          .join(', ')}${s.notSealedPastCutoff.length > 10 ? ', …' : ''}`,
    );
  }
  if (!s.ties)
    notes.push(
      `file batches do not tie: sealed ${s.sealed.count} + open ${s.open.count} loan(s) vs ` +
        `${s.acknowledged.count} acknowledged (principal ` +
        `${BigInt(s.sealed.cents) + BigInt(s.open.cents)} vs ${s.acknowledged.cents} cents)`,
    );
  return notes;
}
