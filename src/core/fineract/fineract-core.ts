import type { Logger } from '../../lib/logger.js';
import type { MappedRecord } from '../../contract/records.js';
import type { PlatformDocument } from '../../contract/schemas.js';
import {
  CoreRejectedError,
  CoreUnavailableError,
  type BoardingPackage,
  type CanonicalLoanFields,
  type CoreLoanRecord,
  type CoreReceipt,
  type CoreCheck,
  type CoreConnectionCheckInput,
  type CoreSystem,
  type CustomerQuery,
  type ExistingCustomer,
} from '../port.js';
import { errorMessage } from '../../lib/errors.js';
import { normaliseName, normaliseTin } from '../../lib/customer-keys.js';
import { safeFileName } from '../safe-name.js';
import {
  DEFAULT_DOCUMENT_POLICY,
  planDocument,
  uploadFileName,
  type FineractDocumentPolicy,
} from './document-policy.js';
import {
  FineractHttp,
  ReplayedFailureError,
  fineractCodes,
  type CallOptions,
  type FineractHttpOptions,
} from './http.js';
import { fineractKey } from './keys.js';
import { fineractExternalId, fineractExternalIdBeforePathSafe } from './external-id.js';
export { documentMarker } from '../http-core/documents.js';
import type { ExternalRefStore } from '../external-refs.js';
import { canonicalFromFineractLoan } from './units.js';
import type { Clock } from '../../lib/clock.js';
import * as httpCore from '../http-core/index.js';

/** The earlier-version search (findByExternalId): records per page, and how many it reads at most. */
const LEGACY_SEARCH_PAGE = 200;
const LEGACY_SEARCH_MAX = 2000;

export interface FineractCoreOptions extends FineractHttpOptions {
  officeId: number;
  approve: boolean;
  disburse: boolean;
  logger: Logger;
  clock: Clock;
  /** Where documents are spooled before the multipart upload (default: the OS temp dir). */
  spoolDir?: string;
  /** Documents Fineract would refuse (type, size): core.http.documents. */
  documents?: FineractDocumentPolicy;
  /**
   * Where a digested externalId is mapped back to its platform id (external-id.ts); without it a listing
   * shows the digest.
   */
  externalRefs?: ExternalRefStore;
}

export const FINERACT_RECORD_TYPES = ['client', 'identifier', 'loan', 'guarantor', 'document'] as const;

/** Replayed failures walked through per write before giving up for this attempt (keys.ts). */
const MAX_KEY_GENERATIONS = 20;

/** What the adapter needs to know of a Fineract loan product (GET /loanproducts/{id}). */
interface ProductFacts {
  name: string;
  floating: boolean;
  holdGuaranteeFunds: boolean;
  minPrincipal: number | null;
  maxPrincipal: number | null;
}

/** Fineract loan status ids (LoanStatus enum). */
const SUBMITTED = 100;
const APPROVED = 200;

interface Ids {
  clients: Map<string, number>;
  loans: Map<string, number>;
  /** Fineract's accountNo of each loan written or found (by the loan record's external id). */
  accountNos: Map<string, string>;
}

type Json = Record<string, unknown>;

type RecordType = (typeof FINERACT_RECORD_TYPES)[number];

/** A document to upload, named and typed as Fineract's whitelist expects (document-policy.ts). */
interface Upload {
  doc: PlatformDocument;
  extension: string;
  contentType: string;
}

