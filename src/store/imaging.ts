import type { StoreDb } from './sql.js';

/**
 * The imaging export's batches and documents (migration 20; src/imaging/export.ts writes the
 * folders). Every decision that must be atomic (which batch a document goes to, is it exported
 * already, is the open batch past its cut-off or full) is one write transaction, so a crash at any
 * instant and a second replica leave one answer: a document is in at most one first export, a
 * batch is frozen once, and its folder is a pure function of its frozen rows.
 */

export type ImagingBatchStatus = 'open' | 'sealing' | 'publishing' | 'sealed';

export interface ImagingBatchRow {
  id: string;
  status: ImagingBatchStatus;
  openedAt: number;
  cutoffAt: number | null;
  sealingAt: number | null;
  sealedAt: number | null;
  sealReason: string | null;
  sealedBy: string | null;
  layout: string;
}

export interface ImagingDocumentRow {
  batchId: string;
  loanId: string;
  documentId: string;
  seq: number;
  fileName: string;
  stagedPath: string;
  sha256: string;
  bytes: number;
  documentType: string;
  fellBack: boolean;
  record: string;
  reexport: number;
  reexportBy: string | null;
  reexportReason: string | null;
  exportedAt: number;
}

/** One document a board puts into a batch (its file already staged and fsynced). */
export interface StagedDocument {
  documentId: string;
  fileName: string;
  stagedPath: string;
  sha256: string;
  bytes: number;
  documentType: string;
  fellBack: boolean;
  /** The record's field values, sealed with the batch's key once the batch is known. */
  record(batchId: string): string;
}

export interface ImagingAppendInput {
  loanId: string;
  releaseMarker: string;
  /** All of the loan's documents at this release (the tie-out's "fetched"). */
  documentCount: number;
  now: number;
  layout: string;
  mode: 'loan' | 'batch';
  maxDocuments: number;
  openBatch(now: number): { cutoffAt: number | null; day: string };
  docs: readonly StagedDocument[];
  /** An audited re-export: the documents go out again (the n-th time), under who and why. */
  reexport?: { by: string; reason: string };
}

export interface ImagingAppendResult {
  batchId: string | null;
  added: string[];
  /** Documents left out: exported before (or already in the open batch, for a re-export). */
  skipped: string[];
  /** Batches this call froze (a loan's own batch, a cut-off, a full batch): their folders must now be written. */
  frozen: string[];
}

const BATCH_COLS = `id, status, opened_at AS "openedAt", cutoff_at AS "cutoffAt", sealing_at AS "sealingAt",
  sealed_at AS "sealedAt", seal_reason AS "sealReason", sealed_by AS "sealedBy", layout`;
const DOC_FIELDS: Array<[column: string, alias: string]> = [
  ['batch_id', 'batchId'],
  ['loan_id', 'loanId'],
  ['document_id', 'documentId'],
  ['seq', 'seq'],
  ['file_name', 'fileName'],
  ['staged_path', 'stagedPath'],
  ['sha256', 'sha256'],
  ['bytes', 'bytes'],
  ['document_type', 'documentType'],
  ['fell_back', 'fellBack'],
  ['record', 'record'],
  ['reexport', 'reexport'],
  ['reexport_by', 'reexportBy'],
  ['reexport_reason', 'reexportReason'],
  ['exported_at', 'exportedAt'],
];
// Quoted aliases: PostgreSQL folds unquoted names to lower case.
const docCols = (prefix = ''): string => DOC_FIELDS.map(([c, a]) => `${prefix}${c} AS "${a}"`).join(', ');
const DOC_COLS = docCols();

type RawDoc = Omit<ImagingDocumentRow, 'fellBack'> & { fellBack: number | boolean };
const docOf = (r: RawDoc): ImagingDocumentRow => ({
  ...r,
  seq: Number(r.seq),
  bytes: Number(r.bytes),
  reexport: Number(r.reexport),
  exportedAt: Number(r.exportedAt),
  fellBack: Number(r.fellBack) === 1,
});
const batchOf = (r: ImagingBatchRow): ImagingBatchRow => ({
  ...r,
  openedAt: Number(r.openedAt),
  cutoffAt: r.cutoffAt === null ? null : Number(r.cutoffAt),
  sealingAt: r.sealingAt === null ? null : Number(r.sealingAt),
  sealedAt: r.sealedAt === null ? null : Number(r.sealedAt),
});

/** Per loan: documents the platform listed, and those exported (first exports). */
export interface ImagingLoanTie {
  loanId: string;
  /** -1: the loan went through no export (boarded before imaging was on, or it was skipped). */
  listed: number;
  /** Documents the core write took (null: not recorded, e.g. found in the core after an uncertain write). */
  writtenToCore: number | null;
  exported: number;
  /** In a batch whose folder is published (the importer can take it). */
  published: number;
}

