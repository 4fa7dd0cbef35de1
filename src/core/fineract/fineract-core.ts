import { createWriteStream, openAsBlob } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { FormData } from 'undici';
import type { Logger } from '../../lib/logger.js';
import type { MappedRecord } from '../../mapping/types.js';
import type { PlatformDocument } from '../../platform/schemas.js';
import {
  CoreRejectedError,
  type BoardingPackage,
  type CoreLoanRecord,
  type CoreReceipt,
  type CoreSystem,
} from '../port.js';
import { KeyedLock } from '../keyed-lock.js';
import { safeFileName } from '../safe-name.js';
import { FineractHttp, fineractCodes, type FineractHttpOptions } from './http.js';
import { canonicalFromFineractLoan } from './units.js';
import type { Clock } from '../../lib/clock.js';
import { systemClock } from '../../lib/clock.js';

export interface FineractCoreOptions extends FineractHttpOptions {
  officeId: number;
  approve: boolean;
  disburse: boolean;
  logger: Logger;
  clock?: Clock;
  /** Where documents are spooled before the multipart upload (default: the OS temp dir). */
  spoolDir?: string;
}

export const FINERACT_RECORD_TYPES = ['client', 'loan', 'guarantor', 'document'] as const;

/** Fineract loan status ids (LoanStatus enum). */
const SUBMITTED = 100;
const APPROVED = 200;

interface Ids {
  clients: Map<string, number>;
  loans: Map<string, number>;
}

type Json = Record<string, unknown>;

/**
 * Apache Fineract as the core, over its REST API. Every write is preceded by a look-up by
 * external id (clients, loans) or by a listing (guarantors, documents, loan status), so `board()`
 * can be called again after any failure — a timeout after Fineract committed, a crash between
 * the clients and the loan — and completes what is missing without a second record. Each write
 * also carries an Idempotency-Key derived from what it does, so a Fineract with idempotency
 * enabled replays instead of re-executing.
 *
 * Record types: `client`, `loan`, `guarantor`, `document` (the fineract mapping set). Any other
 * type is refused with CoreRejectedError before anything is written: silently dropping data a
 * mapping produced would board an incomplete loan (the generic mapping set is for the file core).
 */
export class FineractCore implements CoreSystem {
  readonly name = 'fineract';
  private readonly http: FineractHttp;
  private readonly logger: Logger;
  private readonly clock: Clock;
  /** Two loans boarded concurrently may share a borrower or guarantor: create it once. */
  private readonly clientLock = new KeyedLock();

  constructor(private readonly opts: FineractCoreOptions) {
    this.http = new FineractHttp(opts);
    this.logger = opts.logger.child({ component: 'core.fineract' });
    this.clock = opts.clock ?? systemClock;
  }