interface FineractPlan extends httpCore.BoardPlan<Upload> {
  byType: Record<RecordType, MappedRecord[]>;
}

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
export class FineractCore
  extends httpCore.HttpCore<FineractPlan, number, FineractHttp>
  implements CoreSystem
{
  readonly name = 'fineract';
  /** Product settings, read once per product per process. */
  private readonly products = new httpCore.ReadOnce<number, ProductFacts>();
  private readonly documentPolicy: FineractDocumentPolicy;

  constructor(private readonly opts: FineractCoreOptions) {
    super(
      {
        title: 'Fineract',
        loanIdField: 'fineractLoanId',
        documentsLeftOut: 'documents left out: Fineract would refuse them (core.http.documents)',
        // Customer match: Fineract's clients found by a client identifier (the tax id) with its search API.
        customerSource: 'Fineract client identifier search (GET /search?resource=clientIdentifiers)',
        baseUrl: opts.baseUrl,
      },
      opts.logger.child({ component: 'core.fineract' }),
      opts.clock,
      new FineractHttp(opts),
    );
    this.documentPolicy = opts.documents ?? DEFAULT_DOCUMENT_POLICY;
  }

  protected async writeRecords(
    pkg: BoardingPackage,
    { byType }: FineractPlan,
    receipt: CoreReceipt['records'],
    signal?: AbortSignal,
  ): Promise<httpCore.WrittenLoan<number>> {
    const ids: Ids = { clients: new Map(), loans: new Map(), accountNos: new Map() };
    for (const rec of byType.client) {
      const id = await this.ensureClient(rec, pkg, signal);
      ids.clients.set(rec.externalId, id);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(id) });
    }
    for (const rec of byType.identifier) {
      const id = await this.ensureIdentifier(rec, pkg, ids, signal);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(id) });
    }
    for (const rec of byType.loan) {
      const id = await this.ensureLoan(rec, pkg, ids, signal);
      ids.loans.set(rec.externalId, id);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(id) });
    }
    // Guarantors before approval: a product that holds guarantee funds checks them at approval.
    for (const rec of byType.guarantor) {
      const id = await this.ensureGuarantor(rec, pkg, ids, signal);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(id) });
    }
    if (this.opts.approve || this.opts.disburse) {
      for (const rec of byType.loan)
        await this.ensureCommands(rec, ids.loans.get(rec.externalId) as number, pkg, signal);
    }
    const primary = byType.loan.find((l) => l.externalId === pkg.loanId) ?? byType.loan[0];
    const loanId = primary === undefined ? undefined : ids.loans.get(primary.externalId);
    if (primary === undefined || loanId === undefined) throw new CoreRejectedError('no loan record to board');
    const accountNumber =
      ids.accountNos.get(primary.externalId) ?? (await this.loanAccountNo(loanId, signal));
    return { loan: loanId, coreReference: String(loanId), accountNumber };
  }

  /** Only the documents the mapping made a `document` record of are records of the receipt. */
  protected override documentRecords(
    pkg: BoardingPackage,
    documents: readonly httpCore.DocumentReceipt[],
  ): CoreReceipt['records'] {
    return pkg.records
      .filter((r) => r.type === 'document')
      .flatMap((rec) => {
        const d = documents.find((x) => x.documentId === rec.externalId);
        return d?.coreId === undefined
          ? []
          : [{ type: rec.type, externalId: rec.externalId, coreId: d.coreId }];
      });
  }

  /**
   * The externalId a platform id is stored under (external-id.ts): the id, or its digest when it
   * does not fit Fineract's 100 characters; a digest is recorded before it is first sent.
   */
  private async ext(platformId: string, kind: 'loan' | 'client'): Promise<string> {
    const ref = fineractExternalId(platformId);
    if (ref !== platformId)
      await this.opts.externalRefs?.remember('fineract', ref, platformId, kind, this.clock.now());
    return ref;
  }

  /** Fineract's account number of a loan (its own, or the accountNo the mapping sent). */
  private async loanAccountNo(loanId: number, signal?: AbortSignal): Promise<string | null> {
    const l = await this.http.get<Json>(`/loans/${loanId}`, signal);
    return typeof l['accountNo'] === 'string' && l['accountNo'] !== '' ? l['accountNo'] : null;
  }

  /** Refuses what cannot board before any write, so a bad package never leaves half a loan. */
  protected preflight(pkg: BoardingPackage): FineractPlan {
    // Any length: an externalId longer than Fineract's (100) is stored as a digest (external-id.ts).
    const out = httpCore.recordsByType(pkg, FINERACT_RECORD_TYPES, {
      title: 'Fineract',
      mappingSet: 'fineract',
    });
    const clientIds = new Set(out.client.map((c) => c.externalId));
    for (const l of [...out.loan, ...out.guarantor]) {
      const ref = l.fields['clientExternalId'];
      if (l.type === 'loan' && typeof ref !== 'string') {
        throw new CoreRejectedError(
          `loan record ${l.externalId}: clientExternalId (the borrower client's external id) is missing`,
        );
      }
      if (typeof ref === 'string' && !clientIds.has(ref)) {
        // Allowed (the client may already exist in the core), resolved by look-up at write time.
        this.logger.debug(
          { record: l.externalId, clientExternalId: ref },
          'client reference not in this package',
        );
      }
    }
    for (const i of out.identifier) {
      if (typeof i.fields['clientExternalId'] !== 'string')
        throw new CoreRejectedError(`identifier record ${i.externalId}: clientExternalId is missing`);
      if (!Number.isInteger(i.fields['documentTypeId']) || typeof i.fields['documentKey'] !== 'string') {
        throw new CoreRejectedError(
          `identifier record ${i.externalId}: documentTypeId (a Customer ` +
            `Identifier code value id) and documentKey are required`,
        );
      }
    }
    // Fineract refuses a document only after the loan is written (403 error.msg.document.save):
    // decide every document's fate now, so a refused one never leaves half a loan behind.
    const documents = httpCore.triageDocuments(
      pkg.documents,
      (doc) => {
        const plan = planDocument(doc, this.documentPolicy);
        return plan.upload
          ? { upload: { doc, extension: plan.extension, contentType: plan.contentType } }
          : { reason: plan.reason, action: plan.action };
      },
      'core.http.documents',
    );
    return { byType: out, ...documents };
  }

  /**
   * A write through Fineract's command pipeline under the key chain of keys.ts: a failure that
   * Fineract replays for a key proves that command never committed, so the same write goes again
   * under the chain's next key instead of replaying an old failure for ever.
   */
  private async command<T>(
    path: string,
    opts: Omit<CallOptions, 'idempotencyKey'>,
    action: string,
    parts: string[],
  ): Promise<T> {
    let last: ReplayedFailureError | undefined;
    for (let generation = 0; generation < MAX_KEY_GENERATIONS; generation++) {
      try {
        return await this.http.post<T>(path, {
          ...opts,
          idempotencyKey: fineractKey(action, parts, generation),
        });
      } catch (err) {
        if (!(err instanceof ReplayedFailureError)) throw err;
        last = err;
        this.logger.debug(
          { path: path.replace(/\?.*$/, ''), action, generation },
          'Fineract replayed a stored failure; sending again under the next key',
        );
      }
    }
    throw new CoreUnavailableError(
      `${last?.message ?? path}: ${MAX_KEY_GENERATIONS} stored failures in a row; will retry later`,
      false,
    );
  }

  /** Product settings the loan must agree with, read once per product (GET /loanproducts/{id}). */
  private product(productId: number, signal?: AbortSignal): Promise<ProductFacts> {
    return this.products.get(productId, () =>
      this.http.get<Json>(`/loanproducts/${productId}`, signal).then((j) => {
        const facts: ProductFacts = {
          name: typeof j['name'] === 'string' ? j['name'] : `product ${productId}`,
          floating: j['isLinkedToFloatingInterestRates'] === true || j['isFloatingInterestRate'] === true,
          holdGuaranteeFunds: j['holdGuaranteeFunds'] === true,
          minPrincipal: typeof j['minPrincipal'] === 'number' ? j['minPrincipal'] : null,
          maxPrincipal: typeof j['maxPrincipal'] === 'number' ? j['maxPrincipal'] : null,
        };
        if (facts.holdGuaranteeFunds)
          this.logger.info(
            { productId, product: facts.name },
            'Fineract product holds guarantee funds: guarantors are added before approval',
          );
        return facts;
      }),
    );
  }

  /** Refuses, with what to configure, a loan its Fineract product would refuse. */
  private async checkProduct(rec: MappedRecord, signal?: AbortSignal): Promise<void> {
    const productId = rec.fields['productId'];
    if (typeof productId !== 'number' || !Number.isInteger(productId)) return;
    const facts = await this.productOf(rec.externalId, productId, 'productId', () =>
      this.product(productId, signal),
    );
    if (facts.floating && rec.fields['interestRatePerPeriod'] !== undefined) {
      throw new CoreRejectedError(
        `loan ${rec.externalId}: Fineract product ${productId} (${facts.name}) is linked to floating ` +
          `interest rates, which refuse interestRatePerPeriod; map this loan to a product with a ` +
          `per-year nominal rate (the mapping's productId lookup), or configure the product without floating rates`,
      );
    }
    const principal = Number(rec.fields['principal']);
    if (
      Number.isFinite(principal) &&
      ((facts.minPrincipal !== null && principal < facts.minPrincipal) ||
        (facts.maxPrincipal !== null && principal > facts.maxPrincipal))
    ) {
      throw new CoreRejectedError(
        `loan ${rec.externalId}: principal ${String(rec.fields['principal'])} is outside Fineract ` +
          `product ${productId} (${facts.name}) limits ${facts.minPrincipal ?? 0}–${facts.maxPrincipal ?? '∞'}; ` +
          `widen the product's principal range or map the loan to another product`,
      );
    }
  }

  private ensureClient(rec: MappedRecord, pkg: BoardingPackage, signal?: AbortSignal): Promise<number> {
    return this.customerLock.run(rec.externalId, () => this.ensureClientLocked(rec, pkg, signal));
  }

  /**
   * Clients holding this tax id as a client identifier (any document type): Fineract's search
   * (`GET /search?query=&resource=clientIdentifiers&exactMatch=true`) for the key as 9 digits and
   * dashed, the way banks key it. A search that fails is never "no client": the loan waits.
   */
  protected async findByTin(q: CustomerQuery, signal?: AbortSignal): Promise<ExistingCustomer[]> {
    const d = q.tin;
    const forms = [
      d,
      q.tinType === 'EIN'
        ? `${d.slice(0, 2)}-${d.slice(2)}`
        : `${d.slice(0, 3)}-${d.slice(3, 5)}-${d.slice(5)}`,
    ];
    const clients = new Map<number, string | null>();
    for (const form of forms) {
      const hits = await this.customerSearch('Fineract client identifier search', () =>
        this.http.get<Json[] | null>(
          `/search?query=${encodeURIComponent(form)}&resource=clientIdentifiers&exactMatch=true`,
          signal,
        ),
      );
      for (const h of hits ?? []) {
        if (
          String(h['entityType']).toUpperCase() !== 'CLIENTIDENTIFIER' ||
          normaliseTin(h['entityName']) !== d
        )
          continue;
        const id = numIdOrNull(h['parentId']);
        if (id !== null) clients.set(id, typeof h['parentName'] === 'string' ? h['parentName'] : null);
      }
    }
    return [...clients].map(([id, name]) => ({
      cif: String(id),
      nameAgrees: name === null ? null : normaliseName(name) === normaliseName(q.name),
    }));
  }

  private async ensureClientLocked(
    rec: MappedRecord,
    pkg: BoardingPackage,
    signal?: AbortSignal,
  ): Promise<number> {
    // A customer the bank already has (customer match: the mapping's clientId = $cif(entity)): reuse it.
    const matched = rec.fields['clientId'];
    if (matched !== undefined && matched !== null) {
      const id = typeof matched === 'number' ? matched : Number(matched);
      if (!Number.isSafeInteger(id) || id <= 0)
        throw new CoreRejectedError(
          `client ${rec.externalId}: clientId ${JSON.stringify(matched)} is not a Fineract client id`,
        );
      const c = await this.http.find<Json>(`/clients/${id}`, signal);
      if (c === null)
        throw new CoreRejectedError(
          `client ${rec.externalId}: the matched Fineract client ${id} does not ` +
            `exist (deleted since it was matched?); check the customer and loans retry`,
        );
      return id;
    }
    return httpCore.lookUpOrCreate({
      lookUp: () => this.findClientId(rec.externalId, signal),
      // Last guard before a create: a client that already holds this client's tax id identifier (a
      // mapping without the customer match, or a client added in Fineract since) is reused. Fineract
      // would refuse the identifier on a second client (error.msg.clientIdentifier.identityKey.duplicate).
      reuse: () => this.clientHoldingIdentifier(rec, pkg, signal),
      create: async () => {
        // clientId names an existing client (the customer match above), never a parameter of a create.
        const { clientId: _matched, ...fields } = withoutRefs(rec.fields);
        const body: Json = { ...fields, externalId: await this.ext(rec.externalId, 'client') };
        body['officeId'] ??= this.opts.officeId;
        return this.create(
          `/clients`,
          body,
          'client',
          [rec.externalId, pkg.mappingVersion],
          signal,
          'clientId',
        );
      },
      isDuplicate: isDuplicateExternalId,
    });
  }

  private async clientHoldingIdentifier(
    rec: MappedRecord,
    pkg: BoardingPackage,
    signal?: AbortSignal,
  ): Promise<number | null> {
    const keys = pkg.records
      .filter(
        (r) =>
          r.type === 'identifier' &&
          r.fields['clientExternalId'] === rec.externalId &&
          typeof r.fields['documentKey'] === 'string',
      )
      .map((r) => r.fields['documentKey'] as string);
    for (const key of keys) {
      const hits =
        (await this.http.get<Json[] | null>(
          `/search?query=${encodeURIComponent(key)}&resource=clientIdentifiers&exactMatch=true`,
          signal,
        )) ?? [];
      const ids = [
        ...new Set(
          hits
            .filter(
              (h) => String(h['entityType']).toUpperCase() === 'CLIENTIDENTIFIER' && h['entityName'] === key,
            )
            .map((h) => numIdOrNull(h['parentId']))
            .filter((x): x is number => x !== null),
        ),
      ];
      if (ids.length > 1)
        throw new CoreRejectedError(
          `client ${rec.externalId}: ${ids.length} Fineract clients (${ids.join(', ')}) ` +
            `hold its tax id identifier; merge them in Fineract, then loans retry`,
        );
      if (ids.length === 1) {
        this.logger.warn(
          { loanId: pkg.loanId, client: rec.externalId, fineractClientId: ids[0] },
          'a Fineract client already holds this tax id identifier: reused, no second client created',
        );
        return ids[0] as number;
      }
    }
    return null;
  }

  private async findClientId(externalId: string, signal?: AbortSignal): Promise<number | null> {
    const c = await this.findByExternalId('clients', externalId, signal);
    return c === null ? null : numId(c['id'], `client ${externalId}`);
  }

  /**
   * A client or loan by its platform id: by the current externalId (external-id.ts, always
   * path-safe) with `GET /{resource}/external-id/{id}`; then, for an id whose form changed (one of
   * at most 100 characters with characters a path cannot carry, boarded by an earlier version
   * under the raw id), by that earlier form with the search `GET /{resource}?externalId=` (a query
   * takes any character), so a record boarded then is found and never written twice.
   */
  private async findByExternalId(
    resource: 'clients' | 'loans',
    platformId: string,
    signal?: AbortSignal,
  ): Promise<Json | null> {
    const current = fineractExternalId(platformId);
    const found = await this.http.find<Json>(
      `/${resource}/external-id/${encodeURIComponent(current)}`,
      signal,
    );
    const legacy = fineractExternalIdBeforePathSafe(platformId);
    if (found !== null || legacy === current) return found;
    // Fineract's search compares with LIKE: `%` and `_` in the id match other records too, so every
    // page is read and only the exact externalId counts (a short page could hide the real one).
    const items: Json[] = [];
    for (let offset = 0; ; offset += LEGACY_SEARCH_PAGE) {
      if (offset >= LEGACY_SEARCH_MAX) {
        throw new CoreRejectedError(
          `${resource === 'loans' ? 'loan' : 'client'} ${platformId}: Fineract's search for ` +
            `externalId ${legacy} matches over ${LEGACY_SEARCH_MAX} records (it treats % and _ as ` +
            `wildcards); cannot tell whether an earlier version boarded it, so nothing is written`,
        );
      }
      const page = await this.http.get<{ pageItems?: Json[]; totalFilteredRecords?: number } | Json[] | null>(
        `/${resource}?externalId=${encodeURIComponent(legacy)}&offset=${offset}&limit=${LEGACY_SEARCH_PAGE}`,
        signal,
      );
      const rows = Array.isArray(page) ? page : (page?.pageItems ?? []);
      items.push(...rows.filter((x) => x['externalId'] === legacy));
      const total = Array.isArray(page) ? null : (page?.totalFilteredRecords ?? null);
      if (
        rows.length < LEGACY_SEARCH_PAGE ||
        (total !== null && offset + rows.length >= total) ||
        items.length > 1
      )
        break;
    }
    if (items.length > 1)
      throw new CoreRejectedError(
        `${resource === 'loans' ? 'loan' : 'client'} ${platformId}: ${items.length} Fineract ` +
          `records hold externalId ${legacy}; merge them in Fineract, then the loan retries`,
      );
    if (items[0] !== undefined)
      this.logger.info(
        { resource, platformId, fineractId: items[0]['id'] },
        'found under the externalId an earlier version wrote (the raw platform id): used as it is',
      );
    return items[0] ?? null;
  }

  private async resolveClient(
    externalId: string,
    ids: Ids,
    what: string,
    signal?: AbortSignal,
  ): Promise<number> {
    const id = ids.clients.get(externalId) ?? (await this.findClientId(externalId, signal));
    if (id === null)
      throw new CoreRejectedError(`${what}: client ${externalId} is neither in the package nor in the core`);
    ids.clients.set(externalId, id);
    return id;
  }

  private async findLoanJson(externalId: string, signal?: AbortSignal): Promise<Json | null> {
    return this.findByExternalId('loans', externalId, signal);
  }

  private async ensureLoan(
    rec: MappedRecord,
    pkg: BoardingPackage,
    ids: Ids,
    signal?: AbortSignal,
  ): Promise<number> {
    return httpCore.lookUpOrCreate({
      lookUp: async () => {
        const found = await this.findLoanJson(rec.externalId, signal);
        if (found === null) return null;
        if (typeof found['accountNo'] === 'string' && found['accountNo'] !== '')
          ids.accountNos.set(rec.externalId, found['accountNo']);
        return numId(found['id'], `loan ${rec.externalId}`);
      },
      create: async () => {
        const clientId = await this.resolveClient(
          String(rec.fields['clientExternalId']),
          ids,
          `loan ${rec.externalId}`,
          signal,
        );
        await this.checkProduct(rec, signal);
        const body: Json = {
          ...withDecimalNumbers(withoutCommandDates(withoutRefs(rec.fields))),
          externalId: await this.ext(rec.externalId, 'loan'),
          clientId,
        };
        return this.create(`/loans`, body, 'loan', [rec.externalId, pkg.mappingVersion], signal, 'loanId');
      },
      // If Fineract says the external id already exists (a concurrent writer, or a replay whose
      // look-up raced), the existing record is the answer.
      isDuplicate: isDuplicateExternalId,
    });
  }

  /** POST that creates a record under the key chain (command): the core's id of it. */
  private async create(
    path: string,
    body: Json,
    action: string,
    keyParts: string[],
    signal: AbortSignal | undefined,
    idField: string,
  ): Promise<number> {
    const res = await this.command<Json>(path, { body, ...(signal ? { signal } : {}) }, action, keyParts);
    return numId(res[idField] ?? res['resourceId'], `${path} response`);
  }

  /**
   * Approve / disburse by config, decided from the loan's current status (never twice). The key
   * carries the mapping version and the command's body, so a retry after a fix (a date, the
   * business date, a product) is a new command rather than the replay of an old failure.
   */
  private async ensureCommands(
    rec: MappedRecord,
    loanId: number,
    pkg: BoardingPackage,
    signal?: AbortSignal,
  ): Promise<void> {
    const f = rec.fields;
    const fmt = { dateFormat: f['dateFormat'] ?? 'yyyy-MM-dd', locale: f['locale'] ?? 'en' };
    let status = await this.loanStatus(loanId, signal);
    if (this.opts.approve && status === SUBMITTED) {
      const body = {
        approvedOnDate: f['approvedOnDate'] ?? f['submittedOnDate'],
        ...fmt,
        note: 'approved by boarding-connector',
      };
      await this.command(
        `/loans/${loanId}?command=approve`,
        { body, ...(signal ? { signal } : {}) },
        'approve',
        [rec.externalId, pkg.mappingVersion, JSON.stringify(body)],
      );
      status = APPROVED;
    }
    if (this.opts.disburse && status === APPROVED) {
      const body = {
        actualDisbursementDate: f['actualDisbursementDate'] ?? f['expectedDisbursementDate'],
        ...fmt,
        note: 'disbursed by boarding-connector',
      };
      await this.command(
        `/loans/${loanId}?command=disburse`,
        { body, ...(signal ? { signal } : {}) },
        'disburse',
        [rec.externalId, pkg.mappingVersion, JSON.stringify(body)],
      );
    }
  }

  private async loanStatus(loanId: number, signal?: AbortSignal): Promise<number | null> {
    const l = await this.http.get<Json>(`/loans/${loanId}`, signal);
    const s = l['status'];
    return s !== null && typeof s === 'object' && typeof (s as Json)['id'] === 'number'
      ? ((s as Json)['id'] as number)
      : null;
  }

  private async ensureGuarantor(
    rec: MappedRecord,
    pkg: BoardingPackage,
    ids: Ids,
    signal?: AbortSignal,
  ): Promise<number> {
    const loanExt =
      typeof rec.fields['loanExternalId'] === 'string' ? rec.fields['loanExternalId'] : pkg.loanId;
    const loanId = ids.loans.get(loanExt) ?? numIdOrNull((await this.findLoanJson(loanExt, signal))?.['id']);
    if (loanId === null)
      throw new CoreRejectedError(`guarantor ${rec.externalId}: loan ${loanExt} is not in the core`);
    const typeId = Number(rec.fields['guarantorTypeId'] ?? 1);
    const body: Json = { ...withDecimalNumbers(withoutRefs(rec.fields)), guarantorTypeId: typeId };
    let entityId: number | null = null;
    if (typeId === 1) {
      const ref = rec.fields['clientExternalId'];
      if (typeof ref !== 'string')
        throw new CoreRejectedError(
          `guarantor ${rec.externalId}: clientExternalId is missing (guarantorTypeId 1)`,
        );
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
    const res = await this.command<Json>(
      `/loans/${loanId}/guarantors`,
      { body, ...(signal ? { signal } : {}) },
      'guarantor',
      [loanExt, rec.externalId, pkg.mappingVersion],
    );
    return numId(res['resourceId'], 'guarantor response');
  }

  /**
   * A client identifier (tax id) from an `identifier` record: `{ clientExternalId, documentTypeId,
   * documentKey, description? }`. One identifier per client and document type; an existing one is
   * the answer (Fineract refuses a second of the same type).
   */
  private async ensureIdentifier(
    rec: MappedRecord,
    pkg: BoardingPackage,
    ids: Ids,
    signal?: AbortSignal,
  ): Promise<number> {
    const clientId = await this.resolveClient(
      String(rec.fields['clientExternalId']),
      ids,
      `identifier ${rec.externalId}`,
      signal,
    );
    const typeId = rec.fields['documentTypeId'] as number;
    const existing = (await this.http.get<Json[] | null>(`/clients/${clientId}/identifiers`, signal)) ?? [];
    const same = existing.find(
      (i) => Number((i['documentType'] as Json | undefined)?.['id'] ?? i['documentTypeId']) === typeId,
    );
    if (same !== undefined) {
      if (same['documentKey'] !== rec.fields['documentKey']) {
        this.logger.warn(
          { loanId: pkg.loanId, clientId, documentTypeId: typeId },
          'client already holds a different identifier of this type in Fineract; left as it is',
        );
      }
      return numId(same['id'], `identifier of client ${clientId}`);
    }
    const body: Json = { ...withoutRefs(rec.fields) };
    const res = await this.command<Json>(
      `/clients/${clientId}/identifiers`,
      { body, ...(signal ? { signal } : {}) },
      'identifier',
      [rec.externalId, String(typeId), pkg.mappingVersion],
    );
    return numId(res['resourceId'], 'identifier response');
  }

  /**
   * Fineract has no external id on documents, so each upload carries a marker `[doc:<platform id>]`
   * in its description (http-core/documents.ts); a document whose marker is already there is skipped.
   */
  protected async heldDocuments(loanId: number, signal?: AbortSignal): Promise<httpCore.HeldDocument[]> {
    const existing = (await this.http.get<Json[] | null>(`/loans/${loanId}/documents`, signal)) ?? [];
    return existing.map((e) => ({
      text: typeof e['description'] === 'string' ? e['description'] : '',
      bytes: Number(e['size'] ?? 0),
      coreId: String(e['id']),
    }));
  }

  /** Spooled to a temp file first (hash verified, size known), streamed from disk into the multipart body. */
  protected uploadDocument(
    pkg: BoardingPackage,
    { doc, extension, contentType }: Upload,
    loanId: number,
    signal?: AbortSignal,
  ): Promise<httpCore.DocumentReceipt> {
    const rec = pkg.records.find((r) => r.type === 'document' && r.externalId === doc.id);
    const maxBytes = this.documentPolicy.maxBytes;
    const spooled = {
      ...{ fetchDocument: pkg.fetchDocument, doc, spoolDir: this.opts.spoolDir, maxBytes, signal },
      overCap: (bytes: number) =>
        `document ${doc.id} is ${bytes} bytes, over Fineract's upload ` +
        `cap of ${maxBytes} (core.http.documents.maxBytes)`,
    };
    return httpCore.uploadSpooled(spooled, async (path) => {
      const name = (asText(rec?.fields['name']) || doc.name || doc.id).slice(0, 250);
      const described =
        asText(rec?.fields['description']) ||
        [doc.category, doc.period ?? doc.requirement?.period]
          .filter((x) => typeof x === 'string' && x !== '')
          .join(' · ');
      // Named and typed as Fineract's whitelist expects (document-policy.ts). Uploads bypass
      // Fineract's command pipeline, so no Idempotency-Key: the [doc:id] marker is the guard.
      const form = await httpCore.uploadForm(
        [
          ['name', name],
          ['description', httpCore.markedText(described, doc.id)],
        ],
        { path, type: contentType, name: uploadFileName(safeFileName(doc.name, doc.id), extension) },
      );
      const res = await this.http.post<Json>(`/loans/${loanId}/documents`, {
        form,
        ...(signal ? { signal } : {}),
      });
      return asText(res['resourceId']);
    });
  }

  protected loanByPlatformId(platformId: string, signal?: AbortSignal): Promise<Json | null> {
    return this.findLoanJson(platformId, signal);
  }

  protected canonical(loan: Json): CanonicalLoanFields {
    return canonicalFromFineractLoan(loan);
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
          const loanExternalId =
            (await this.opts.externalRefs?.platformIdOf('fineract', l['externalId'])) ?? l['externalId'];
          yield this.loanRecord(l, loanExternalId);
        }
      }
      if (items.length < limit) return;
    }
  }

  /**
   * Why the office check failed, naming the key to change. A 404 is a missing office only when
   * Fineract says so (its error code, or its office list answers); a 404 or an answer that is not
   * Fineract's means core.http.baseUrl points elsewhere (regression, issue 42: a wrong URL path
   * was reported as `Fineract has no office 1 (core.http.officeId)`).
   */
  private async officeFailure(err: unknown, signal?: AbortSignal): Promise<string> {
    const url = httpCore.withoutSecrets(this.opts.baseUrl);
    const wrongUrl = (what: string): string =>
      `core.http.baseUrl: ${url} does not answer as Fineract's API (${what}); check the URL, which ` +
      'usually ends in /fineract-provider/api/v1';
    if (err instanceof CoreUnavailableError) return `core.http.baseUrl: ${errorMessage(err)}`;
    if (!(err instanceof CoreRejectedError)) return errorMessage(err);
    if (err.status === 200) return wrongUrl(err.message);
    if (err.status !== 404) return errorMessage(err);
    const missing = `Fineract has no office ${this.opts.officeId} (core.http.officeId)`;
    if (fineractCodes(err.detail).includes('error.msg.office.id.invalid')) return missing;
    try {
      const offices = await this.http.get<unknown>('/offices', signal);
      return Array.isArray(offices)
        ? missing
        : wrongUrl(`GET /offices/${this.opts.officeId} → 404, GET /offices answers no office list`);
    } catch (listErr) {
      return wrongUrl(`GET /offices/${this.opts.officeId} → 404; ${errorMessage(listErr)}`);
    }
  }

  /** The office answers (credentials, tenant, office id), then every product the mapping set can produce. */
  async checkConnection(input: CoreConnectionCheckInput): Promise<CoreCheck[]> {
    const checks: CoreCheck[] = [];
    try {
      const office = await this.http.get<Json>(`/offices/${this.opts.officeId}`, input.signal);
      if (office === null || typeof office !== 'object' || typeof office['id'] !== 'number')
        throw new CoreRejectedError(
          `GET /offices/${this.opts.officeId} answered, but not with an office`,
          200,
        );
      const name = typeof office['name'] === 'string' ? ` (${office['name']})` : '';
      checks.push({
        name: 'core',
        status: 'ok',
        detail:
          `Fineract at ${httpCore.withoutSecrets(this.opts.baseUrl)} answers for tenant ${this.opts.tenantId}, ` +
          `user ${this.opts.username}; office ${this.opts.officeId}${name} exists`,
      });
    } catch (err) {
      const detail = await this.officeFailure(err, input.signal);
      checks.push({ name: 'core', status: 'fail', detail }, ...httpCore.notAnswered('core.products'));
      return checks;
    }
    checks.push(
      await httpCore.productsCheck({
        refs: [...new Set(input.productIds)].sort((a, b) => a - b),
        describe: async (id) => {
          const facts = await this.product(id, input.signal);
          return `${facts.name}${facts.floating ? ', floating rate' : ''}`;
        },
        none: 'the mapping set names no loan product id (lookup productId, defaults *productId)',
        fix: "fix the mapping's productId lookup or defaults, or create the product in Fineract",
      }),
    );
    return checks;
  }

  protected ping(): Promise<unknown> {
    return this.http.get(`/offices/${this.opts.officeId}`);
  }
}

