/**
 * The ops console's contract: the ConsoleService interface and the shapes it speaks (implemented
 * by the page-group files service.ts wires, over the ops/ actions). Everything the JSON API
 * (src/console/api.ts) and the pages (src/console/pages/) show or do, with the console's own checks
 * here (roles, four eyes, reasons) and the operator rules in ops/, never only in a page. HTTP-free:
 * routes translate a `ConsoleError` into its status.
 *
 * Stable interface (the pages build on it): change it only in a commit whose subject starts with
 * "console interface:".
 */
import type { LoanState } from '../store/loan-states.js';
import type { BatchListItem } from '../ops/batches.js';
import type { ExceptionFilter, ExceptionReason, ExceptionState } from '../ops/exception-filter.js';
import { AGE_BUCKETS, type AgeBucket } from '../reports/types.js';
import type { PlatformHealth } from '../platform/api.js';

/** Roles of a console user (config console.users[].roles). A user may hold several. */
export const CONSOLE_ROLES = ['viewer', 'operator', 'approver'] as const;
export type ConsoleRole = (typeof CONSOLE_ROLES)[number];

/**
 * Who is acting. Reading needs any role; making a request needs `operator`; approving or
 * rejecting needs `approver` and that the user is not the request's maker.
 */
export interface ConsoleUser {
  name: string;
  roles: readonly ConsoleRole[];
}

export function hasRole(user: ConsoleUser, role: ConsoleRole): boolean {
  return user.roles.includes(role);
}

/**
 * A refusal the HTTP layer turns into its status: 400 bad input, 403 not allowed, 404 unknown, 409
 * conflicting state, 429 too often.
 */