  async board(pkg: BoardingPackage, o: { signal?: AbortSignal } = {}): Promise<CoreReceipt> {
    const signal = o.signal;
    const byType = this.preflight(pkg);
    const ids: Ids = { clients: new Map(), loans: new Map() };
    const receipt: CoreReceipt['records'] = [];

    for (const rec of byType.client) {
      const id = await this.ensureClient(rec, pkg, signal);
      ids.clients.set(rec.externalId, id);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(id) });
    }
    for (const rec of byType.loan) {
      const id = await this.ensureLoan(rec, pkg, ids, signal);
      ids.loans.set(rec.externalId, id);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(id) });
      if (this.opts.approve || this.opts.disburse) await this.ensureCommands(rec, id, signal);
    }
    for (const rec of byType.guarantor) {
      const id = await this.ensureGuarantor(rec, pkg, ids, signal);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(id) });
    }
    const primary = byType.loan.find((l) => l.externalId === pkg.loanId) ?? byType.loan[0];
    const loanId = primary === undefined ? undefined : ids.loans.get(primary.externalId);
    if (primary === undefined || loanId === undefined) throw new CoreRejectedError('no loan record to board');
    const documents = await this.ensureDocuments(pkg, primary.externalId, loanId, byType.document, signal);
    for (const rec of byType.document) {
      const d = documents.find((x) => x.documentId === rec.externalId);
      if (d?.coreId !== undefined) receipt.push({ type: rec.type, externalId: rec.externalId, coreId: d.coreId });
    }
    this.logger.info({ loanId: pkg.loanId, fineractLoanId: loanId, records: receipt.length, documents: documents.length }, 'loan boarded in Fineract');
    return {
      coreReference: String(loanId),
      loanExternalId: pkg.loanId,
      mappingVersion: pkg.mappingVersion,
      records: receipt,
      documents,
      boardedAt: new Date(this.clock.now()).toISOString(),
    };
  }

  /** Refuses what cannot board before any write, so a bad package never leaves half a loan. */
  private preflight(pkg: BoardingPackage): Record<(typeof FINERACT_RECORD_TYPES)[number], MappedRecord[]> {
    const out = { client: [] as MappedRecord[], loan: [] as MappedRecord[], guarantor: [] as MappedRecord[], document: [] as MappedRecord[] };
    for (const r of pkg.records) {
      if (!(FINERACT_RECORD_TYPES as readonly string[]).includes(r.type)) {
        throw new CoreRejectedError(
          `record type "${r.type}" (external id ${r.externalId}) is not supported by the Fineract core (supported: ${FINERACT_RECORD_TYPES.join(', ')}); use the fineract mapping set`,
        );
      }
      if (typeof r.externalId !== 'string' || r.externalId === '' || r.externalId.length > 100) {
        throw new CoreRejectedError(`${r.type} record: externalId must be 1 to 100 characters for Fineract`);
      }
      out[r.type as keyof typeof out].push(r);
    }
    if (out.loan.length === 0) throw new CoreRejectedError(`loan ${pkg.loanId}: the mapping produced no loan record`);
    const clientIds = new Set(out.client.map((c) => c.externalId));
    for (const l of [...out.loan, ...out.guarantor]) {
      const ref = l.fields['clientExternalId'];
      if (l.type === 'loan' && typeof ref !== 'string') {
        throw new CoreRejectedError(`loan record ${l.externalId}: clientExternalId (the borrower client's external id) is missing`);
      }
      if (typeof ref === 'string' && !clientIds.has(ref)) {
        // Allowed (the client may already exist in the core), resolved by look-up at write time.
        this.logger.debug({ record: l.externalId, clientExternalId: ref }, 'client reference not in this package');
      }
    }
    return out;
  }

  private ensureClient(rec: MappedRecord, pkg: BoardingPackage, signal?: AbortSignal): Promise<number> {
    return this.clientLock.run(rec.externalId, () => this.ensureClientLocked(rec, pkg, signal));
  }

  private async ensureClientLocked(rec: MappedRecord, pkg: BoardingPackage, signal?: AbortSignal): Promise<number> {
    const found = await this.findClientId(rec.externalId, signal);
    if (found !== null) return found;
    const body: Json = { ...withoutRefs(rec.fields), externalId: rec.externalId };
    body['officeId'] ??= this.opts.officeId;
    return this.create(`/clients`, body, `client:${rec.externalId}:${pkg.mappingVersion}`, signal, 'clientId', () =>
      this.findClientId(rec.externalId, signal),
    );
  }

  private async findClientId(externalId: string, signal?: AbortSignal): Promise<number | null> {
    const c = await this.http.find<Json>(`/clients/external-id/${encodeURIComponent(externalId)}`, signal);
    return c === null ? null : numId(c['id'], `client ${externalId}`);
  }

  private async resolveClient(externalId: string, ids: Ids, what: string, signal?: AbortSignal): Promise<number> {
    const id = ids.clients.get(externalId) ?? (await this.findClientId(externalId, signal));
    if (id === null) throw new CoreRejectedError(`${what}: client ${externalId} is neither in the package nor in the core`);
    ids.clients.set(externalId, id);
    return id;
  }

  private async findLoanJson(externalId: string, signal?: AbortSignal): Promise<Json | null> {
    return this.http.find<Json>(`/loans/external-id/${encodeURIComponent(externalId)}`, signal);
  }

  private async ensureLoan(rec: MappedRecord, pkg: BoardingPackage, ids: Ids, signal?: AbortSignal): Promise<number> {
    const found = await this.findLoanJson(rec.externalId, signal);
    if (found !== null) return numId(found['id'], `loan ${rec.externalId}`);
    const clientId = await this.resolveClient(String(rec.fields['clientExternalId']), ids, `loan ${rec.externalId}`, signal);
    const body: Json = { ...withoutRefs(rec.fields), externalId: rec.externalId, clientId };
    return this.create(`/loans`, body, `loan:${rec.externalId}:${pkg.mappingVersion}`, signal, 'loanId', async () => {
      const l = await this.findLoanJson(rec.externalId, signal);
      return l === null ? null : numId(l['id'], `loan ${rec.externalId}`);
    });
  }

  /**
   * POST that creates a record. If Fineract says the external id already exists (a concurrent
   * writer, or a replay whose look-up raced), the existing record is the answer.
   */
  private async create(
    path: string,
    body: Json,
    idempotencyKey: string,
    signal: AbortSignal | undefined,
    idField: string,
    lookup: () => Promise<number | null>,
  ): Promise<number> {
    try {
      const res = await this.http.post<Json>(path, { body, idempotencyKey, ...(signal ? { signal } : {}) });
      return numId(res[idField] ?? res['resourceId'], `${path} response`);
    } catch (err) {
      if (err instanceof CoreRejectedError && fineractCodes(err.detail).some((c) => /duplicate/i.test(c) && /external/i.test(c))) {
        const existing = await lookup();
        if (existing !== null) return existing;
      }
      throw err;
    }
  }

  /** Approve / disburse by config, decided from the loan's current status (never twice). */
  private async ensureCommands(rec: MappedRecord, loanId: number, signal?: AbortSignal): Promise<void> {
    const f = rec.fields;
    const fmt = { dateFormat: f['dateFormat'] ?? 'yyyy-MM-dd', locale: f['locale'] ?? 'en' };
    let status = await this.loanStatus(loanId, signal);
    if (this.opts.approve && status === SUBMITTED) {
      const approvedOnDate = f['approvedOnDate'] ?? f['submittedOnDate'];
      await this.http.post(`/loans/${loanId}?command=approve`, {
        body: { approvedOnDate, ...fmt, note: 'approved by boarding-connector' },
        idempotencyKey: `approve:${rec.externalId}`,
        ...(signal ? { signal } : {}),
      });
      status = APPROVED;
    }
    if (this.opts.disburse && status === APPROVED) {
      const actualDisbursementDate = f['actualDisbursementDate'] ?? f['expectedDisbursementDate'];
      await this.http.post(`/loans/${loanId}?command=disburse`, {
        body: { actualDisbursementDate, ...fmt, note: 'disbursed by boarding-connector' },
        idempotencyKey: `disburse:${rec.externalId}`,
        ...(signal ? { signal } : {}),
      });
    }
  }

  private async loanStatus(loanId: number, signal?: AbortSignal): Promise<number | null> {
    const l = await this.http.get<Json>(`/loans/${loanId}`, signal);
    const s = l['status'];
    return s !== null && typeof s === 'object' && typeof (s as Json)['id'] === 'number' ? ((s as Json)['id'] as number) : null;
  }

  private async ensureGuarantor(rec: MappedRecord, pkg: BoardingPackage, ids: Ids, signal?: AbortSignal): Promise<number> {
    const loanExt = typeof rec.fields['loanExternalId'] === 'string' ? rec.fields['loanExternalId'] : pkg.loanId;
    const loanId = ids.loans.get(loanExt) ?? numIdOrNull((await this.findLoanJson(loanExt, signal))?.['id']);
    if (loanId === null) throw new CoreRejectedError(`guarantor ${rec.externalId}: loan ${loanExt} is not in the core`);
    const typeId = Number(rec.fields['guarantorTypeId'] ?? 1);
    const body: Json = { ...withoutRefs(rec.fields), guarantorTypeId: typeId };
    let entityId: number | null = null;
    if (typeId === 1) {
      const ref = rec.fields['clientExternalId'];
      if (typeof ref !== 'string') throw new CoreRejectedError(`guarantor ${rec.externalId}: clientExternalId is missing (guarantorTypeId 1)`);
      entityId = await this.resolveClient(ref, ids, `guarantor ${rec.externalId}`, signal);
      body['entityId'] = entityId;
    }
    const existing = (await this.http.get<Json[] | null>(`/loans/${loanId}/guarantors`, signal)) ?? [];
    const same = existing.find((g) => {
      if (g['status'] === false) return false;
      const gt = (g['guarantorType'] as Json | undefined)?.['id'] ?? g['guarantorTypeId'];
      if (Number(gt) !== typeId) return false;
      if (entityId !== null) return Number(g['entityId']) === entityId;
      return g['firstname'] === body['firstname'] && g['lastname'] === body['lastname'];
    });
    if (same !== undefined) return numId(same['id'], `guarantor of loan ${loanId}`);
    const res = await this.http.post<Json>(`/loans/${loanId}/guarantors`, {
      body,
      idempotencyKey: `guarantor:${loanExt}:${rec.externalId}`,
      ...(signal ? { signal } : {}),
    });
    return numId(res['resourceId'], 'guarantor response');
  }

  /**
   * Uploads the loan's documents. Fineract has no external id on documents, so each upload carries
   * a marker `[doc:<platform id>]` in its description; a document whose marker is already there is
   * skipped. Bytes are spooled to a temp file first (hash verified, size known) and streamed from
   * disk into the multipart body.
   */
  private async ensureDocuments(
    pkg: BoardingPackage,
    loanExt: string,
    loanId: number,
    records: MappedRecord[],
    signal?: AbortSignal,
  ): Promise<CoreReceipt['documents']> {
    if (pkg.documents.length === 0) return [];
    const existing = (await this.http.get<Json[] | null>(`/loans/${loanId}/documents`, signal)) ?? [];
    const out: CoreReceipt['documents'] = [];
    for (const doc of pkg.documents) {
      signal?.throwIfAborted();
      const marker = documentMarker(doc.id);
      const there = existing.find((e) => typeof e['description'] === 'string' && e['description'].includes(marker));
      if (there !== undefined) {
        out.push({ documentId: doc.id, sha256: '', bytes: Number(there['size'] ?? 0), coreId: String(there['id']) });
        continue;
      }
      const rec = records.find((r) => r.externalId === doc.id);
      out.push(await this.uploadDocument(pkg.fetchDocument, doc, rec, loanExt, loanId, signal));
    }
    return out;
  }

  private async uploadDocument(
    fetchDocument: BoardingPackage['fetchDocument'],
    doc: PlatformDocument,
    rec: MappedRecord | undefined,
    loanExt: string,
    loanId: number,
    signal?: AbortSignal,
  ): Promise<CoreReceipt['documents'][number]> {
    const dir = await mkdtemp(join(this.opts.spoolDir ?? tmpdir(), 'boarding-doc-'));
    try {
      const path = join(dir, 'content');
      const sink = createWriteStream(path);
      let fetched: Awaited<ReturnType<BoardingPackage['fetchDocument']>>;
      try {
        fetched = await fetchDocument(doc, sink, signal);
        if (!sink.writableEnded) sink.end();
        await finished(sink);
      } catch (err) {
        sink.destroy();
        throw err;
      }
      const name = (asText(rec?.fields['name']) || doc.name || doc.id).slice(0, 250);
      const described = asText(rec?.fields['description']) || [doc.category, doc.period ?? doc.requirement?.period].filter((x) => typeof x === 'string' && x !== '').join(' · ');
      const marker = documentMarker(doc.id);
      const description = `${described.slice(0, 1000 - marker.length - 1)} ${marker}`.trim();
      const form = new FormData();
      form.append('name', name);
      form.append('description', description);
      const blob = await openAsBlob(path, fetched.contentType ? { type: fetched.contentType } : {});
      form.append('file', blob, safeFileName(doc.name, `${doc.id}.bin`));
      const res = await this.http.post<Json>(`/loans/${loanId}/documents`, {
        form,
        idempotencyKey: `document:${loanExt}:${doc.id}`,
        ...(signal ? { signal } : {}),
      });
      return { documentId: doc.id, sha256: fetched.sha256, bytes: fetched.bytes, coreId: asText(res['resourceId']) };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  async findLoan(loanExternalId: string): Promise<CoreLoanRecord | null> {
    const l = await this.findLoanJson(loanExternalId);
    if (l === null) return null;
    // The loan alone says nothing of its guarantors and documents (later steps of the same board).
    return { coreReference: String(l['id']), loanExternalId, mappingVersion: null, fields: canonicalFromFineractLoan(l), complete: false };
  }

  async *listLoans(): AsyncIterable<CoreLoanRecord> {
    const limit = 200;
    for (let offset = 0; ; offset += limit) {
      const page = await this.http.get<{ totalFilteredRecords?: number; pageItems?: Json[] }>(
        `/loans?offset=${offset}&limit=${limit}&orderBy=id&sortOrder=ASC`,
      );
      const items = page.pageItems ?? [];
      for (const l of items) {
        if (typeof l['externalId'] === 'string' && l['externalId'] !== '') {
          yield { coreReference: String(l['id']), loanExternalId: l['externalId'], mappingVersion: null, fields: canonicalFromFineractLoan(l) };
        }
      }
      if (items.length < limit) return;
    }
  }

  async health(): Promise<{ ok: boolean; detail?: string }> {
    try {
      await this.http.get(`/offices/${this.opts.officeId}`);
      return { ok: true, detail: this.opts.baseUrl };
    } catch (err) {
      return { ok: false, detail: (err as Error).message };
    }
  }

  async close(): Promise<void> {
    await this.http.close();
  }
}

/** `*ExternalId` references are the connector's, not Fineract parameters (it rejects unknown ones). */
function withoutRefs(fields: Record<string, unknown>): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(fields)) if (!/.ExternalId$/.test(k)) out[k] = v;
  return out;
}

export function documentMarker(documentId: string): string {
  return `[doc:${documentId}]`;
}

function asText(v: unknown): string {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : '';
}

function numIdOrNull(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) ? v : null;
}

function numId(v: unknown, what: string): number {
  const n = numIdOrNull(v);
  if (n === null) throw new CoreRejectedError(`${what}: Fineract returned no numeric id`);
  return n;
}
