import { CustomerSourceUnavailableError, type CoreReceipt, type CustomerDirectory } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import { normaliseTin, type CustomerKeys } from '../lib/customer-keys.js';
import type { Logger } from '../lib/logger.js';
import type { Entities } from '../contract/schemas.js';
import type { CustomerRow, LoanCustomerRow, MatchedBy, XrefRow } from '../store/identity/customers.js';
import type { BoardingStore } from '../store/index.js';
import { PARKED_STATES } from '../store/loan-states.js';

/** What the mapping sees for one business or person (`identity.customers[entityId]`, `$cif(entity)`). */
export interface ResolvedCustomer {
  /**
   * The bank's customer number; null for a new customer whose number the core assigns when it is created
   * (Fineract).
   */
  cif: string | null;
  matchedBy: MatchedBy;
  /** The core already has this customer: no customer record is written, only references to its CIF. */
  existing: boolean;
}

export interface CustomerResolution {
  customers: Record<string, ResolvedCustomer>;
  /** Review items (the loan boards; a person checks): a name that disagrees with the core's. */
  reviews: Array<{ entityId: string; message: string }>;
}

/** The loan must wait: a customer it needs is being created by another loan whose write may have happened. */
export class CustomerWaitError extends Error {
  override readonly name = 'CustomerWaitError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** One tax id, two or more customers in the core: a person decides (customers.onAmbiguous). */
export class CustomerAmbiguousError extends Error {
  override readonly name = 'CustomerAmbiguousError';
  constructor(
    message: string,
    readonly detail: { entityId: string; cifs: string[] },
  ) {
    super(message);
  }
}

export interface CustomerResolverDeps {
  store: BoardingStore;
  /** The core's existing customers (extract, Fineract search); absent: the core knows none. */
  directory: CustomerDirectory | undefined;
  keys: CustomerKeys;
  /**
   * The CIF of a new customer: from the bank's pool (same key → same number forever), or null when
   * the core assigns it at create (identity.customerNumbers.source: core; Fineract's client id).
   */
  newCif: (key: string, now: number) => Promise<string | null>;
  onAmbiguous: 'quarantine' | 'create';
  /** A masked tax id boards (mappings.allowLast4Tin) as a new customer keyed by its entity id. */
  allowLast4Tin: boolean;
  clock: Clock;
  logger: Logger;
}

type Party = { id: string; kind: 'business' | 'person'; tin: unknown; tinType: 'EIN' | 'SSN'; name: string };

function partiesOf(entities: Entities): Party[] {
  const out: Party[] = [];
  for (const b of entities.businesses ?? []) {
    out.push({
      id: b.id,
      kind: 'business',
      tin: b.ein,
      tinType: 'EIN',
      name: typeof b.name === 'string' ? b.name : '',
    });
  }
  for (const p of entities.people ?? []) {
    const name = [p.firstName, p.lastName].filter((x) => typeof x === 'string' && x !== '').join(' ');
    out.push({ id: p.id, kind: 'person', tin: p.ssn, tinType: 'SSN', name });
  }
  return out;
}

const last4 = (tin: string): string => `…${tin.slice(-4)}`;

/**
 * Receipt record types that are a customer in the core (the file core's customer, Fineract's and Mambu's
 * client, Mambu's group).
 */
const CUSTOMER_RECORD_TYPES: ReadonlySet<string> = new Set(['customer', 'client', 'group']);

/** What the resolver's steps work with. */
function resolverContext(deps: CustomerResolverDeps) {
  const { store, keys, clock } = deps;
  const customers = store.customers;
  return { deps, store, keys, clock, customers };
}
type ResolverCtx = ReturnType<typeof resolverContext>;

/**
 * Customer match before create (docs/core.md "Customer match"), for every business and person on a
 * loan, in this order: the connector's cross-reference (entity id → CIF), the full tax id against
 * the customers the connector resolved or created and against the core's own (extract / search),
 * else a new customer. A new customer is claimed in the store (with its CIF from the bank's pool
 * when the core does not assign one) before the core write, so a retry, a restart or another loan
 * never creates it twice; a later loan whose customer is still being created by a loan whose write
 * may have happened waits (CustomerWaitError), and one whose creating loan was parked before its
 * write creates it itself. A source that cannot answer makes the loan wait
 * (CustomerSourceUnavailableError); it never counts as "no existing customer".
 *
 * Callers serialise loans that share a tax id (`lockKeys`) from the resolution to the end of the write.
 */
export function createCustomerResolver(deps: CustomerResolverDeps) {
  const c = resolverContext(deps);
  return {
    lockKeys: (entities: Entities) => lockKeys(c, entities),
    resolve: (loanId: string, entities: Entities, signal?: AbortSignal) =>
      resolve(c, loanId, entities, signal),
    afterWrite: (loanId: string, receipt: CoreReceipt | null) => afterWrite(c, loanId, receipt),
  };
}

/** The keys to hold while a loan is resolved and written: its tax id hashes (and masked entities' ids), sorted. */
function lockKeys(c: ResolverCtx, entities: Entities): string[] {
  const { keys } = c;
  const out = new Set<string>();
  for (const p of partiesOf(entities)) out.add(keys.tinHash(p.tin) ?? `entity:${p.id}`);
  return [...out].sort();
}

/** The review item for a customer the core holds under the party's tax id but with another name. */
function otherNameReview(p: Party, cif: string | null, tin: string): CustomerResolution['reviews'][number] {
  return {
    entityId: p.id,
    message:
      `${p.kind} ${p.id}: the core's customer ${cif ?? ''} with the same ${p.tinType} ` +
      `(${last4(tin)}) has another name than "${p.name}"; boarded as that customer, check the name`,
  };
}

/** The writes a resolution commits together, before the core write. */
interface PendingWrites {
  /** New customers this loan creates (their CIF from the pool, or null: the core assigns it). */
  claims: Array<{ p: Party; tin: string; tinHash: string; r: ResolvedCustomer }>;
  /** Customers the core already holds (extract, search). */
  found: Array<{ tinHash: string; cif: string }>;
  /** Masked tax ids boarding as their own customer: a CIF from the pool keyed by the entity. */
  ownCif: Array<{ p: Party; r: ResolvedCustomer }>;
  /** The per-party rows, read when they are written (a claim fills its CIF first). */
  rows: Array<() => Omit<LoanCustomerRow, 'resolvedAt'>>;
}

/**
 * Three statements for a loan's parties in the usual case: one look-up of their cross-references,
 * one of their tax ids, and the writes (claims with their pool CIFs, core matches, the per-party
 * rows and the changed cross-references, a statement each) in one transaction at the end — every
 * commit is a synchronous fsync — before the core write.
 */
async function resolve(
  c: ResolverCtx,
  loanId: string,
  entities: Entities,
  signal?: AbortSignal,
): Promise<CustomerResolution> {
  const { deps, store, keys, clock, customers } = c;
  const result: CustomerResolution = { customers: {}, reviews: [] };
  const parties = partiesOf(entities).map((p) => {
    const tin = normaliseTin(p.tin);
    const tinHash = tin === null ? null : keys.tinHash(tin);
    return { p, tin, tinHash };
  });
  if (parties.length === 0) return result;
  const xrefs = await customers.xrefs(parties.map((x) => x.p.id));
  const known = await customers.byTins(parties.flatMap((x) => (x.tinHash === null ? [] : [x.tinHash])));
  /** Tax ids this loan creates: a second party with the same one references the first. */
  const createdHere = new Map<string, ResolvedCustomer>();
  const w: PendingWrites = { claims: [], found: [], ownCif: [], rows: [] };
  const now = clock.now();
  const record = (
    p: Party,
    r: ResolvedCustomer,
    tinHash: string | null,
    nameAgrees: boolean | null,
  ): void => {
    w.rows.push(() => rowOf(loanId, p, r, tinHash, nameAgrees));
    result.customers[p.id] = r;
  };
  for (const { p, tin, tinHash } of parties) {
    signal?.throwIfAborted();
    const x = xrefs.get(p.id);
    if (tinHash === null || tin === null) {
      // A masked (or absent) tax id matches nothing. Without mappings.allowLast4Tin the mapping
      // quarantines the loan as tin_incomplete; with it, the party is its own customer.
      if (!deps.allowLast4Tin) continue;
      const r: ResolvedCustomer = x?.cif
        ? { cif: x.cif, matchedBy: 'crossref', existing: x.firstLoanId !== loanId }
        : { cif: null, matchedBy: 'created', existing: false };
      if (!x?.cif) w.ownCif.push({ p, r });
      record(p, r, null, null);
      continue;
    }
    const viaXref = x !== undefined && x.tinHash === tinHash;
    const first = createdHere.get(tinHash);
    if (first !== undefined) {
      const r: ResolvedCustomer = { cif: first.cif, matchedBy: 'tin', existing: true };
      w.rows.push(() => {
        r.cif = first.cif;
        return rowOf(loanId, p, r, tinHash, null);
      });
      result.customers[p.id] = r;
      continue;
    }
    const { r, nameAgrees } = await resolveParty(c, {
      loanId,
      p,
      tin,
      tinHash,
      viaXref,
      row: known.get(tinHash),
      w,
      result,
      signal,
    });
    if (!r.existing) createdHere.set(tinHash, r);
    if (nameAgrees === false) result.reviews.push(otherNameReview(p, r.cif, tin));
    record(p, r, tinHash, nameAgrees);
  }
  if (w.rows.length > 0) await store.write(() => commitWrites(c, loanId, w, xrefs, now));
  return result;
}

function rowOf(
  loanId: string,
  p: Party,
  r: ResolvedCustomer,
  tinHash: string | null,
  nameAgrees: boolean | null,
): Omit<LoanCustomerRow, 'resolvedAt'> {
  return {
    loanId,
    entityId: p.id,
    cif: r.cif,
    tinHash,
    matchedBy: r.matchedBy,
    existing: r.existing,
    nameAgrees,
  };
}

/** One party with a full tax id that no earlier party of the loan creates: known, in the core, or new. */
async function resolveParty(
  c: ResolverCtx,
  q: {
    loanId: string;
    p: Party;
    tin: string;
    tinHash: string;
    viaXref: boolean;
    row: CustomerRow | undefined;
    w: PendingWrites;
    result: CustomerResolution;
    signal: AbortSignal | undefined;
  },
): Promise<{ r: ResolvedCustomer; nameAgrees: boolean | null }> {
  const { deps } = c;
  const { p, tin, tinHash, viaXref, signal } = q;
  if (q.row !== undefined) {
    const settled = await settle(
      c,
      q.row,
      q.loanId,
      { tin, tinType: p.tinType, tinHash, name: p.name, entityId: p.id },
      signal,
    );
    return {
      r: {
        cif: settled.row.cif,
        matchedBy: settled.creates ? 'created' : viaXref ? 'crossref' : 'tin',
        existing: !settled.creates,
      },
      nameAgrees: settled.nameAgrees,
    };
  }
  const found = deps.directory
    ? await deps.directory.findByTin(
        { tin, tinType: p.tinType, tinHash, name: p.name },
        signal ? { signal } : {},
      )
    : [];
  const cifs = [...new Set(found.map((f) => f.cif))];
  if (cifs.length === 1) {
    const cif = cifs[0] as string;
    q.w.found.push({ tinHash, cif });
    const nameAgrees = found.some((f) => f.nameAgrees === true)
      ? true
      : found.every((f) => f.nameAgrees === null)
        ? null
        : false;
    return { r: { cif, matchedBy: viaXref ? 'crossref' : 'tin', existing: true }, nameAgrees };
  }
  if (cifs.length > 1 && deps.onAmbiguous === 'quarantine') {
    throw new CustomerAmbiguousError(
      `${p.kind} ${p.id}: its ${p.tinType} ${last4(tin)} matches ${cifs.length} customers of the ` +
        `core (CIF ${cifs.join(', ')}); merge them in the core ` +
        `or set customers.onAmbiguous: create, then loans retry`,
      { entityId: p.id, cifs },
    );
  }
  if (cifs.length > 1)
    q.result.reviews.push({
      entityId: p.id,
      message:
        `${p.kind} ${p.id}: ${p.tinType} ${last4(tin)} matches ${cifs.length} customers of the ` +
        `core (CIF ${cifs.join(', ')}); a new customer was created (customers.onAmbiguous: create)`,
    });
  const r: ResolvedCustomer = { cif: null, matchedBy: 'created', existing: false };
  q.w.claims.push({ p, tin, tinHash, r });
  return { r, nameAgrees: null };
}

/** The resolution's writes, in the caller's one transaction. */
async function commitWrites(
  c: ResolverCtx,
  loanId: string,
  w: PendingWrites,
  before: ReadonlyMap<string, XrefRow>,
  now: number,
): Promise<void> {
  const { deps, customers } = c;
  for (const o of w.ownCif) o.r.cif = await deps.newCif(`entity:${o.p.id}`, now);
  await customers.recordCoreAll(w.found, now);
  if (w.claims.length > 0) {
    for (const cl of w.claims) cl.r.cif = await deps.newCif(cl.tinHash, now);
    const claimed = await customers.claimAll(
      w.claims.map((cl) => ({ tinHash: cl.tinHash, cif: cl.r.cif })),
      loanId,
      now,
    );
    const lost = w.claims.find((cl) => !claimed.has(cl.tinHash));
    if (lost !== undefined) {
      // Another writer claimed it since the look-up (loans that share a tax id are serialised, so
      // only another process could): start over rather than create a second customer.
      const holder = await customers.byTin(lost.tinHash);
      throw new CustomerWaitError(
        'customer.claimed_elsewhere',
        `the customer with ${lost.p.tinType} ${last4(lost.tin)} was claimed by loan ` +
          `${holder?.creatorLoanId ?? '?'} meanwhile; this loan tries again`,
      );
    }
  }
  await customers.resolvedAll(
    w.rows.map((row) => row()),
    before,
    now,
  );
}

/**
 * A customer the connector already knows by tax id: the core's, one it created, or one a loan
 * claimed. Decides whether this loan references it, creates it, or waits.
 */
async function settle(
  c: ResolverCtx,
  row: CustomerRow,
  loanId: string,
  q: { tin: string; tinType: 'EIN' | 'SSN'; tinHash: string; name: string; entityId: string },
  signal: AbortSignal | undefined,
): Promise<{ row: CustomerRow; creates: boolean; nameAgrees: boolean | null }> {
  const { deps, store, clock, customers } = c;
  const now = clock.now();
  if (row.status === 'written') {
    if (row.cif === null && deps.directory) {
      // Created by an earlier loan in a core that assigns numbers, not learnt from its receipt: ask the core.
      const found = await deps.directory.findByTin(q, signal ? { signal } : {});
      const cifs = [...new Set(found.map((f) => f.cif))];
      // Which of several is the one our earlier loan created cannot be told: a person decides.
      if (cifs.length > 1) {
        throw new CustomerAmbiguousError(
          `${q.entityId}: the customer with ${q.tinType} ${last4(q.tin)} was created by an earlier ` +
            `loan, and the core now holds ${cifs.length} customers with that tax ` +
            `id (CIF ${cifs.join(', ')}); merge them in the core, then loans retry`,
          { entityId: q.entityId, cifs },
        );
      }
      const cif = cifs[0];
      if (cif === undefined) {
        throw new CustomerWaitError(
          'customer.number_unknown',
          `the customer with ${q.tinType} ${last4(q.tin)} was created by an ` +
            `earlier loan but the core does not find it by that tax id yet`,
        );
      }
      await customers.setCif(q.tinHash, cif, now);
      return { row: (await customers.byTin(q.tinHash)) as CustomerRow, creates: false, nameAgrees: null };
    }
    return { row, creates: false, nameAgrees: null };
  }
  // Claimed: some loan's write creates it.
  if (row.creatorLoanId === loanId) return { row, creates: true, nameAgrees: null };
  const creator =
    row.creatorLoanId === null ? undefined : ((await store.loans.get(row.creatorLoanId)) ?? undefined);
  if (
    creator !== undefined &&
    (creator.state === 'acknowledged' || (creator.state === 'written' && creator.writtenAt !== null))
  ) {
    // Written (the claim is marked in the same transaction; this covers a row from an older run).
    await customers.markWritten(creator.id, new Map(), now);
    return settle(c, (await customers.byTin(q.tinHash)) as CustomerRow, loanId, q, signal);
  }
  if (creator === undefined || (PARKED_STATES as readonly string[]).includes(creator.state)) {
    // The creating loan stopped before its write reached the core (quarantined, skipped) or is gone.
    // A core that may hold part of that write (Fineract: a client created before a refusal) is asked first.
    if (deps.directory && creator?.coreWriteStartedAt != null) {
      const found = await deps.directory.findByTin(q, signal ? { signal } : {});
      const cif = found[0]?.cif;
      if (cif !== undefined && found.length === 1) {
        await customers.setCif(q.tinHash, cif, now);
        await customers.markWritten(creator.id, new Map([[q.tinHash, cif]]), now);
        return {
          row: (await customers.byTin(q.tinHash)) as CustomerRow,
          creates: false,
          nameAgrees: found[0]?.nameAgrees ?? null,
        };
      }
    }
    if (await customers.takeOver(q.tinHash, row.creatorLoanId ?? '', loanId, now)) {
      deps.logger.info(
        { loanId, from: row.creatorLoanId },
        'customer claimed by a loan that never wrote it: this loan creates it',
      );
      return { row: (await customers.byTin(q.tinHash)) as CustomerRow, creates: true, nameAgrees: null };
    }
    return settle(c, (await customers.byTin(q.tinHash)) as CustomerRow, loanId, q, signal);
  }
  throw new CustomerWaitError(
    'customer.creation_pending',
    `the customer with ${q.tinType} ${last4(q.tin)} is being created by loan ${creator.id} ` +
      `(${creator.state}), whose core write may have happened; ` +
      `this loan waits for it rather than create a second customer`,
  );
}

/**
 * After the loan's core write (in the same transaction as its `written` state): every customer it
 * claimed now exists in the core. Numbers the core assigned (Fineract client ids) are read from
 * the receipt's client records, whose external id is the platform entity id.
 */
async function afterWrite(c: ResolverCtx, loanId: string, receipt: CoreReceipt | null): Promise<void> {
  const { clock, customers } = c;
  const now = clock.now();
  const assigned = new Map<string, string>();
  if (receipt !== null) {
    const byEntity = new Map((await customers.forLoan(loanId)).map((r) => [r.entityId, r] as const));
    for (const rec of receipt.records) {
      const lc = byEntity.get(rec.externalId);
      if (lc !== undefined && lc.tinHash !== null && lc.cif === null && CUSTOMER_RECORD_TYPES.has(rec.type))
        assigned.set(lc.tinHash, rec.coreId);
    }
  }
  await customers.markWritten(loanId, assigned, now);
}

export type CustomerResolver = ReturnType<typeof createCustomerResolver>;

/** The identity the mapping saw when the loan was last resolved (reboard, preview): from the store. */
export function storedCustomers(rows: readonly LoanCustomerRow[]): Record<string, ResolvedCustomer> {
  const out: Record<string, ResolvedCustomer> = {};
  for (const r of rows) out[r.entityId] = { cif: r.cif, matchedBy: r.matchedBy, existing: r.existing };
  return out;
}

export { CustomerSourceUnavailableError };
