import { createHash } from 'node:crypto';
import type { MappedRecord } from '../../contract/records.js';
import type { PlatformDocument } from '../../contract/schemas.js';
import type { Clock } from '../../lib/clock.js';
import { normaliseName, normaliseTin } from '../../lib/customer-keys.js';
import { isValidTimeZone, localDate } from '../../lib/calendar.js';
import { errorMessage } from '../../lib/errors.js';
import type { Logger } from '../../lib/logger.js';
import type { ExternalRefStore } from '../external-refs.js';
import {
  CoreRejectedError,
  type BoardingPackage,
  type CanonicalLoanFields,
  type CoreCheck,
  type CoreConnectionCheckInput,
  type CoreLoanRecord,
  type CoreReceipt,
  type CoreSystem,
  type CustomerQuery,
  type ExistingCustomer,
} from '../port.js';
import { safeFileName } from '../safe-name.js';
import { MambuDecimal, MambuHttp, isDuplicateId, type MambuHttpOptions } from './http.js';
import {
  derivedMambuId,
  isMambuId,
  mambuDocumentName,
  mambuIdempotencyKey,
  mambuRef,
  type MambuKind,
} from './ids.js';
import { canonicalFromMambuLoan } from './units.js';
import { LOAN_DATE_TIME_FIELDS, mambuDateTime } from './dates.js';
import * as httpCore from '../http-core/index.js';
export { documentMarker } from '../http-core/documents.js';

export const MAMBU_RECORD_TYPES = ['client', 'group', 'loan', 'document'] as const;
type RecordType = (typeof MAMBU_RECORD_TYPES)[number];

export interface MambuCoreOptions extends MambuHttpOptions {
  approve: boolean;
  disburse: boolean;
  /** Branch for new clients, groups and loans when the mapping names none (assignedBranchKey). */
  branchKey?: string | undefined;
  /** Where the tax id lives (<customFieldSetId>.<customFieldId>), searched by the customer match. */
  taxIdField: { clients: string; groups: string };
  /** The loan custom field that holds the platform loan id (look-up after a crash, reconciliation). */
  loanRefField: string;
  /**
   * The tenant's time zone (core.mambu.timeZone, default bank.timeZone): Mambu types
   * expectedDisbursementDate and firstRepaymentDate as date-time with an offset, so a mapped day is
   * sent as that day's midnight there, with the offset in force then.
   */
  timeZone: string;
  documents: { maxBytes: number; refused: 'skip' | 'quarantine' };
  logger: Logger;
  clock: Clock;
  /** Where documents are spooled before the multipart upload (default: the OS temp dir). */
  spoolDir?: string;
  /** Where a digested loan reference is mapped back to its platform id (ids.ts mambuRef). */
  externalRefs?: ExternalRefStore | undefined;
}

/** Mambu's largest page (limit ≤ 1000). */
const PAGE = 1000;
/** Record fields that are the connector's, never sent to Mambu. */
const CONNECTOR_FIELDS = new Set(['existing']);
/** Fields Mambu takes as numbers that the mapping gives as exact decimal strings. */
const DECIMAL_FIELDS: ReadonlyArray<readonly string[]> = [
  ['loanAmount'],
  ['interestSettings', 'interestRate'],
];

type Json = Record<string, unknown>;

interface Holder {
  id: string;
  encodedKey: string;
}

interface Ids {
  clients: Map<string, Holder>;
  groups: Map<string, Holder>;
}

interface MambuPlan extends httpCore.BoardPlan<{ doc: PlatformDocument }> {
  byType: Record<RecordType, MappedRecord[]>;
}

const enc = encodeURIComponent;

/**
 * Mambu (API v2) as the core. Exactly once across every retry horizon: each client, group and loan
 * account gets an id the connector supplies and never changes (the bank's number from its pool, the
 * matched customer's id, or one derived from the platform id: ids.ts), is looked up by it before a
 * create, and a second create with it is refused by Mambu (DUPLICATE_ID) — the lasting guard, since
 * Mambu keeps an Idempotency-Key six hours and caches no failure. Every write also carries a v4-UUID
 * Idempotency-Key derived from what it does, the same on every retry and after a restart.
 * Disbursements carry a unique externalId, searched before one is made; documents a `[doc:<id>]`
 * marker in their notes.
 *
 * Record types: `client` (people), `group` (businesses, members by `memberExternalIds`), `loan`
 * (`accountHolderExternalId` + `accountHolderType`), `document` (the mambu mapping set).
 */
export class MambuCore extends httpCore.HttpCore<MambuPlan, Json, MambuHttp> implements CoreSystem {
  readonly name = 'mambu';
  /** Product encodedKeys by the mapping's id or key, read once per process. */
  private readonly products = new httpCore.ReadOnce<string, Json>();
  private readonly loanRef: { set: string; field: string };

