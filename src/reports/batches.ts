import type { Db } from '../store/db.js';

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

export function computeBatchTie(db: Db, asOfMs: number): BatchTieSection | null {
  const batches = (db.prepare(`SELECT COUNT(*) AS n FROM file_batches`).get() as { n: number }).n;
  if (batches === 0) return null;
  // Stored as integer cents; anything else (never written by the file core) counts as 0, not a crash.
  const cents = (v: string | number | null): bigint => (typeof v === 'number' && Number.isSafeInteger(v)) || (typeof v === 'string' && /^-?\d+$/.test(v)) ? BigInt(v) : 0n;
  const sum = (rows: Array<{ cents: string | number | null }>): string => rows.reduce((s, r) => s + cents(r.cents), 0n).toString();

  const sealedRows = db
    .prepare(`SELECT l.principal_cents AS cents FROM file_batch_loans l JOIN file_batches b ON b.id = l.batch_id WHERE b.status IN ('sealed', 'sealing') AND l.kind = 'new'`)
    .all() as Array<{ cents: string | null }>;
  const corrections = (db.prepare(`SELECT COUNT(*) AS n FROM file_batch_loans l JOIN file_batches b ON b.id = l.batch_id WHERE b.status IN ('sealed', 'sealing') AND l.kind = 'correction'`).get() as { n: number }).n;
  const open = db.prepare(`SELECT id, cutoff_at AS cutoffAt FROM file_batches WHERE status = 'open'`).get() as { id: string; cutoffAt: number } | undefined;
  const openRows = open && open.cutoffAt > asOfMs
    ? (db.prepare(`SELECT principal_cents AS cents FROM file_batch_loans WHERE batch_id = ? AND kind = 'new'`).all(open.id) as Array<{ cents: string | null }>)
    : [];
  const acked = db.prepare(`SELECT cents_amount AS cents FROM loans WHERE state = 'acknowledged'`).all() as Array<{ cents: number | null }>;
  // A loan's first board sits in one batch; past the cut-off without a seal, or in none at all.
  const missing = db
    .prepare(
      `SELECT lo.id AS loanId, b.id AS batchId, b.cutoff_at AS cutoffAt
         FROM loans lo
         LEFT JOIN file_batch_loans l ON l.loan_id = lo.id AND l.kind = 'new'
         LEFT JOIN file_batches b ON b.id = l.batch_id
        WHERE lo.state = 'acknowledged'
          AND (l.loan_id IS NULL OR (b.status <> 'sealed' AND b.cutoff_at <= ?))
        ORDER BY lo.id`,
    )
    .all(asOfMs) as Array<{ loanId: string; batchId: string | null; cutoffAt: number | null }>;

  const sealed = { count: sealedRows.length, cents: sum(sealedRows) };
  const openPart = { count: openRows.length, cents: sum(openRows), batchId: open?.id ?? null, cutoffAt: open ? new Date(open.cutoffAt).toISOString() : null };
  const acknowledged = { count: acked.length, cents: sum(acked) };
  return {
    sealedBatches: (db.prepare(`SELECT COUNT(*) AS n FROM file_batches WHERE status = 'sealed'`).get() as { n: number }).n,
    sealed,
    corrections,
    open: openPart,
    acknowledged,
    ties: sealed.count + openPart.count === acknowledged.count && BigInt(sealed.cents) + BigInt(openPart.cents) === BigInt(acknowledged.cents),
    notSealedPastCutoff: missing.map((m) => ({ loanId: m.loanId, batchId: m.batchId, cutoffAt: m.cutoffAt === null ? null : new Date(m.cutoffAt).toISOString() })),
  };
}

/** Notes for the report when the batches do not tie (the details are in the section). */
export function batchTieNotes(s: BatchTieSection | null): string[] {
  if (s === null) return [];
  const notes: string[] = [];
  if (s.notSealedPastCutoff.length > 0) {
    notes.push(`${s.notSealedPastCutoff.length} boarded loan(s) are in no sealed batch although the cut-off has passed (the core's import job has not received them): ${s.notSealedPastCutoff.slice(0, 10).map((m) => m.loanId).join(', ')}${s.notSealedPastCutoff.length > 10 ? ', …' : ''}`);
  }
  if (!s.ties) notes.push(`file batches do not tie: sealed ${s.sealed.count} + open ${s.open.count} loan(s) vs ${s.acknowledged.count} acknowledged (principal ${BigInt(s.sealed.cents) + BigInt(s.open.cents)} vs ${s.acknowledged.cents} cents)`);
  return notes;
}