export class ImagingStore {
  constructor(private readonly db: StoreDb) {}

  async get(id: string): Promise<ImagingBatchRow | undefined> {
    const r = await this.db.get<ImagingBatchRow>(`SELECT ${BATCH_COLS} FROM imaging_batches WHERE id = ?`, [
      id,
    ]);
    return r && batchOf(r);
  }

  async open(): Promise<ImagingBatchRow | undefined> {
    const r = await this.db.get<ImagingBatchRow>(
      `SELECT ${BATCH_COLS} FROM imaging_batches WHERE status = 'open'`,
    );
    return r && batchOf(r);
  }

  /** Newest first. */
  async list(limit = 100, status?: ImagingBatchStatus): Promise<ImagingBatchRow[]> {
    const rows = await this.db.all<ImagingBatchRow>(
      `SELECT ${BATCH_COLS} FROM imaging_batches ${status ? 'WHERE status = ?' : ''} ` +
        `ORDER BY opened_at DESC, id DESC LIMIT ?`,
      status ? [status, limit] : [limit],
    );
    return rows.map(batchOf);
  }

  /** Frozen batches whose folders are not known to be complete. */
  async unfinished(): Promise<ImagingBatchRow[]> {
    const rows = await this.db.all<ImagingBatchRow>(
      `SELECT ${BATCH_COLS} FROM imaging_batches WHERE status IN ('sealing', 'publishing') ORDER BY opened_at, id`,
    );
    return rows.map(batchOf);
  }

  /** The frozen batches holding a loan's documents whose folders are not known to be complete. */
  async unfinishedOfLoan(loanId: string): Promise<string[]> {
    const rows = await this.db.all<{ id: string }>(
      `SELECT DISTINCT b.id FROM imaging_batches b JOIN imaging_documents d ON d.batch_id = b.id ` +
        `WHERE d.loan_id = ? AND b.status IN ('sealing', 'publishing') ORDER BY b.id`,
      [loanId],
    );
    return rows.map((r) => r.id);
  }

  async documentsOf(batchId: string): Promise<ImagingDocumentRow[]> {
    const rows = await this.db.all<RawDoc>(
      `SELECT ${DOC_COLS} FROM imaging_documents WHERE batch_id = ? ORDER BY seq`,
      [batchId],
    );
    return rows.map(docOf);
  }

  async documentsOfLoan(loanId: string): Promise<Array<ImagingDocumentRow & { status: ImagingBatchStatus }>> {
    const rows = await this.db.all<RawDoc & { status: ImagingBatchStatus }>(
      `SELECT ${docCols('d.')}, b.status FROM imaging_documents d ` +
        `JOIN imaging_batches b ON b.id = d.batch_id WHERE d.loan_id = ? ORDER BY d.exported_at, d.seq`,
      [loanId],
    );
    return rows.map((r) => ({ ...docOf(r), status: r.status }));
  }

  async loanExported(loanId: string, releaseMarker: string): Promise<boolean> {
    return (
      (await this.db.get(`SELECT 1 AS one FROM imaging_loans WHERE loan_id = ? AND release_marker = ?`, [
        loanId,
        releaseMarker,
      ])) !== undefined
    );
  }

