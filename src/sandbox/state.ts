import { randomBytes } from 'node:crypto';
import { createRng, type Rng } from './rng.js';
import { generateLoan, PRODUCTS, type AmountProfile } from './generator.js';
import { RepeatBorrowers, customerExtractRows, type ExtractRow } from './repeat-borrowers.js';
import { createIdFactory, type IdFactory, type IdKind, type IdShapes } from './ids.js';
import { emptyCounters, type Counters } from './counters.js';
import { RequestLog } from './request-log.js';
import { DEFAULT_ORG, makeKey, type ApiKeyRecord, type Environment } from './keys.js';
import type { DocumentRecord, LoanRecord, LoanStatus, ProductRecord, WebhookEventType } from './model.js';

export interface WebhookEndpointRecord {
  id: string;
  orgId: string;
  name: string;
  url: string;
  environment: Environment;
  status: 'active' | 'disabled';
  subscribedEvents: string[];
  consecutiveFailures: number;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  lastFailureReason: string | null;
  autoDisabledAt: string | null;
  createdAt: string;
  secret: string;
}

export interface SandboxEvent {
  id: string;
  type: WebhookEventType;
  createdAt: string;
  orgId: string;
  data: Record<string, unknown>;
}

export interface StoredResponse {
  fingerprint: string;
  status: number;
  body: unknown;
}

const RELEASER = { id: 'usr_banker01', name: 'Pat Banker' };

/** All mutable sandbox data plus the lifecycle operations the admin API and routes share. */
export class SandboxState {
  readonly loans = new Map<string, LoanRecord>();
  readonly documents = new Map<string, DocumentRecord>();
  readonly products: ProductRecord[] = PRODUCTS.map((p) => ({ ...p }));
  readonly keys = new Map<string, ApiKeyRecord>();
  readonly endpoints = new Map<string, WebhookEndpointRecord>();
  /** Idempotency-Key store, scoped per organisation. */
  readonly idempotency = new Map<string, StoredResponse>();
  counters: Counters = emptyCounters();
  /** Every rate-limited request with its arrival time (GET /admin/requests). */
  readonly requestLog = new RequestLog();
  readonly environment: Environment = 'staging';
  private readonly rng: Rng;
  private readonly ids: IdFactory;
  private generated = 0;
  private boardingSeq = 0;
  private lastReleaseMs = 0;
  private eventSeq = 0;
  private readonly listeners: Array<(e: SandboxEvent) => void> = [];

  private readonly repeats: RepeatBorrowers;

  constructor(
    private readonly seed: number,
    private readonly now: () => number,
    idShapes: IdShapes = 'mixed',
    /** Share of generated loans whose borrower is an earlier loan's (repeat-borrowers.ts); 0 = none. */
    repeatBorrowers = 0,
    /** How generated loans' amounts, rates and terms look (generator.ts). */
    readonly amounts: AmountProfile = 'realistic',
  ) {
    this.rng = createRng(seed);
    this.ids = createIdFactory(seed, idShapes);
    this.repeats = new RepeatBorrowers(seed, repeatBorrowers);
  }

  /** A bank customer extract in which `existingShare` of the borrowers so far already have a CIF. */
  customerExtract(existingShare: number): ExtractRow[] {
    return customerExtractRows(this.loans.values(), existingShare, this.seed);
  }

  onEvent(fn: (e: SandboxEvent) => void): void {
    this.listeners.push(fn);
  }

  nowMs(): number {
    return this.now();
  }

  nowIso(): string {
    return new Date(this.now()).toISOString();
  }

  addKey(key: ApiKeyRecord): ApiKeyRecord {
    this.keys.set(key.key, key);
    return key;
  }

  defaultKey(permissions?: string[]): ApiKeyRecord {
    return this.addKey(makeKey(permissions ? { org: DEFAULT_ORG, permissions } : { org: DEFAULT_ORG }));
  }