/** Fineract's duplicate-external-id answers: loans (pre-check), clients (unique constraint). */
const DUPLICATE_EXTERNAL_ID = new Set([
  'error.msg.loan.with.externalId.already.used',
  'error.msg.client.duplicate.externalId',
]);

function isDuplicateExternalId(detail: unknown): boolean {
  return fineractCodes(detail).some(
    (c) => DUPLICATE_EXTERNAL_ID.has(c) || (/externalid/i.test(c) && /duplicate|already/i.test(c)),
  );
}

/** `*ExternalId` references are the connector's, not Fineract parameters (it rejects unknown ones). */
function withoutRefs(fields: Record<string, unknown>): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(fields)) if (!/.ExternalId$/.test(k)) out[k] = v;
  return out;
}

/**
 * Dates of the approve and disburse commands a loan record may carry (ensureCommands reads them):
 * not parameters of the loan application, which Fineract would refuse as unsupported (400).
 */
const COMMAND_DATES = ['approvedOnDate', 'actualDisbursementDate'];

function withoutCommandDates(fields: Json): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(fields)) if (!COMMAND_DATES.includes(k)) out[k] = v;
  return out;
}

/**
 * Fineract's BigDecimal parameters, typed `number` in its OpenAPI (LoansApiResourceSwagger
 * PostLoansRequest, GuarantorJSONinputParams.AMOUNT).
 */