  constructor(private readonly opts: MambuCoreOptions) {
    super(
      {
        title: 'Mambu',
        loanIdField: 'mambuLoanId',
        documentsLeftOut: 'documents left out: over core.mambu.documents.maxBytes',
        customerSource: `Mambu search by custom field (${opts.taxIdField.clients}, ${opts.taxIdField.groups})`,
        baseUrl: opts.baseUrl,
      },
      opts.logger.child({ component: 'core.mambu' }),
      opts.clock,
      new MambuHttp(opts),
    );
    const [set, field] = opts.loanRefField.split('.');
    this.loanRef = { set: set ?? '_boarding_Loans', field: field ?? 'platformLoanId' };
  }

  protected async writeRecords(
    pkg: BoardingPackage,
    { byType }: MambuPlan,
    receipt: CoreReceipt['records'],
    signal?: AbortSignal,
  ): Promise<httpCore.WrittenLoan<Json>> {
    // The products first: a loan its product would refuse stops here, before any client or group is made.
    for (const rec of byType.loan) await this.checkProduct(rec, signal);
    const ids: Ids = { clients: new Map(), groups: new Map() };
    for (const rec of byType.client) {
      const h = await this.ensureHolder('client', rec, pkg, ids, signal);
      ids.clients.set(rec.externalId, h);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: h.id });
    }
    for (const rec of byType.group) {
      const h = await this.ensureHolder('group', rec, pkg, ids, signal);
      ids.groups.set(rec.externalId, h);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: h.id });
    }
    const primary = byType.loan.find((l) => l.externalId === pkg.loanId) ?? byType.loan[0];
    if (primary === undefined) throw new CoreRejectedError('no loan record to board');
    let loan: Json | undefined;
    for (const rec of byType.loan) {
      const l = await this.ensureLoan(rec, pkg, ids, signal);
      if (this.opts.approve || this.opts.disburse) await this.ensureCommands(rec, l, pkg, signal);
      receipt.push({ type: rec.type, externalId: rec.externalId, coreId: String(l['id']) });
      if (rec === primary) loan = l;
    }
    const loanId = text(loan?.['id']);
    return { loan: loan as Json, coreReference: loanId, accountNumber: loanId };
  }

  /** Refuses what cannot board before any write, so a bad package never leaves half a loan. */
  protected preflight(pkg: BoardingPackage): MambuPlan {
    const out = httpCore.recordsByType(
      pkg,
      MAMBU_RECORD_TYPES,
      { title: 'Mambu', mappingSet: 'mambu' },
      (r) => {
        const id = r.fields['id'];
        if (id !== undefined && id !== null && (typeof id !== 'string' || !isMambuId(id))) {
          throw new CoreRejectedError(
            `${r.type} ${r.externalId}: id ${JSON.stringify(id)} is not a Mambu id (letters and ` +
              `digits, at most 32); check identity.*Numbers.pool (prefix, width) or the mapping's id`,
          );
        }
        if (r.type !== 'document') {
          for (const [k, v] of Object.entries(r.fields)) {
            if (k.startsWith('_') && (v === null || typeof v !== 'object' || Array.isArray(v)))
              throw new CoreRejectedError(
                `${r.type} ${r.externalId}: custom field set ${k} must be an object of field id → value`,
              );
          }
        }
      },
    );
    for (const l of out.loan) {
      if (typeof l.fields['accountHolderExternalId'] !== 'string')
        throw new CoreRejectedError(
          `loan record ${l.externalId}: accountHolderExternalId (the borrower's platform id) is missing`,
        );
      if (l.fields['accountHolderType'] !== 'CLIENT' && l.fields['accountHolderType'] !== 'GROUP')
        throw new CoreRejectedError(`loan record ${l.externalId}: accountHolderType must be CLIENT or GROUP`);
      if (typeof l.fields['productTypeKey'] !== 'string' || l.fields['productTypeKey'] === '')
        throw new CoreRejectedError(
          `loan record ${l.externalId}: productTypeKey (a Mambu loan product id or encodedKey) is missing`,
        );
      this.withMambuDates(l);
    }
    const { maxBytes, refused } = this.opts.documents;
    const documents = httpCore.triageDocuments(
      pkg.documents,
      (doc) =>
        typeof doc.size === 'number' && doc.size > maxBytes
          ? {
              reason: `document ${doc.id} is ${doc.size} bytes, over core.mambu.documents.maxBytes (${maxBytes})`,
              action: refused,
            }
          : { upload: { doc } },
      'core.mambu.documents.refused',
    );
    return { byType: out, ...documents };
  }

  /** A write's Idempotency-Key: what it does (action, record, mapping version, body), as a v4 UUID. */
  private key(action: string, parts: string[], body: unknown): string {
    return mambuIdempotencyKey(action, [
      ...parts,
      createHash('sha256')
        .update(JSON.stringify(body) ?? '')
        .digest('base64url'),
    ]);
  }

  private ensureHolder(
    kind: 'client' | 'group',
    rec: MappedRecord,
    pkg: BoardingPackage,
    ids: Ids,
    signal?: AbortSignal,
  ): Promise<Holder> {
    const id = this.holderId(kind, rec);
    return this.customerLock.run(`${kind}:${id}`, () =>
      this.ensureHolderLocked(kind, id, rec, pkg, ids, signal),
    );
  }

  private holderId(kind: MambuKind, rec: MappedRecord): string {
    const id = rec.fields['id'];
    return typeof id === 'string' && id !== '' ? id : derivedMambuId(kind, rec.externalId);
  }

  private async ensureHolderLocked(
    kind: 'client' | 'group',
    id: string,
    rec: MappedRecord,
    pkg: BoardingPackage,
    ids: Ids,
    signal?: AbortSignal,
  ): Promise<Holder> {
    const resource = kind === 'client' ? 'clients' : 'groups';
    const lookUp = async (): Promise<Holder | null> => {
      const found = await this.http.find<Json>(`/${resource}/${enc(id)}`, signal);
      return found === null ? null : holderOf(found, `${kind} ${id}`);
    };
    return httpCore.lookUpOrCreate({
      lookUp,
      reuse: () => {
        if (rec.fields['existing'] === true) {
          throw new CoreRejectedError(
            `${kind} ${rec.externalId}: the matched Mambu ${kind} ${id} does not exist ` +
              `(deleted since it was matched?); check the customer, then loans retry`,
          );
        }
        // Last guard before a create: a customer that already holds this tax id (made in Mambu by a
        // person, or boarded without the customer match) is reused, never doubled.
        return this.holderWithTaxId(kind, rec, pkg, signal);
      },
      create: async () => {
        const body = this.holderBody(kind, id, rec, pkg, ids);
        const res = await this.http.post<Json>(`/${resource}`, {
          body,
          idempotencyKey: this.key(kind, [rec.externalId, pkg.mappingVersion], body),
          ...(signal ? { signal } : {}),
        });
        return holderOf(res, `${kind} ${id}`);
      },
      isDuplicate: isDuplicateId,
    });
  }

  /** A new client's or group's body: its fields, the supplied id, the branch, a group's members. */
  private holderBody(
    kind: 'client' | 'group',
    id: string,
    rec: MappedRecord,
    pkg: BoardingPackage,
    ids: Ids,
  ): Json {
    const body: Json = { ...this.outgoing(rec), id };
    if (this.opts.branchKey !== undefined && body['assignedBranchKey'] === undefined)
      body['assignedBranchKey'] = this.opts.branchKey;
    if (kind === 'group') {
      const members = Array.isArray(rec.fields['memberExternalIds'])
        ? (rec.fields['memberExternalIds'] as unknown[]).filter((m): m is string => typeof m === 'string')
        : [];
      const keys: Json[] = [];
      for (const m of [...new Set(members)]) {
        const c = ids.clients.get(m);
        if (c === undefined) {
          this.logger.warn(
            { loanId: pkg.loanId, group: rec.externalId, member: m },
            'group member is not a client of this package: left out',
          );
          continue;
        }
        keys.push({ clientKey: c.encodedKey });
      }
      if (keys.length > 0) body['groupMembers'] = keys;
    }
    return body;
  }

  /** The tax id a client or group record carries in the configured custom field. */
  private taxIdOf(kind: 'client' | 'group', rec: MappedRecord): string | null {
    const [set, field] = (
      kind === 'client' ? this.opts.taxIdField.clients : this.opts.taxIdField.groups
    ).split('.');
    const values = rec.fields[set ?? ''];
    const v = values !== null && typeof values === 'object' ? (values as Json)[field ?? ''] : undefined;
    return typeof v === 'string' && v !== '' ? v : null;
  }

  private async holderWithTaxId(
    kind: 'client' | 'group',
    rec: MappedRecord,
    pkg: BoardingPackage,
    signal?: AbortSignal,
  ): Promise<Holder | null> {
    const tin = this.taxIdOf(kind, rec);
    if (tin === null) return null;
    const hits = await this.searchByTaxId(kind, tin, signal);
    if (hits.length > 1)
      throw new CoreRejectedError(
        `${kind} ${rec.externalId}: ${hits.length} Mambu ${kind}s ` +
          `(${hits.map((h) => String(h['id'])).join(', ')}) hold its tax id; merge them in Mambu, then loans retry`,
      );
    const hit = hits[0];
    if (hit === undefined) return null;
    this.logger.warn(
      { loanId: pkg.loanId, entity: rec.externalId, mambuId: hit['id'] },
      `a Mambu ${kind} already holds this tax id: reused, no second ${kind} created`,
    );
    return holderOf(hit, `${kind} ${String(hit['id'])}`);
  }

  /** Clients or groups whose tax id custom field equals the tax id (as 9 digits, or dashed as banks key it). */
  private async searchByTaxId(kind: 'client' | 'group', tin: string, signal?: AbortSignal): Promise<Json[]> {
    const digits = normaliseTin(tin) ?? tin;
    const forms = new Set([
      tin,
      digits,
      kind === 'group'
        ? `${digits.slice(0, 2)}-${digits.slice(2)}`
        : `${digits.slice(0, 3)}-${digits.slice(3, 5)}-${digits.slice(5)}`,
    ]);
    const field = kind === 'client' ? this.opts.taxIdField.clients : this.opts.taxIdField.groups;
    const byId = new Map<string, Json>();
    for (const value of forms) {
      for (let offset = 0; ; offset += PAGE) {
        const page = await this.http.search<Json>(
          `/${kind === 'client' ? 'clients' : 'groups'}:search`,
          { filterCriteria: [{ field, operator: 'EQUALS', value }] },
          offset,
          PAGE,
          signal,
        );
        for (const h of page.items) byId.set(String(h['id']), h);
        if (page.items.length < PAGE || (page.total !== null && offset + page.items.length >= page.total))
          break;
      }
    }
    return [...byId.values()];
  }

  /** The customer match: Mambu's clients (SSN) or groups (EIN) with this tax id; a failed search is never "none". */
  protected async findByTin(q: CustomerQuery, signal?: AbortSignal): Promise<ExistingCustomer[]> {
    const kind = q.tinType === 'EIN' ? 'group' : 'client';
    const hits = await this.customerSearch(`Mambu ${kind} search by tax id`, () =>
      this.searchByTaxId(kind, q.tin, signal),
    );
    return hits.map((h) => {
      const name =
        kind === 'group'
          ? h['groupName']
          : [h['firstName'], h['lastName']].filter((x) => typeof x === 'string').join(' ');
      return {
        cif: String(h['id']),
        nameAgrees:
          typeof name === 'string' && name !== '' ? normaliseName(name) === normaliseName(q.name) : null,
      };
    });
  }

  /** The record's fields as Mambu properties: no references, no connector flags, no empty custom field values. */
  private outgoing(rec: MappedRecord): Json {
    const out: Json = {};
    for (const [k, v] of Object.entries(rec.fields)) {
      if (/ExternalIds?$/.test(k) || CONNECTOR_FIELDS.has(k)) continue;
      if (k.startsWith('_')) {
        // Mambu refuses "" and null as custom field values: a field without a value is left out.
        const values = Object.fromEntries(
          Object.entries(v as Json).filter(([, x]) => x !== null && x !== undefined && x !== ''),
        );
        if (Object.keys(values).length > 0) out[k] = values;
        continue;
      }
      out[k] = v;
    }
    for (const path of DECIMAL_FIELDS) setDecimal(out, path);
    return out;
  }

  /**
   * The loan's days as Mambu's date-times (dates.ts): each mapped `YYYY-MM-DD` becomes that day's
   * midnight in core.mambu.timeZone with its offset. Without `body`, only checks (preflight, before
   * any write); a value that is neither a day nor a date-time with offset is refused, naming the field.
   */
  private withMambuDates(rec: MappedRecord, body?: Json): Json {
    const out: Json = body ?? {};
    for (const [group, field] of LOAN_DATE_TIME_FIELDS) {
      const holder = rec.fields[group];
      if (holder === null || typeof holder !== 'object' || Array.isArray(holder)) continue;
      const v = (holder as Json)[field];
      if (v === undefined || v === null) continue;
      const sent = typeof v === 'string' ? mambuDateTime(v, this.opts.timeZone) : null;
      if (sent === null)
        throw new CoreRejectedError(
          `loan record ${rec.externalId}: ${group}.${field} ${JSON.stringify(v)} is neither a day ` +
            `(YYYY-MM-DD) nor a date-time with an offset; fix the mapping's ${group} expression`,
        );
      const target = out[group];
      if (body !== undefined && target !== null && typeof target === 'object')
        out[group] = { ...(target as Json), [field]: sent };
    }
    return out;
  }

  /** A loan product by the mapping's id or key (GET /loanproducts/{id}), read once per process. */
  private product(ref: string, signal?: AbortSignal): Promise<Json> {
    return this.products.get(ref, () => this.http.get<Json>(`/loanproducts/${enc(ref)}`, signal));
  }

  /**
   * The loan's product exists, and the loan keeps to the product's amount, installments and grace type (as
   * far as the product says).
   */
  private async checkProduct(rec: MappedRecord, signal?: AbortSignal): Promise<Json> {
    const ref = rec.fields['productTypeKey'] as string;
    const product = await this.productOf(rec.externalId, ref, 'productTypeKey', () =>
      this.product(ref, signal),
    );
    const name = typeof product['name'] === 'string' ? `${ref} (${product['name']})` : ref;
    const range = (v: unknown): { min: number | null; max: number | null } => {
      const o = v !== null && typeof v === 'object' ? (v as Json) : {};
      return {
        min: typeof o['minValue'] === 'number' ? o['minValue'] : null,
        max: typeof o['maxValue'] === 'number' ? o['maxValue'] : null,
      };
    };
    const outside = (x: number, r: { min: number | null; max: number | null }): boolean =>
      (r.min !== null && x < r.min) || (r.max !== null && x > r.max);
    const refuse = (what: string, r: { min: number | null; max: number | null }): never => {
      throw new CoreRejectedError(
        `loan ${rec.externalId}: ${what} is outside Mambu product ${name} limits ` +
          `${r.min ?? 0}–${r.max ?? '∞'}; widen the product or map ` +
          `the loan to another product (the productTypeKey lookup)`,
      );
    };
    const amount = Number(rec.fields['loanAmount']);
    const amounts = range(((product['loanAmountSettings'] ?? {}) as Json)['loanAmount']);
    if (Number.isFinite(amount) && outside(amount, amounts))
      refuse(`loanAmount ${String(rec.fields['loanAmount'])}`, amounts);
    const schedule = (rec.fields['scheduleSettings'] ?? {}) as Json;
    const n = schedule['repaymentInstallments'];
    const installments = range(((product['scheduleSettings'] ?? {}) as Json)['numInstallments']);
    if (typeof n === 'number' && outside(n, installments)) refuse(`repaymentInstallments ${n}`, installments);
    const allowed = ((product['gracePeriodSettings'] ?? {}) as Json)['gracePeriodType'];
    const grace = schedule['gracePeriod'];
    if (
      typeof allowed === 'string' &&
      typeof grace === 'number' &&
      grace > 0 &&
      schedule['gracePeriodType'] !== allowed
    ) {
      throw new CoreRejectedError(
        `loan ${rec.externalId}: ${grace} grace period(s) of type ` +
          `${String(schedule['gracePeriodType'])}, but Mambu product ${name} allows ${allowed}; set ` +
          `the mapping's gracePeriodType default (mappings.defaults) or map interest-only ` +
          `loans to a product with ${String(schedule['gracePeriodType'])} grace`,
      );
    }
    return product;
  }

  private async findLoanById(id: string, signal?: AbortSignal): Promise<Json | null> {
    return this.http.find<Json>(`/loans/${enc(id)}?detailsLevel=FULL`, signal);
  }

  /** Loans whose reference custom field holds this platform id (ids.ts mambuRef). */
  private async findLoanByRef(platformId: string, signal?: AbortSignal): Promise<Json | null> {
    const ref = mambuRef(platformId);
    const page = await this.http.search<Json>(
      '/loans:search?detailsLevel=FULL',
      {
        filterCriteria: [
          { field: `${this.loanRef.set}.${this.loanRef.field}`, operator: 'EQUALS', value: ref },
        ],
      },
      0,
      2,
      signal,
    );
    if (page.items.length > 1)
      throw new CoreRejectedError(
        `loan ${platformId}: ${page.items.length} Mambu loans hold ${this.opts.loanRefField} ` +
          `= ${ref}; close the extra one in Mambu, then the loan retries`,
      );
    return page.items[0] ?? null;
  }

  private refOf(loan: Json): unknown {
    const set = loan[this.loanRef.set];
    return set !== null && typeof set === 'object' ? (set as Json)[this.loanRef.field] : undefined;
  }

  private async ensureLoan(
    rec: MappedRecord,
    pkg: BoardingPackage,
    ids: Ids,
    signal?: AbortSignal,
  ): Promise<Json> {
    const id = this.holderId('loan', rec);
    const ref = mambuRef(rec.externalId);
    return httpCore.lookUpOrCreate({
      lookUp: async () => {
        const byId = await this.findLoanById(id, signal);
        if (byId !== null) {
          const theirs = this.refOf(byId);
          if (theirs !== undefined && theirs !== ref) {
            throw new CoreRejectedError(
              `loan ${rec.externalId}: Mambu loan ${id} belongs to another loan ` +
                `(${this.opts.loanRefField} ${JSON.stringify(theirs)}); the account number ` +
                `pool overlaps numbers Mambu already uses (identity.accountNumbers.pool)`,
            );
          }
          return byId;
        }
        // Boarded earlier under another id (a mapping or pool change since): found by the platform id.
        return this.findLoanByRef(rec.externalId, signal);
      },
      create: async () => {
        const body = await this.loanBody(rec, id, ref, ids, signal);
        return this.http.post<Json>('/loans', {
          body,
          idempotencyKey: this.key('loan', [rec.externalId, pkg.mappingVersion], body),
          ...(signal ? { signal } : {}),
        });
      },
      isDuplicate: isDuplicateId,
      // Only this loan's own record (its reference field) answers the duplicate.
      lookUpAgain: async () => {
        const again = await this.findLoanById(id, signal);
        return again !== null && this.refOf(again) === ref ? again : null;
      },
    });
  }

  /** A new loan's body: its fields with Mambu's dates, the holder's and the product's keys, the reference. */
  private async loanBody(
    rec: MappedRecord,
    id: string,
    ref: string,
    ids: Ids,
    signal?: AbortSignal,
  ): Promise<Json> {
    const holderExt = rec.fields['accountHolderExternalId'] as string;
    const type = rec.fields['accountHolderType'] as 'CLIENT' | 'GROUP';
    const holder = await this.resolveHolder(
      type === 'GROUP' ? 'group' : 'client',
      holderExt,
      ids,
      `loan ${rec.externalId}`,
      signal,
    );
    const product = await this.checkProduct(rec, signal);
    if (ref !== rec.externalId)
      await this.opts.externalRefs?.remember('mambu', ref, rec.externalId, 'loan', this.clock.now());
    const body: Json = {
      ...this.withMambuDates(rec, this.outgoing(rec)),
      id,
      accountHolderKey: holder.encodedKey,
      accountHolderType: type,
      productTypeKey: text(product['encodedKey']),
    };
    body[this.loanRef.set] = { ...(body[this.loanRef.set] ?? {}), [this.loanRef.field]: ref };
    if (this.opts.branchKey !== undefined && body['assignedBranchKey'] === undefined)
      body['assignedBranchKey'] = this.opts.branchKey;
    return body;
  }

  private async resolveHolder(
    kind: 'client' | 'group',
    platformId: string,
    ids: Ids,
    what: string,
    signal?: AbortSignal,
  ): Promise<Holder> {
    const known = (kind === 'client' ? ids.clients : ids.groups).get(platformId);
    if (known !== undefined) return known;
    const found = await this.http.find<Json>(
      `/${kind === 'client' ? 'clients' : 'groups'}/${enc(derivedMambuId(kind, platformId))}`,
      signal,
    );
    if (found === null)
      throw new CoreRejectedError(
        `${what}: the account holder ${platformId} is neither in the package nor in Mambu`,
      );
    return holderOf(found, `${kind} ${platformId}`);
  }

  /**
   * Approve / disburse by config, decided from the loan's state (never twice). The disbursement
   * carries an externalId unique to the loan and is searched for before it is made: a disbursement
   * whose answer was lost is found after any horizon, when its Idempotency-Key is long gone.
   */
  private async ensureCommands(
    rec: MappedRecord,
    loan: Json,
    pkg: BoardingPackage,
    signal?: AbortSignal,
  ): Promise<void> {
    const id = String(loan['id']);
    let state = text(loan['accountState']);
    const opt = signal ? { signal } : {};
    if (this.opts.approve && state === 'PARTIAL_APPLICATION') {
      const body = { action: 'REQUEST_APPROVAL', notes: 'boarding-connector' };
      state =
        text(
          (
            await this.http.post<Json>(`/loans/${enc(id)}:changeState`, {
              body,
              idempotencyKey: this.key('request-approval', [rec.externalId, pkg.mappingVersion], body),
              ...opt,
            })
          )['accountState'],
        ) || 'PENDING_APPROVAL';
    }
    if (this.opts.approve && state === 'PENDING_APPROVAL') {
      const body = { action: 'APPROVE', notes: 'approved by boarding-connector' };
      state =
        text(
          (
            await this.http.post<Json>(`/loans/${enc(id)}:changeState`, {
              body,
              idempotencyKey: this.key('approve', [rec.externalId, pkg.mappingVersion], body),
              ...opt,
            })
          )['accountState'],
        ) || 'APPROVED';
    }
    if (this.opts.disburse && state === 'APPROVED') {
      const externalId = `${id}-disbursement`;
      const existing = await this.http.search<Json>(
        '/loans/transactions:search',
        { filterCriteria: [{ field: 'externalId', operator: 'EQUALS', value: externalId }] },
        0,
        1,
        signal,
      );
      if (existing.items.length > 0) return;
      const body = { externalId, notes: 'disbursed by boarding-connector' };
      try {
        await this.http.post(`/loans/${enc(id)}/disbursement-transactions`, {
          body,
          as: 'disburse',
          idempotencyKey: this.key('disburse', [rec.externalId, pkg.mappingVersion], body),
          ...opt,
        });
      } catch (err) {
        // A concurrent or earlier disbursement under the same externalId: it is there, once.
        if (
          err instanceof CoreRejectedError &&
          JSON.stringify(err.detail ?? '').includes('DUPLICATE_TRANSACTION_EXTERNAL_ID')
        )
          return;
        throw err;
      }
    }
  }

  /** The loan's documents (all pages); one whose `[doc:<ref>]` marker is in its notes is not sent again. */
  protected async heldDocuments(loan: Json, signal?: AbortSignal): Promise<httpCore.HeldDocument[]> {
    const existing: Json[] = [];
    for (let offset = 0; ; offset += PAGE) {
      const page = await this.http.page<Json>(
        `/documents/documentsMetadata?entity=LOAN_ACCOUNT&ownerKey=${enc(String(loan['encodedKey']))}`,
        offset,
        PAGE,
        signal,
      );
      existing.push(...page.items);
      if (page.items.length < PAGE || (page.total !== null && offset + page.items.length >= page.total))
        break;
    }
    return existing.map((e) => ({
      text: typeof e['notes'] === 'string' ? e['notes'] : '',
      bytes: Number(e['fileSize'] ?? 0),
      coreId: String(e['encodedKey'] ?? e['id']),
    }));
  }

  protected uploadDocument(
    pkg: BoardingPackage,
    { doc }: { doc: PlatformDocument },
    loan: Json,
    signal?: AbortSignal,
  ): Promise<httpCore.DocumentReceipt> {
    const rec = pkg.records.find((r) => r.type === 'document' && r.externalId === doc.id);
    const maxBytes = this.opts.documents.maxBytes;
    const spooled = {
      ...{ fetchDocument: pkg.fetchDocument, doc, spoolDir: this.opts.spoolDir, maxBytes, signal },
      overCap: (bytes: number) =>
        `document ${doc.id} is ${bytes} bytes, over core.mambu.documents.maxBytes (${maxBytes})`,
    };
    return httpCore.uploadSpooled(spooled, async (path, fetched) => {
      const form = await httpCore.uploadForm(
        [
          ['ownerType', 'LOAN_ACCOUNT'],
          ['id', String(loan['id'])],
          ['name', mambuDocumentName(asText(rec?.fields['name']) || doc.name || '', `document ${doc.id}`)],
          ['notes', httpCore.markedText(asText(rec?.fields['notes']), doc.id)],
        ],
        {
          path,
          type: fetched.contentType ?? doc.type ?? 'application/octet-stream',
          name: safeFileName(doc.name, doc.id),
        },
      );
      const res = await this.http.post<Json>('/documents', {
        form,
        idempotencyKey: mambuIdempotencyKey('document', [String(loan['id']), doc.id, fetched.sha256]),
        ...(signal ? { signal } : {}),
      });
      return text(res['encodedKey']) || text(res['id']);
    });
  }

  protected loanByPlatformId(platformId: string, signal?: AbortSignal): Promise<Json | null> {
    return this.findLoanByRef(platformId, signal);
  }

  protected canonical(loan: Json): CanonicalLoanFields {
    return canonicalFromMambuLoan(loan);
  }

  async *listLoans(): AsyncIterable<CoreLoanRecord> {
    for (let offset = 0; ; offset += PAGE) {
      const page = await this.http.page<Json>(
        '/loans?detailsLevel=FULL&sortBy=creationDate:ASC',
        offset,
        PAGE,
      );
      for (const l of page.items) {
        const ref = this.refOf(l);
        if (typeof ref !== 'string' || ref === '') continue;
        const loanExternalId = (await this.opts.externalRefs?.platformIdOf('mambu', ref)) ?? ref;
        yield this.loanRecord(l, loanExternalId);
      }
      if (page.items.length < PAGE || (page.total !== null && offset + page.items.length >= page.total))
        return;
    }
  }

  /**
   * `config check --connect`: the credentials (and the disbursement's), every loan product the
   * mapping set names, and the custom field sets the set and the adapter write (tax ids, the loan
   * reference). Reads only.
   */
  async checkConnection(input: CoreConnectionCheckInput): Promise<CoreCheck[]> {
    const checks: CoreCheck[] = [];
    const at = httpCore.withoutSecrets(this.opts.baseUrl);
    const signal = input.signal;
    try {
      await this.http.page<Json>('/loanproducts', 0, 1, signal);
      checks.push({
        name: 'core',
        status: 'ok',
        detail:
          `Mambu at ${at} accepts core.mambu.auth ` +
          `(${'apiKey' in this.opts.auth ? 'API key' : `user ${this.opts.auth.username}`})`,
      });
    } catch (err) {
      checks.push(
        { name: 'core', status: 'fail', detail: errorMessage(err) },
        ...httpCore.notAnswered('core.products', 'core.customFields', 'core.timeZone'),
      );
      return checks;
    }
    if (this.opts.disburse && this.opts.disburseAuth !== undefined) {
      try {
        await this.http.search<Json>(
          '/loans/transactions:search',
          {
            filterCriteria: [{ field: 'externalId', operator: 'EQUALS', value: 'boarding-connector-check' }],
          },
          0,
          1,
          signal,
        );
        checks.push({
          name: 'core.disburseAuth',
          status: 'ok',
          detail: 'core.mambu.disburseAuth is accepted',
        });
      } catch (err) {
        checks.push({ name: 'core.disburseAuth', status: 'fail', detail: errorMessage(err) });
      }
    }
    checks.push(
      await httpCore.productsCheck({
        refs: [...new Set(input.productRefs ?? [])].sort(),
        describe: async (ref) => {
          const p = await this.product(ref, signal);
          return typeof p['name'] === 'string' ? p['name'] : String(p['encodedKey']);
        },
        none: 'the mapping set names no loan product (lookup productTypeKey, defaults *productTypeKey)',
        fix: "fix the mapping's productTypeKey lookup or defaults, or create the product in Mambu",
      }),
    );
    checks.push(await this.customFieldCheck(input, signal));
    checks.push(await this.timeZoneCheck(signal));
    return checks;
  }

  /**
   * core.mambu.timeZone against the tenant's own (GET /setup/organization, timeZoneID): the dates the
   * adapter sends carry this zone's offsets, and Mambu stores them "as Organization Time".
   */
  private async timeZoneCheck(signal?: AbortSignal): Promise<CoreCheck> {
    const ours = this.opts.timeZone;
    let theirs: unknown;
    try {
      theirs = (await this.http.get<Json>('/setup/organization', signal))['timeZoneID'];
    } catch (err) {
      return {
        name: 'core.timeZone',
        status: 'skip',
        detail:
          `the tenant's time zone could not be read (${errorMessage(err)}); compare core.mambu.timeZone ` +
          `(${ours}) with Mambu's Administration → Organization Details by hand`,
      };
    }
    if (typeof theirs !== 'string' || theirs === '')
      return {
        name: 'core.timeZone',
        status: 'skip',
        detail: `Mambu names no time zone for the organization; dates are sent in ${ours}`,
      };
    if (theirs === ours || (isValidTimeZone(theirs) && sameOffsets(theirs, ours, this.clock.now())))
      return {
        name: 'core.timeZone',
        status: 'ok',
        detail: `core.mambu.timeZone ${ours} matches the tenant's time zone (${theirs})`,
      };
    return {
      name: 'core.timeZone',
      status: 'fail',
      detail:
        `core.mambu.timeZone is ${ours} but the Mambu tenant's time zone is ${theirs}: dates would ` +
        `be sent with the wrong offsets; set core.mambu.timeZone: ${theirs} (or bank.timeZone)`,
    };
  }

  private async customFieldCheck(input: CoreConnectionCheckInput, signal?: AbortSignal): Promise<CoreCheck> {
    const need: Record<string, Map<string, Set<string>>> = {
      CLIENT: new Map(),
      GROUP: new Map(),
      LOAN_ACCOUNT: new Map(),
    };
    const add = (entity: string, dotted: string): void => {
      const [set, field] = dotted.split('.');
      if (set === undefined) return;
      const m = need[entity] as Map<string, Set<string>>;
      const fields = m.get(set) ?? new Set<string>();
      if (field !== undefined) fields.add(field);
      m.set(set, fields);
    };
    add('CLIENT', this.opts.taxIdField.clients);
    add('GROUP', this.opts.taxIdField.groups);
    add('LOAN_ACCOUNT', this.opts.loanRefField);
    const entityOf: Record<string, string> = { client: 'CLIENT', group: 'GROUP', loan: 'LOAN_ACCOUNT' };
    for (const [type, sets] of Object.entries(input.customFieldSets ?? {})) {
      const entity = entityOf[type];
      if (entity !== undefined) for (const s of sets) add(entity, s);
    }
    const problems: string[] = [];
    const seen: string[] = [];
    for (const [entity, sets] of Object.entries(need)) {
      if (sets.size === 0) continue;
      let available: Json[];
      try {
        available = (await this.http.page<Json>(`/customfieldsets?availableFor=${entity}`, 0, PAGE, signal))
          .items;
      } catch (err) {
        return {
          name: 'core.customFields',
          status: 'fail',
          detail: `listing the custom field sets for ${entity} failed: ${errorMessage(err)}`,
        };
      }
      for (const [set, fields] of sets) {
        const s = available.find((x) => x['id'] === set);
        if (s === undefined) {
          problems.push(`${entity} has no custom field set ${set}`);
          continue;
        }
        const ids = Array.isArray(s['customFields'])
          ? (s['customFields'] as Json[]).map((f) => f['id'])
          : null;
        const absent = ids === null ? [] : [...fields].filter((f) => !ids.includes(f));
        if (absent.length > 0)
          problems.push(`${entity} custom field set ${set} has no field ${absent.join(', ')}`);
        else seen.push(`${set}${fields.size > 0 ? ` (${[...fields].join(', ')})` : ''}`);
      }
    }
    return problems.length === 0
      ? { name: 'core.customFields', status: 'ok', detail: `custom field sets exist: ${seen.join(', ')}` }
      : {
          name: 'core.customFields',
          status: 'fail',
          detail:
            `${problems.join('; ')} — create them in Mambu (Administration → ` +
            `Fields) or change core.mambu.taxIdField / loanRefField and the mapping`,
        };
  }

  protected ping(): Promise<unknown> {
    return this.http.page('/loanproducts', 0, 1);
  }
}