  /** Generates loans; `release` decides per loan whether it goes to the boarding queue. */
  generate(
    count: number,
    opts: {
      releaseRatio?: number;
      release?: boolean;
      status?: LoanStatus;
      emit?: boolean;
      atNow?: boolean;
    } = {},
  ): string[] {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1) {
      const index = this.generated;
      this.generated += 1;
      const genOpts: { status?: LoanStatus; createdAtMs?: number; ids: IdFactory; amounts: AmountProfile } = {
        ids: this.ids,
        amounts: this.amounts,
      };
      if (opts.status) genOpts.status = opts.status;
      if (opts.atNow) genOpts.createdAtMs = this.now();
      const { loan, documents } = generateLoan(this.rng, index, DEFAULT_ORG, genOpts);
      this.repeats.apply(loan);
      this.loans.set(loan.fields.id, loan);
      for (const d of documents) this.documents.set(d.id, d);
      ids.push(loan.fields.id);
      if (opts.emit) this.emit('loan.created', { loanId: loan.fields.id, status: loan.fields.status });
      const release = opts.release ?? this.rng.chance(opts.releaseRatio ?? 0.6);
      if (release) this.release(loan.fields.id, opts.atNow ? undefined : loan.createdAtMs + 30 * 86_400_000);
    }
    return ids;
  }

  /**
   * Releases one more loan of each status missing from the queue, so a fresh sandbox's queue
   * shows every status (consumers must decide what to do with, e.g., a withdrawn loan).
   */
  releaseEveryStatus(): void {
    const released = new Set([...this.loans.values()].filter((l) => l.boarding).map((l) => l.fields.status));
    for (const loan of this.loans.values()) {
      if (loan.boarding || released.has(loan.fields.status)) continue;
      this.release(loan.fields.id, loan.createdAtMs + 30 * 86_400_000);
      released.add(loan.fields.status);
    }
  }

  liveLoan(id: string): LoanRecord | undefined {
    const loan = this.loans.get(id);
    return loan && loan.archivedAt === null ? loan : undefined;
  }

  /**
   * Puts a loan in the boarding queue. A loan already boarded is released again with a new
   * boarding id (a re-release): release instants strictly increase so queue order is total.
   */
  release(id: string, atMs?: number): LoanRecord | undefined {
    const loan = this.liveLoan(id);
    if (!loan) return undefined;
    if (loan.boarding && !loan.boarding.boarded) return loan;
    let ms = atMs ?? this.now();
    if (atMs === undefined && ms <= this.lastReleaseMs) ms = this.lastReleaseMs + 1;
    if (atMs === undefined) this.lastReleaseMs = ms;
    this.boardingSeq += 1;
    loan.boarding = {
      id: this.ids.make('brd', `brd_${String(this.boardingSeq).padStart(6, '0')}`),
      releasedAt: new Date(ms).toISOString(),
      releasedAtMs: ms,
      releasedBy: RELEASER,
      boarded: false,
      boardedAt: null,
      boardedAtMs: null,
      boardingReference: null,
      acknowledgement: null,
    };
    return loan;
  }

  setStatus(id: string, status: LoanStatus): LoanRecord | undefined {
    const loan = this.liveLoan(id);
    if (!loan) return undefined;
    const previous = loan.fields.status;
    if (previous === status) return loan;
    loan.fields.status = status;
    loan.fields.updatedAt = this.nowIso();
    this.emit('loan.status_changed', { loanId: id, previousStatus: previous, status });
    if (status === 'funded')
      this.emit('loan.funded', {
        loanId: id,
        centsAmount: loan.fields.centsAmount ?? null,
        fundedAt: loan.fields.updatedAt,
      });
    return loan;
  }

  signDocument(id: string): DocumentRecord | undefined {
    const doc = this.documents.get(id);
    if (!doc) return undefined;
    doc.signed = true;
    this.emit('document.signed', {
      loanId: doc.loanId,
      documentId: doc.id,
      name: doc.name,
      signedAt: this.nowIso(),
    });
    return doc;
  }

  /** Creates an upload record that is not attached yet (step 1 of an upload, not in the spec). */
  createPendingDocument(
    loanId: string,
    opts: { name?: string; size?: number; periods?: string[] },
  ): DocumentRecord | undefined {
    const loan = this.liveLoan(loanId);
    if (!loan) return undefined;
    const bytes = Buffer.from(`pending upload for ${loanId}\n`, 'utf8');
    const periods = opts.periods ?? [];
    const doc: DocumentRecord = {
      id: this.ids.make('doc', this.rng.id('doc', 12)),
      loanId,
      name: opts.name ?? 'upload.pdf',
      type: 'application/pdf',
      category: 'other',
      bytes,
      uploadedAt: this.nowIso(),
      attached: false,
      pendingSize: opts.size ?? bytes.length,
      requirement: {
        id: this.ids.make('req', this.rng.id('req', 8)),
        name: periods.length > 1 ? 'Business Tax Returns' : 'Supporting Document',
        module: 'underwriting',
        periods,
      },
      period: null,
      requirementStatus: 'PENDING',
      versions: [],
      signed: false,
    };
    this.documents.set(doc.id, doc);
    loan.documentIds.push(doc.id);
    return doc;
  }

  emit(type: WebhookEventType, data: Record<string, unknown>, orgId = DEFAULT_ORG): SandboxEvent {
    this.eventSeq += 1;
    const event: SandboxEvent = {
      id: `evt_${String(this.eventSeq).padStart(6, '0')}_${randomBytes(4).toString('hex')}`,
      type,
      createdAt: this.nowIso(),
      orgId,
      data,
    };
    for (const l of this.listeners) l(event);
    return event;
  }

  newId(prefix: string): string {
    return this.rng.id(prefix, 10);
  }

  /** A new platform id of the sandbox's id shapes (a business created through the API…). */
  newShapedId(kind: IdKind): string {
    return this.ids.make(kind, this.rng.id(kind, 10));
  }
}
