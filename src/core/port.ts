import type { Writable } from 'node:stream';
import type { MappedRecord } from '../contract/records.js';
import type { PlatformDocument } from '../contract/schemas.js';
import { FatalError } from '../lib/errors.js';
import type { Disposition } from '../lib/disposition.js';

/** Writes one document's bytes into sink (download with no Authorization header). */
export type DocumentFetcher = (
  doc: PlatformDocument,
  sink: Writable,
  signal?: AbortSignal,
) => Promise<{ sha256: string; bytes: number; contentType: string | null }>;

export interface BoardingPackage {
  loanId: string;
  loanNumber: string | null;
  /**
   * The loan's core account number from the bank's pool (identity.accountNumbers source pool);
   * null when the core assigns it (the receipt then carries the core's). Optional for callers
   * that predate it.
   */
  accountNumber?: string | null;
  mappingVersion: string;
  connectorVersion: string;
  records: MappedRecord[];
  documents: PlatformDocument[];
  fetchDocument: DocumentFetcher;
  /** Canonical platform values kept with the core record for reconciliation. */
  source: CanonicalLoanFields;
}

/** Platform-side values, in platform units, that reconciliation compares with the core. */
export interface CanonicalLoanFields {
  centsAmount?: number | null;
  bpsRate?: number | null;
  maturityDate?: string | null;
  firstPaymentDate?: string | null;
  paymentFrequency?: string | null;
  productId?: string | null;
}

export interface CoreReceipt {
  /** The core's identifier of the loan (account number, loan id, package path). */
  coreReference: string;
  loanExternalId: string;
  mappingVersion: string;
  records: Array<{ type: string; externalId: string; coreId: string }>;
  documents: Array<{ documentId: string; sha256: string; bytes: number; coreId?: string }>;
  boardedAt: string;
  /** What the core left out or approximated (e.g. a document it would refuse): review items. */
  warnings?: string[];
  /** The loan's account number in the core: the one it assigned (Fineract accountNo, read back) or the pool's. */
  accountNumber?: string | null;
}

export interface CoreLoanRecord {
  coreReference: string;
  loanExternalId: string;
  mappingVersion: string | null;
  /** What the core holds, converted back to platform units where the adapter can. */
  fields: CanonicalLoanFields;
  /**
   * false when the adapter cannot confirm that every part of the last board is in place (a
   * multi-step write such as Fineract's client, loan, guarantors and documents, or a file package
   * whose batch row is missing). The pipeline then boards again, idempotently by external id,
   * instead of taking the loan's presence as the whole write. Absent means complete.
   */
  complete?: boolean;
}

/** The core refused the data (4xx): the loan is quarantined with the core's own message. */
export class CoreRejectedError extends Error {
  override readonly name = 'CoreRejectedError';
  constructor(
    message: string,
    readonly status: number | null = null,
    readonly detail: unknown = undefined,
  ) {
    super(message);
  }
}

/**
 * The outcome is unknown (timeout, 5xx, connection reset): the write may have committed. The
 * pipeline retries later and the adapter checks by external id before writing again.
 */
