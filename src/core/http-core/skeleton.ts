import type { MappedRecord } from '../../contract/records.js';
import type { PlatformDocument } from '../../contract/schemas.js';
import type { Clock } from '../../lib/clock.js';
import { FatalError, errorMessage } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import {
  CoreRejectedError,
  CustomerSourceUnavailableError,
  type BoardingPackage,
  type CanonicalLoanFields,
  type CoreCheck,
  type CoreLoanRecord,
  type CoreReceipt,
  type CustomerDirectory,
  type CustomerQuery,
  type ExistingCustomer,
} from '../port.js';
import { KeyedLock } from '../keyed-lock.js';
import { withoutSecrets } from './client.js';
import { uploadMissingDocuments, type DocumentReceipt, type HeldDocument } from './documents.js';

/**
 * The skeleton every HTTP core boards through (docs/core.md "Writing a fourth HTTP core"):
 * preflight (refuse before any write) → the records, each looked up before it is created
 * (create-once.ts) → the documents the loan does not hold yet (documents.ts) → the receipt. A
 * core supplies the steps that are its own: its preflight, its record writes, where its documents
 * are listed and how one is uploaded; the HTTP client (client.ts) classifies every failure.
 */

/** What preflight decided: the documents to upload (with what the core needs of each), warnings. */
export interface BoardPlan<U extends { doc: PlatformDocument }> {
  uploads: U[];
  warnings: string[];
}

/** The loan the record step wrote or found: the core's handle on it, its reference and number. */
export interface WrittenLoan<L> {
  loan: L;
  coreReference: string;
  accountNumber: string | null;
}

/** How the core is named in the board's log lines. */
export interface CoreVoice {
  /** `Fineract`: `loan boarded in Fineract`. */
  title: string;
  /** The log field of the core's loan id (`fineractLoanId`). */
  loanIdField: string;
  /** The log line of documents left out (names the config key). */
  documentsLeftOut: string;
  /** Where the customer match looks (CustomerDirectory.status). */
  customerSource: string;
  /** The core's address (shown without user info or query). */
  baseUrl: string;
}

export abstract class HttpCore<
  P extends BoardPlan<{ doc: PlatformDocument }>,
  L,
  H extends { close(): Promise<void> },