/** Whether two zones (an alias and its name) keep the same offsets, sampled weekly over two years. */
function sameOffsets(a: string, b: string, from: number): boolean {
  const WEEK = 7 * 86_400_000;
  for (let t = from - 52 * WEEK; t < from + 52 * WEEK; t += WEEK) {
    const day = localDate(t, a);
    if (mambuDateTime(day, a) !== mambuDateTime(day, b)) return false;
  }
  return true;
}

function holderOf(j: Json, what: string): Holder {
  if (typeof j['id'] !== 'string' || typeof j['encodedKey'] !== 'string')
    throw new CoreRejectedError(`${what}: Mambu returned no id and encodedKey`);
  return { id: j['id'], encodedKey: j['encodedKey'] };
}

function setDecimal(obj: Json, path: readonly string[]): void {
  let cur: unknown = obj;
  for (const k of path.slice(0, -1)) {
    if (cur === null || typeof cur !== 'object') return;
    cur = (cur as Json)[k];
  }
  const last = path.at(-1) as string;
  if (cur === null || typeof cur !== 'object') return;
  const v = (cur as Json)[last];
  if (typeof v === 'string') (cur as Json)[last] = new MambuDecimal(v);
  else if (typeof v === 'number') (cur as Json)[last] = new MambuDecimal(String(v));
}

function text(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

function asText(v: unknown): string {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : '';
}