export class CoreUnavailableError extends Error {
  override readonly name = 'CoreUnavailableError';
  constructor(
    message: string,
    readonly ambiguous: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A core that collects boards into batches sealed at a cut-off (the file core with batches). */
export interface BatchingCapability {
  /** Seals the open batch when its cut-off has passed; the sealed batch ids. */
  sealDue(): Promise<string[]>;
  /**
   * Seals the open batch now (ops; who and why are kept on the batch); only if it is `id` when given. The
   * sealed id, or undefined when none was open.
   */
  sealNow(reason: string, by: string, id?: string): Promise<string | undefined>;
  /** Batches newest first, with counts, totals and the files of sealed ones (the ops console). */
  list(limit: number): Promise<BatchSummary[]>;
}

export interface BatchSummary {
  id: string;
  status: 'open' | 'sealing' | 'sealed';
  openedAt: number;
  cutoffAt: number;
  sealedAt: number | null;
  sealReason: string | null;
  sealedBy: string | null;
  loanCount: number;
  corrections: number;
  recordCount: number;
  /** Fixed at the seal; an open batch shows what it holds so far. */
  principalCents: string | null;
  /** Files written at the seal (data files, control file, trigger file), with sizes. */
  files: Array<{ name: string; bytes: number }>;
}

/** One line of `config check --connect` about the core. */
export interface CoreCheck {
  name: string;
  status: 'ok' | 'fail' | 'warn' | 'skip';
  detail: string;
}

export interface CoreConnectionCheckInput {
  /** Core product ids the mapping set can produce (lookup values and defaults), to see they exist. */
  productIds: readonly number[];
  /**
   * The same as text, for cores whose products are named by a string (Mambu: a product id or
   * encodedKey): the values of the `productId` / `productTypeKey` lookups and of defaults named so.
   */
  productRefs?: readonly string[];
  /** Custom field sets the mapping writes, by record type (Mambu: properties named `_<setId>`). */
  customFieldSets?: Readonly<Record<string, readonly string[]>>;
  signal?: AbortSignal;
}

/**
 * What the pipeline does about a failed core call (src/lib/disposition.ts), decided here once (as
 * PlatformError.disposition is for the platform), so the pipeline switches on a disposition, never
 * on error classes or status numbers:
 * - `quarantine`: the core refused this loan's data (a 4xx): a person looks at it;
 * - `core-unavailable`: the core could not be reached and nothing was written: try again later;
 * - `core-ambiguous`: the outcome is unknown (a timeout or 5xx after the request went out): ask
 *   the core before writing again;
 * - `fatal`: the core refused the connector itself (credentials, tenant, permission) or a resource
 *   the connector needs is gone: every loan would fail alike, so stop.
 */
export type CoreDisposition = Extract<
  Disposition,
  'quarantine' | 'core-unavailable' | 'core-ambiguous' | 'fatal'
>;

export interface CoreFailure {
  disposition: CoreDisposition;
  /** The loan's lastErrorCode: core.rejected | core.unavailable | core.ambiguous | core.fatal. */
  code: string;
  message: string;
  status: number | null;
  detail: unknown;
}

/** Classifies a failure of a core call; null when it is not one (a platform error, a bug). */
export function classifyCoreFailure(err: unknown): CoreFailure | null {
  if (err instanceof CoreRejectedError)
    return {
      disposition: 'quarantine',
      code: 'core.rejected',
      message: err.message,
      status: err.status,
      detail: err.detail,
    };
  if (err instanceof CoreUnavailableError) {
    return err.ambiguous
      ? {
          disposition: 'core-ambiguous',
          code: 'core.ambiguous',
          message: err.message,
          status: null,
          detail: undefined,
        }
      : {
          disposition: 'core-unavailable',
          code: 'core.unavailable',
          message: err.message,
          status: null,
          detail: undefined,
        };
  }
  if (err instanceof FatalError)
    return {
      disposition: 'fatal',
      code: 'core.fatal',
      message: err.message,
      status: null,
      detail: undefined,
    };
  return null;
}

export interface CoreSystem {
  readonly name: string;
  /** Present only when the core seals batches at a cut-off: the daemon then runs the seal job. */
  readonly batching?: BatchingCapability | undefined;
  /** Boards every record idempotently by external id; safe to call again after any failure. */
  board(pkg: BoardingPackage, opts?: { signal?: AbortSignal }): Promise<CoreReceipt>;
  findLoan(loanExternalId: string): Promise<CoreLoanRecord | null>;
  /** Every loan the core holds that came from the connector (reconciliation); streamed. */
  listLoans?(): AsyncIterable<CoreLoanRecord>;
  health(): Promise<{ ok: boolean; detail?: string }>;
  /**
   * `config check --connect`: whether the core answers with these credentials and can take what the
   * mapping set produces. Reads only, and leaves alone anything a running daemon is doing.
   */
  checkConnection?(input: CoreConnectionCheckInput): Promise<CoreCheck[]>;
  close(): Promise<void>;
  /** The core's existing customers (customer match before create); absent: the core knows none. */
  readonly customers?: CustomerDirectory | undefined;
}

/** One customer the core already has for a tax id (customer match, docs/core.md). */
export interface ExistingCustomer {
  /** The core's customer number (CIF; Fineract: the client id). */
  cif: string;
  /** Does the core's name agree with the platform's after normalising? null: the core has no name. */
  nameAgrees: boolean | null;
}

export interface CustomerQuery {
  /** 9 digits (normalised). */
  tin: string;
  tinType: 'EIN' | 'SSN';
  /** Keyed hash of the tax id (the extract index is keyed by it). */
  tinHash: string;
  /** The platform's name of the business or person. */
  name: string;
}

/**
 * The customer source could not answer (extract missing, unreadable or stale; a search that
 * failed). Never read as "no existing customer": the loan waits (retry_wait with this code).
 */
export class CustomerSourceUnavailableError extends Error {
  override readonly name = 'CustomerSourceUnavailableError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** A core's existing customers, looked up by tax id before a new customer is created. */
export interface CustomerDirectory {
  /** Every customer of the core with this tax id; throws CustomerSourceUnavailableError when it cannot tell. */
  findByTin(q: CustomerQuery, opts?: { signal?: AbortSignal }): Promise<ExistingCustomer[]>;
  /** For /readyz: is the source usable now (an extract present and fresh)? */
  status(): { ok: boolean; detail: string };
}