> {
  /** Two loans boarded concurrently may share a borrower or guarantor: create it once. */
  protected readonly customerLock = new KeyedLock();

  /** The core's existing customers (customer match before create). */
  readonly customers: CustomerDirectory = {
    findByTin: (q, o) => this.findByTin(q, o?.signal),
    status: () => ({ ok: true, detail: this.voice.customerSource }),
  };

  protected constructor(
    protected readonly voice: CoreVoice,
    protected readonly logger: Logger,
    protected readonly clock: Clock,
    protected readonly http: H,
  ) {}

  /** The core's customers holding this tax id; a failed search throws (customerSearch). */
  protected abstract findByTin(q: CustomerQuery, signal?: AbortSignal): Promise<ExistingCustomer[]>;

  /** The cheapest read that proves the core answers these credentials (health). */
  protected abstract ping(): Promise<unknown>;

  async health(): Promise<{ ok: boolean; detail?: string }> {
    try {
      await this.ping();
      return { ok: true, detail: withoutSecrets(this.voice.baseUrl) };
    } catch (err) {
      return { ok: false, detail: errorMessage(err) };
    }
  }

  async close(): Promise<void> {
    await this.http.close();
  }

  /** Refuses what cannot board before any write (CoreRejectedError), so a bad package never leaves half a loan. */
  protected abstract preflight(pkg: BoardingPackage): P;

  /** Writes (or finds) every record of the package; each record's core id goes on `receipt`. */
  protected abstract writeRecords(
    pkg: BoardingPackage,
    plan: P,
    receipt: CoreReceipt['records'],
    signal?: AbortSignal,
  ): Promise<WrittenLoan<L>>;

  /** The documents the loan holds in the core (their marker text, size, id). */
  protected abstract heldDocuments(loan: L, signal?: AbortSignal): Promise<HeldDocument[]>;

  /** Uploads one document (uploadSpooled) to the loan. */
  protected abstract uploadDocument(
    pkg: BoardingPackage,
    upload: P['uploads'][number],
    loan: L,
    signal?: AbortSignal,
  ): Promise<DocumentReceipt>;

  /** The core's loan boarded for this platform loan id (its look-up by external id or reference), or null. */
  protected abstract loanByPlatformId(
    platformId: string,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown> | null>;

  /** What a core loan holds, in platform units (reconciliation). */
  protected abstract canonical(loan: Record<string, unknown>): CanonicalLoanFields;

  /**
   * The loan boarded for this platform id. Incomplete: the loan alone says nothing of the later
   * steps of the same board (guarantors, approval, disbursement, documents), so the pipeline boards
   * again, idempotently, rather than take its presence as the whole write.
   */
  async findLoan(loanExternalId: string): Promise<CoreLoanRecord | null> {
    const l = await this.loanByPlatformId(loanExternalId);
    return l === null ? null : { ...this.loanRecord(l, loanExternalId), complete: false };
  }

  /** A core loan as reconciliation reads it. */
  protected loanRecord(loan: Record<string, unknown>, loanExternalId: string): CoreLoanRecord {
    return {
      coreReference: String(loan['id']),
      loanExternalId,
      mappingVersion: null,
      fields: this.canonical(loan),
    };
  }

  /** The receipt's records of the documents: by default every document the core gave an id. */
  protected documentRecords(
    _pkg: BoardingPackage,
    documents: readonly DocumentReceipt[],
  ): CoreReceipt['records'] {
    return documents.flatMap((d) =>
      d.coreId === undefined ? [] : [{ type: 'document', externalId: d.documentId, coreId: d.coreId }],
    );
  }

  /** Boards every record idempotently by external id; safe to call again after any failure. */
  async board(pkg: BoardingPackage, o: { signal?: AbortSignal } = {}): Promise<CoreReceipt> {
    const signal = o.signal;
    const plan = this.preflight(pkg);
    const records: CoreReceipt['records'] = [];
    const written = await this.writeRecords(pkg, plan, records, signal);
    const documents = await uploadMissingDocuments({
      uploads: plan.uploads,
      held: () => this.heldDocuments(written.loan, signal),
      upload: (u) => this.uploadDocument(pkg, u, written.loan, signal),
      signal,
    });
    records.push(...this.documentRecords(pkg, documents));
    const { warnings } = plan;
    if (warnings.length > 0) this.logger.warn({ loanId: pkg.loanId, warnings }, this.voice.documentsLeftOut);
    this.logger.info(
      {
        loanId: pkg.loanId,
        [this.voice.loanIdField]: written.coreReference,
        records: records.length,
        documents: documents.length,
      },
      `loan boarded in ${this.voice.title}`,
    );
    return {
      coreReference: written.coreReference,
      loanExternalId: pkg.loanId,
      mappingVersion: pkg.mappingVersion,
      records,
      documents,
      boardedAt: new Date(this.clock.now()).toISOString(),
      ...(warnings.length > 0 ? { warnings } : {}),
      accountNumber: written.accountNumber,
    };
  }

  /**
   * The loan product a loan names (`read`, usually once per process: ReadOnce); a product the core
   * does not have refuses the loan, naming the mapping's lookup to fix.
   */
  protected async productOf<T>(
    loanExternalId: string,
    ref: string | number,
    lookup: string,
    read: () => Promise<T>,
  ): Promise<T> {
    try {
      return await read();
    } catch (err) {
      if (err instanceof CoreRejectedError && err.status === 404) {
        throw new CoreRejectedError(
          `loan ${loanExternalId}: ${this.voice.title} has no loan product ${ref}; ` +
            `fix the ${lookup} lookup of the mapping (or its defaults)`,
          404,
          err.detail,
        );
      }
      throw err;
    }
  }

  /**
   * A customer search for the customer match: a search that fails is never "no customer" (the
   * loan waits, CustomerSourceUnavailableError); a refusal of the connector's setup stays fatal.
   */
  protected async customerSearch<T>(what: string, search: () => Promise<T>): Promise<T> {
    try {
      return await search();
    } catch (err) {
      if (err instanceof FatalError) throw err;
      throw new CustomerSourceUnavailableError(
        'customers.search_failed',
        `${what} failed (${errorMessage(err)}); the loan waits rather than create a customer ` +
          `${this.voice.title} may already have`,
      );
    }
  }
}

/**
 * Sorts a package's records by type, refusing before any write a type the core does not take or
 * a record without an external id, and a package without a loan record.
 */
export function recordsByType<T extends string>(
  pkg: BoardingPackage,
  types: readonly T[],
  core: { title: string; mappingSet: string },
  check?: (r: MappedRecord) => void,
): Record<T, MappedRecord[]> {
  const out = Object.fromEntries(types.map((t) => [t, [] as MappedRecord[]])) as Record<T, MappedRecord[]>;
  for (const r of pkg.records) {
    if (!(types as readonly string[]).includes(r.type)) {
      throw new CoreRejectedError(
        `record type "${r.type}" (external id ${r.externalId}) is not supported by the ${core.title} ` +
          `core (supported: ${types.join(', ')}); use the ${core.mappingSet} mapping set`,
      );
    }
    if (typeof r.externalId !== 'string' || r.externalId === '')
      throw new CoreRejectedError(`${r.type} record: externalId must be a non-empty string`);
    check?.(r);
    out[r.type as T].push(r);
  }
  if ((out['loan' as T] ?? []).length === 0)
    throw new CoreRejectedError(`loan ${pkg.loanId}: the mapping produced no loan record`);
  return out;
}

/** One read per key per process (a loan product's settings); a failed read is tried again next time. */
export class ReadOnce<K, V> {
  private readonly reads = new Map<K, Promise<V>>();

  get(key: K, read: () => Promise<V>): Promise<V> {
    let p = this.reads.get(key);
    if (p === undefined) {
      p = read();
      p.catch(() => this.reads.delete(key));
      this.reads.set(key, p);
    }
    return p;
  }
}

/** The checks `config check --connect` skips when the core did not answer its first call. */
export function notAnswered(...names: string[]): CoreCheck[] {
  return names.map((name) => ({ name, status: 'skip', detail: 'the core did not answer' }));
}

/**
 * `core.products` of `config check --connect`: every loan product the mapping set names exists
 * (`describe` reads one and names it; a 404 is "no such loan product").
 */
export async function productsCheck<R extends string | number>(o: {
  refs: readonly R[];
  describe: (ref: R) => Promise<string>;
  /** Said when the mapping set names no product (skip). */
  none: string;
  /** What to do about a missing product. */
  fix: string;
}): Promise<CoreCheck> {
  if (o.refs.length === 0) return { name: 'core.products', status: 'skip', detail: o.none };
  const found: string[] = [];
  const missing: string[] = [];
  for (const ref of o.refs) {
    try {
      found.push(`${ref} (${await o.describe(ref)})`);
    } catch (err) {
      missing.push(
        err instanceof CoreRejectedError && err.status === 404
          ? `${ref}: no such loan product`
          : `${ref}: ${errorMessage(err)}`,
      );
    }
  }
  return missing.length === 0
    ? {
        name: 'core.products',
        status: 'ok',
        detail: `loan products the mapping set uses exist: ${found.join(', ')}`,
      }
    : { name: 'core.products', status: 'fail', detail: `${missing.join('; ')} — ${o.fix}` };
}