export class ConsoleError extends Error {
  override readonly name = 'ConsoleError';
  constructor(
    readonly status: 400 | 403 | 404 | 409 | 429,
    message: string,
    /** The request field that was wrong (`reason`, `loans`, `filter.state`…), when one was. */
    readonly field?: string,
    /** A console path the refusal points at (the pending request that already covers the loans). */
    readonly link?: string,
  ) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------
// Exception queue
// ---------------------------------------------------------------------------------------------

/** The queue's reasons, states and filter are the ops filter's (ops/exception-filter.ts), re-used as they are. */
export type { ExceptionFilter, ExceptionReason, ExceptionState };

export const EXCEPTION_SORTS = ['age', 'amount', 'released', 'id'] as const;
/** age: oldest first by default (the loan waiting longest); amount, released, id. */
export type ExceptionSort = (typeof EXCEPTION_SORTS)[number];

export interface ExceptionQuery extends ExceptionFilter {
  sort?: ExceptionSort;
  /** asc (default) or desc. */
  dir?: 'asc' | 'desc';
  /** 1–500, default 50. */
  limit?: number;
  /** The `next` of the previous page (opaque; keyset, never an offset). */
  cursor?: string;
}

export interface ExceptionItem {
  id: string;
  loanNumber: string | null;
  /** The loan's state in the store (quarantined, acknowledged, written…). */
  state: LoanState;
  reason: ExceptionReason;
  reviewItems: number;
  borrowerName: string | null;
  productId: string | null;
  amountCents: number | null;
  mappingVersion: string | null;
  releasedAt: string | null;
  /** ISO time the loan entered its state. */
  since: string;
  /** Business days in its state, as the reconciliation report counts them. */
  ageBusinessDays: number;
  ageBucket: AgeBucket;
  lastErrorCode: string | null;
  lastErrorMessage: string | null;
  attempts: number;
}

export interface ExceptionPage {
  items: ExceptionItem[];
  /** Cursor of the next page, null on the last. */
  next: string | null;
}

/** Age buckets as in the reconciliation report (business days: 0-1, 2-5, >5). */
export { AGE_BUCKETS, type AgeBucket };

/** Counts per reason by age (the queue's summary): `{ reason, total, byAge: { '0-1': n, '2-5': n, '>5': n } }`. */
export interface ReasonAgeCount {
  reason: ExceptionReason;
  total: number;
  byAge: Record<AgeBucket, number>;
}

// ---------------------------------------------------------------------------------------------
// Loan history
// ---------------------------------------------------------------------------------------------

export interface LoanHistoryEvent {
  seq: number;
  at: string;
  kind: string;
  fromState: string | null;
  toState: string | null;
  actor: string;
  reason: string | null;
  detail: unknown;
}

/** Everything `loans show --json` gathers for one loan, plus the console's requests naming it. */
export interface LoanHistory {
  /** The loan row (no stored queue item), times as ISO strings. */
  loan: Record<string, unknown>;
  identity: {
    accountNumber: string | null;
    accountNumberSource: 'pool' | 'core' | null;
    customers: Array<{
      entityId: string;
      cif: string | null;
      matchedBy: string;
      existing: boolean;
      nameAgrees: boolean | null;
    }>;
  };
  /** The running daemon's mapping (version, last reload error), null when none runs. */
  daemon: { pid: number; host: string; mappingVersion: string; reloadError: string | null } | null;
  /** Transitions, attempts (errors with mapping file:line in their detail), warnings, ops, webhooks; oldest first. */
  events: LoanHistoryEvent[];
  /** The review items of the last mapping (code, field, message, mapping file:line). */
  reviewItems: Array<{ code: string; field: string; message: string; at: string }>;
  /** The records last written to the core (tax ids masked), null when never written. */
  records: unknown;
  idempotencyKeys: Array<{
    key: string;
    operation: string;
    createdAt: string;
    completedAt: string | null;
    status: number | null;
  }>;
  /** File core: the batches the loan's rows went into (kind new | correction). */
  batches: Array<{ batchId: string; status: string; kind: string }>;
  /** Console requests that name this loan (by id or by a filter that matched it), newest first. */
  requests: ActionRequest[];
  /** Where the loan's documents went: the core write's count and each imaging export (issue 45). */
  documents?: LoanDocuments;
}

/** A loan's documents on the loan page: written to the core, exported to imaging (batch and file). */
export interface LoanDocuments {
  /** Documents the last core write took (its `written` transition); null when not recorded. */
  writtenToCore: number | null;
  /** Documents the platform listed at the loan's exported release; null when never exported. */
  listed: number | null;
  /** Whether the imaging export is on in this process's config. */
  imagingEnabled: boolean;
  imaging: Array<{
    documentId: string;
    batchId: string;
    batchStatus: string;
    fileName: string;
    documentType: string;
    defaultType: boolean;
    sha256: string;
    reexport: number;
    reexportBy: string | null;
  }>;
}

/**
 * What a re-board would change now for one acknowledged loan (the dry-run diff), or for a loan not
 * boarded (quarantined, skipped, waiting) whether it would board now with the mapping on disk
 * (`would_board`, review items in `changes`) or why not (`would_quarantine`). Reads the platform.
 */
export interface ReboardDiff {
  loanId: string;
  outcome:
    | 'would_rewrite'
    | 'unchanged'
    | 'would_board'
    | 'would_quarantine'
    | 'not_acknowledged'
    | 'failed'
    | 'unavailable';
  mappingVersion: string | null;
  previousVersion: string | null;
  changes: string[];
  message: string | null;
}

// ---------------------------------------------------------------------------------------------
// Requests, four eyes, audit
// ---------------------------------------------------------------------------------------------

export const REQUEST_ACTIONS = [
  'retry',
  'skip',
  'reboard',
  'seal',
  'strike_clear',
  'imaging_reexport',
] as const;
export type RequestAction = (typeof REQUEST_ACTIONS)[number];
export const REQUEST_STATUSES = [
  'pending',
  'approved',
  'executed',
  'rejected',
  'withdrawn',
  'failed',
] as const;
export type RequestStatus = (typeof REQUEST_STATUSES)[number];

/**
 * A new request (POST /console/api/requests). retry/skip/reboard name `loans` or a `filter`
 * (exactly one); seal may name the open `batch` it expects; strike_clear takes nothing else.
 * `reason` is required for every action (400 without it).
 */
export interface NewRequest {
  action: RequestAction;
  loans?: string[];
  filter?: ExceptionFilter;
  batch?: string;
  reason: string;
}

export interface RequestResult {
  /** Loans the action changed. */
  done: number;
  /** Loans it could not act on (already moved by someone else, re-board failures…), with why. */
  failed: Array<{ loanId: string | null; message: string }>;
  /** Free text: the sealed batch id, strikes cleared, re-board outcomes. */
  detail: string | null;
}

export interface ActionRequest {
  id: string;
  action: RequestAction;
  /**
   * The loans it covers (named, or matched by its filter when it was made, frozen); null in lists (GET
   * /requests/ID carries them) and for seal / strike_clear.
   */
  loans: string[] | null;
  filter: ExceptionFilter | null;
  batch: string | null;
  /** How many loans the request covered when it was made (frozen). */
  previewCount: number;
  /** GET of one request: its first loans with their loan number and borrower (as the store has them now). */
  loanDetails?: Array<{ id: string; loanNumber: string | null; borrowerName: string | null }>;
  reason: string;
  maker: string;
  createdAt: string;
  status: RequestStatus;
  /** Who approved or rejected it, and when. */
  decidedBy: string | null;
  decidedAt: string | null;
  decisionNote: string | null;
  executedAt: string | null;
  result: RequestResult | null;
}

export interface RequestPreview {
  action: RequestAction;
  count: number;
  /** Up to 20 of the loans it would act on. */
  sample: string[];
  /** Loans named that the action cannot take now (wrong state, unknown), with why. */
  refused: Array<{ loanId: string; why: string }>;
  /** True when the config exempts this action from four eyes (it executes at once). */
  exempt: boolean;
}

export interface RequestQuery {
  status?: RequestStatus;
  limit?: number;
  cursor?: string;
}

export interface Page<T> {
  items: T[];
  next: string | null;
}

export const AUDIT_KINDS = [
  'request',
  'approve',
  'reject',
  'execute',
  'fail',
  'withdraw',
  'signoff',
  'login_failed',
  'login_throttled',
  'unlock',
  'reconcile',
] as const;
export type AuditKind = (typeof AUDIT_KINDS)[number];

/** One line of the append-only audit log (never updated or deleted). */
export interface AuditEntry {
  seq: number;
  at: string;
  actor: string;
  kind: AuditKind;
  action: RequestAction | 'signoff' | 'login' | 'reconcile' | null;
  requestId: string | null;
  /** The loan it names, null for a line about a request of several loans or a batch. */
  loanId: string | null;
  reason: string | null;
  detail: unknown;
}

export interface AuditQuery {
  /** Only lines about this loan: its own lines and those of requests that cover it. */
  loan?: string;
  requestId?: string;
  limit?: number;
  /** Newest first; the `next` of the previous page. */
  cursor?: string;
}

// ---------------------------------------------------------------------------------------------
// Reconciliation, batches, status
// ---------------------------------------------------------------------------------------------

export interface SignOff {
  preparedBy: string | null;
  preparedAt: string | null;
  reviewedBy: string | null;
  reviewedAt: string | null;
  /** The signers' comments. */
  preparedNote?: string | null;
  reviewedNote?: string | null;
  /** The preparer's disposition of each exception (index in report.json's exceptions). */
  dispositions?: Array<{ index: number; loanId: string; reason: string; disposition: string }>;
}

/**
 * What a signature says besides who and when: a comment (required) and, from the preparer, a disposition per
 * exception (by its index).
 */
export interface SignOffInput {
  note: string;
  dispositions?: Record<string, string>;
}

/** One run of the reconciliation (a folder `<day>/run-<time>`, never overwritten). */
export interface ReportRun {
  day: string;
  run: string;
  /** ISO time of the run folder. */
  generatedAt: string | null;
  signOff: SignOff;
  /** The newest run of its day. */
  latestOfDay: boolean;
}

export interface ReportView extends ReportRun {
  /** report.json as written by the reconciliation (exceptions carry loan ids: link them to /console/loans/ID). */
  report: unknown;
}

/** A file-core batch as the Batches page lists it: ops/batches.ts defines it (and `batches list`'s view). */
export type { BatchListItem as BatchView };

export interface StatusView {
  /** `leader` (today: the one process) or `standby`. */
  role: 'leader' | 'standby';
  daemon: {
    pid: number;
    host: string;
    startedAt: string;
    mappingVersion: string;
    reloadError: string | null;
  } | null;
  lastCycleAt: string | null;
  /**
   * The platform client's view: budget use per bucket and pauses, 429 strikes in 24 h, traffic stop, last
   * success and failure. Null outside the daemon.
   */
  platform: PlatformHealth | null;
  /** Whether the core answers now (its health check, bounded to a few seconds). Null outside the daemon. */
  core: { ok: boolean; detail: string | null } | null;
  loansByState: Record<string, number>;
  pendingRequests: number;
  /** The readiness checks as /readyz shows them (platform and core reachability…). */
  readiness: unknown;
}

// ---------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------

/**
 * Every read and action of the console. Methods that change something take the acting user and
 * check roles themselves (a page hiding a button is not the check). All return Promises (the
 * store becomes async with PostgreSQL).
 */
export interface ConsoleService {
  /** The exception queue, one page (keyset paging; stays fast at 100,000 loans). 400 on a bad filter or cursor. */
  exceptions(query: ExceptionQuery): Promise<ExceptionPage>;
  /** Counts per reason by age for the queue's summary (optionally narrowed by a filter). */
  exceptionCounts(filter?: ExceptionFilter): Promise<ReasonAgeCount[]>;
  /** One loan's whole history; null when the store does not know it. */
  loan(id: string): Promise<LoanHistory | null>;
  /**
   * What a re-board would change now for this loan, or whether a loan not boarded would board now
   * (reads the platform within the rate budget). Operator role (403); one at a time (409 while
   * another runs); at most PREVIEWS_PER_MINUTE per user (429; ops/preview-throttle.ts).
   */
  reboardDiff(user: ConsoleUser, id: string): Promise<ReboardDiff>;