const DECIMAL_PARAMS = new Set([
  'principal',
  'interestRatePerPeriod',
  'interestRateDifferential',
  'fixedEmiAmount',
  'maxOutstandingLoanBalance',
  'inArrearsTolerance',
  'fixedPrincipalPercentagePerInstallment',
  'amount',
]);

/**
 * A mapped decimal (a string: integer/string math, never a float) as the JSON number Fineract's
 * OpenAPI types it. The number's JSON text is the decimal itself — JSON.stringify writes the
 * shortest text that reads back as the same double, and a decimal of at most 15 significant digits
 * (principal is DECIMAL(19,6), refused at 10^13 by the mapping; rates have a few) is that text — so
 * Fineract's BigDecimal reads exactly what the mapping wrote. A longer decimal stays a string,
 * which Fineract also reads (with the request's locale).
 */
export function withDecimalNumbers(fields: Json): Json {
  const out: Json = { ...fields };
  for (const k of DECIMAL_PARAMS) {
    const v = out[k];
    if (typeof v !== 'string' || !/^-?\d+(\.\d+)?$/.test(v)) continue;
    const digits = v.replace(/^-/, '').replace('.', '').replace(/^0+/, '');
    const n = Number(v);
    if (digits.length <= 15 && Number.isFinite(n) && decimalEquals(String(n), v)) out[k] = n;
  }
  return out;
}

/** `1250000.5` and `1250000.50` are the same decimal. */
function decimalEquals(a: string, b: string): boolean {
  const norm = (x: string) => {
    const [i = '', f = ''] = x.replace(/^-/, '').split('.');
    return `${x.startsWith('-') ? '-' : ''}${i.replace(/^0+(?=\d)/, '')}.${f.replace(/0+$/, '')}`;
  };
  return norm(a) === norm(b);
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