  /** Ids of the loan's documents already exported (first exports), to fetch only the new ones. */
  async exportedIds(loanId: string): Promise<Set<string>> {
    const rows = await this.db.all<{ id: string }>(
      `SELECT document_id AS id FROM imaging_documents WHERE loan_id = ? AND reexport = 0`,
      [loanId],
    );
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Puts a loan's staged documents into a batch, in one transaction: documents exported before are
   * left out (a re-board, a crash after the commit, another replica); a loan's own batch is created
   * frozen; the open batch is frozen first when past its cut-off or in another layout, and after
   * when it holds maxDocuments. Records the loan's release as exported.
   */
  append(input: ImagingAppendInput): Promise<ImagingAppendResult> {
    return this.db.write(async (): Promise<ImagingAppendResult> => {
      const frozen: string[] = [];
      const skipped: string[] = [];
      const docs: StagedDocument[] = [];
      for (const d of input.docs) {
        const n = await this.db.get<{ n: number | null; inOpen: number | null }>(
          `SELECT MAX(d.reexport) AS n, MAX(CASE WHEN b.status = 'open' THEN 1 ELSE 0 END) AS "inOpen" ` +
            `FROM imaging_documents d JOIN imaging_batches b ON b.id = d.batch_id ` +
            `WHERE d.loan_id = ? AND d.document_id = ?`,
          [input.loanId, d.documentId],
        );
        const exportedBefore = n !== undefined && n.n !== null;
        if (input.reexport === undefined ? exportedBefore : Number(n?.inOpen ?? 0) === 1)
          skipped.push(d.documentId);
        else docs.push(d);
      }
      let batch: ImagingBatchRow | undefined;
      if (docs.length > 0) {
        if (input.mode === 'loan') {
          batch = await this.create(input.now, input.openBatch(input.now), input.layout, 'sealing', 'loan');
          frozen.push(batch.id);
        } else {
          let open = await this.open();
          const reason =
            open === undefined
              ? null
              : open.cutoffAt !== null && open.cutoffAt <= input.now
                ? 'cutoff'
                : open.layout !== input.layout
                  ? 'layout changed'
                  : null;
          if (open !== undefined && reason !== null) {
            await this.freeze(open.id, input.now, reason, 'connector');
            frozen.push(open.id);
            open = undefined;
          }
          batch =
            open ?? (await this.create(input.now, input.openBatch(input.now), input.layout, 'open', null));
        }
        const base = Number(
          (
            await this.db.get<{ n: number | null }>(
              `SELECT MAX(seq) AS n FROM imaging_documents WHERE batch_id = ?`,
              [batch.id],
            )
          )?.n ?? 0,
        );
        let seq = base;
        for (const d of docs) {
          seq += 1;
          const prior = await this.db.get<{ n: number | null }>(
            `SELECT MAX(reexport) AS n FROM imaging_documents WHERE loan_id = ? AND document_id = ?`,
            [input.loanId, d.documentId],
          );
          const reexport = input.reexport === undefined ? 0 : Number(prior?.n ?? -1) + 1;
          await this.db.run(
            `INSERT INTO imaging_documents (batch_id, loan_id, document_id, seq, file_name, staged_path, sha256,
               bytes, document_type, fell_back, record, reexport, reexport_by, reexport_reason, exported_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            [
              batch.id,
              input.loanId,
              d.documentId,
              seq,
              d.fileName,
              d.stagedPath,
              d.sha256,
              d.bytes,
              d.documentType,
              d.fellBack ? 1 : 0,
              d.record(batch.id),
              reexport,
              input.reexport?.by ?? null,
              input.reexport?.reason ?? null,
              input.now,
            ],
          );
        }
        if (batch.status === 'open' && seq >= input.maxDocuments) {
          await this.freeze(batch.id, input.now, 'size', 'connector');
          frozen.push(batch.id);
        }
      }
      if (input.reexport === undefined) {
        await this.db.run(
          `INSERT INTO imaging_loans (loan_id, release_marker, documents, exported_at) VALUES (?, ?, ?, ?) ` +
            `ON CONFLICT (loan_id, release_marker) DO UPDATE SET documents = excluded.documents`,
          [input.loanId, input.releaseMarker, input.documentCount, input.now],
        );
      }
      return { batchId: batch?.id ?? null, added: docs.map((d) => d.documentId), skipped, frozen };
    });
  }

  /** Freezes the open batch when its cut-off has passed; returns its id. */
  freezeDue(now: number): Promise<string | undefined> {
    return this.db.write(async () => {
      const open = await this.open();
      if (open === undefined || open.cutoffAt === null || open.cutoffAt > now) return undefined;
      await this.freeze(open.id, now, 'cutoff', 'connector');
      return open.id;
    });
  }

  /** Freezes the open batch now (ops); undefined when none is open. */
  freezeOpen(now: number, reason: string, by: string): Promise<string | undefined> {
    return this.db.write(async () => {
      const open = await this.open();
      if (open === undefined) return undefined;
      await this.freeze(open.id, now, reason, by);
      return open.id;
    });
  }

  /** sealing → publishing: the files, index and manifest are in place; the ready marker comes next. */
  async markPublishing(id: string): Promise<boolean> {
    const r = await this.db.write(() =>
      this.db.run(`UPDATE imaging_batches SET status = 'publishing' WHERE id = ? AND status = 'sealing'`, [
        id,
      ]),
    );
    return r.changes === 1;
  }

  /** publishing → sealed, once; the records leave the database with it (the folder is the record now). */
  markSealed(id: string, now: number): Promise<boolean> {
    return this.db.write(async () => {
      const r = await this.db.run(
        `UPDATE imaging_batches SET status = 'sealed', sealed_at = ? WHERE id = ? AND status = 'publishing'`,
        [now, id],
      );
      if (r.changes !== 1) return false;
      await this.db.run(`UPDATE imaging_documents SET record = '' WHERE batch_id = ?`, [id]);
      return true;
    });
  }

  async counts(batchId: string): Promise<{ documents: number; loans: number; bytes: number }> {
    const r = await this.db.get<{ documents: number; loans: number; bytes: number | null }>(
      `SELECT COUNT(*) AS documents, COUNT(DISTINCT loan_id) AS loans, SUM(bytes) AS bytes ` +
        `FROM imaging_documents WHERE batch_id = ?`,
      [batchId],
    );
    return {
      documents: Number(r?.documents ?? 0),
      loans: Number(r?.loans ?? 0),
      bytes: Number(r?.bytes ?? 0),
    };
  }

  /** Documents by batch status (metrics). */
  async documentsByStatus(): Promise<Record<ImagingBatchStatus, number>> {
    const out: Record<ImagingBatchStatus, number> = { open: 0, sealing: 0, publishing: 0, sealed: 0 };
    for (const r of await this.db.all<{ status: ImagingBatchStatus; n: number }>(
      `SELECT b.status, COUNT(*) AS n FROM imaging_documents d JOIN imaging_batches b ON b.id = d.batch_id ` +
        `GROUP BY b.status`,
    ))
      out[r.status] = Number(r.n);
    return out;
  }

  /**
   * The tie-out of the reconciliation report: per acknowledged loan, the documents the platform
   * listed at its last exported release, the documents its last core write took (the `written`
   * transition's count), the first exports and those in a published folder. Null when the export
   * never ran.
   */
  tieOut(): Promise<ImagingLoanTie[] | null> {
    return this.db.read(async () => {
      const any = await this.db.get(`SELECT 1 AS one FROM imaging_loans LIMIT 1`);
      if (any === undefined) return null;
      const rows = await this.db.all<{ loanId: string; listed: number; exported: number; published: number }>(
        `SELECT l.id AS "loanId",
                COALESCE((SELECT il.documents FROM imaging_loans il WHERE il.loan_id = l.id
                           ORDER BY il.exported_at DESC LIMIT 1), -1) AS listed,
                (SELECT COUNT(*) FROM imaging_documents d WHERE d.loan_id = l.id AND d.reexport = 0) AS exported,
                (SELECT COUNT(*) FROM imaging_documents d JOIN imaging_batches b ON b.id = d.batch_id
                  WHERE d.loan_id = l.id AND d.reexport = 0 AND b.status = 'sealed') AS published
           FROM loans l WHERE l.state = 'acknowledged' ORDER BY l.id`,
      );
      const written = new Map<string, number>();
      for (const e of await this.db.all<{ loanId: string; detail: string | null }>(
        `SELECT e.loan_id AS "loanId", e.detail FROM loan_events e JOIN loans l ON l.id = e.loan_id ` +
          `WHERE l.state = 'acknowledged' AND e.kind = 'transition' AND e.to_state = 'written' ORDER BY e.seq`,
      )) {
        try {
          const n = (JSON.parse(e.detail ?? '{}') as { documents?: unknown }).documents;
          if (typeof n === 'number') written.set(e.loanId, n);
        } catch {
          // a detail that is not JSON says nothing about documents
        }
      }
      return rows.map((r) => ({
        loanId: r.loanId,
        listed: Number(r.listed),
        writtenToCore: written.get(r.loanId) ?? null,
        exported: Number(r.exported),
        published: Number(r.published),
      }));
    });
  }

  private async freeze(id: string, now: number, reason: string, by: string): Promise<void> {
    await this.db.run(
      `UPDATE imaging_batches SET status = 'sealing', sealing_at = ?, seal_reason = ?, sealed_by = ? ` +
        `WHERE id = ? AND status = 'open'`,
      [now, reason, by, id],
    );
  }

  private async create(
    now: number,
    b: { cutoffAt: number | null; day: string },
    layout: string,
    status: 'open' | 'sealing',
    reason: string | null,
  ): Promise<ImagingBatchRow> {
    const last = await this.db.get<{ id: string }>(
      `SELECT id FROM imaging_batches WHERE id LIKE ? || '-%' ORDER BY LENGTH(id) DESC, id DESC LIMIT 1`,
      [b.day],
    );
    const n = last === undefined ? 0 : Number(last.id.slice(b.day.length + 1));
    const id = `${b.day}-${String(n + 1).padStart(4, '0')}`;
    await this.db.run(
      `INSERT INTO imaging_batches (id, status, opened_at, cutoff_at, sealing_at, seal_reason, sealed_by, layout)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        id,
        status,
        now,
        b.cutoffAt,
        status === 'sealing' ? now : null,
        reason,
        status === 'sealing' ? 'connector' : null,
        layout,
      ],
    );
    return (await this.get(id)) as ImagingBatchRow;
  }
}