  /** What a request would act on, without making it (the preview count). 400/403 as createRequest. */
  previewRequest(user: ConsoleUser, input: NewRequest): Promise<RequestPreview>;
  /**
   * Makes a request (status pending; audited). 403 without the operator role, 400 without a
   * reason or with a bad action/loans/filter, 409 (with `link` to it) when a request still to run
   * already covers one of its loans (or, for seal and strike clear, is of the same action). A request
   * the config exempts from four eyes (console.fourEyes.exemptRetries) is approved by the system and
   * executed at once.
   */
  createRequest(user: ConsoleUser, input: NewRequest): Promise<ActionRequest>;
  /**
   * Approves a pending request and has it executed (the daemon's executor). 403 when the user is
   * its maker or lacks the approver role; 409 when it is not pending; 404 unknown. Resolves with
   * the request as it stands after up to a short wait for the execution (status executed or
   * failed, or still approved when the executor is busy or runs elsewhere).
   */
  approve(user: ConsoleUser, id: string, note?: string): Promise<ActionRequest>;
  /** Rejects a pending request (approver, not the maker; a note is required). */
  reject(user: ConsoleUser, id: string, note: string): Promise<ActionRequest>;
  /**
   * The maker takes back their own pending request (status withdrawn; audited). 403 for anyone else, 409 when
   * not pending.
   */
  withdraw(user: ConsoleUser, id: string, note?: string): Promise<ActionRequest>;
  request(id: string): Promise<ActionRequest | null>;
  /** Requests, newest first. */
  requests(query: RequestQuery): Promise<Page<ActionRequest>>;

  /** The audit log, newest first (globally or for one loan). */
  audit(query: AuditQuery): Promise<Page<AuditEntry>>;
  /** The audit log as CSV (header first, oldest first), in chunks; for one loan when `loan` is set. */
  auditCsv(query: Pick<AuditQuery, 'loan'>): AsyncIterable<string>;
  /**
   * Records a login failure or throttling in the audit log (the auth module calls it with the name as
   * auth.auditName gives it).
   */
  recordAuth(
    kind: 'login_failed' | 'login_throttled',
    name: string,
    detail: Record<string, unknown>,
  ): Promise<void>;
  /**
   * Records that `user` lifts the login locks of the configured user `name` (an `unlock` audit line;
   * `console unlock NAME` writes the same). Approver role (403). The caller then lifts them in auth.
   */
  recordUnlock(user: ConsoleUser, name: string): Promise<void>;

  /** Reconciliation runs, newest first. */
  reports(): Promise<ReportRun[]>;
  /** One run; null when there is none. */
  report(day: string, run: string): Promise<ReportView | null>;
  /** The path of a file of a run (report.html/json/csv), for the pages to send; null when absent. */
  reportFile(day: string, run: string, kind: 'html' | 'json' | 'csv'): Promise<string | null>;
  /**
   * Signs a run off as `prepared` or `reviewed` by the logged-in user (operator or approver), with
   * a comment; the preparer gives every exception a disposition (400 naming the first without).
   * Then signoff.json is written beside the run's files and its report.html re-rendered with the
   * signatures. 403 when the reviewer is the preparer or reviewing comes before preparing; 409
   * when that part is already signed (a signature is never overwritten).
   */
  signOff(
    user: ConsoleUser,
    day: string,
    run: string,
    as: 'prepared' | 'reviewed',
    input: SignOffInput,
  ): Promise<ReportRun>;

  /**
   * Runs the reconciliation now (the same run as the CLI's `reconcile` and the nightly job) and
   * resolves with its new run. Operator role (403); read-only toward the core and the platform, so
   * no four eyes; audited (who, the run, or why it failed). 409 while one started here still runs;
   * 404 when this console has no reconciliation to run (no daemon runtime behind it).
   */
  runReconciliation(user: ConsoleUser): Promise<ReportRun>;

  /** File core batches, newest first (empty for other cores). */
  batches(): Promise<BatchListItem[]>;
  /** The connector's status page. */
  status(): Promise<StatusView>;
}
