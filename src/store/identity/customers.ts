import type { StoreDb } from '../sql.js';

export type MatchedBy = 'crossref' | 'tin' | 'created';
export const MATCHED_BY: readonly MatchedBy[] = ['crossref', 'tin', 'created'];

/** One customer the connector resolved, keyed by the keyed hash of its tax id. */
export interface CustomerRow {
  tinHash: string;
  cif: string | null;
  origin: 'core' | 'created';
  status: 'claimed' | 'written';
  creatorLoanId: string | null;
  createdAt: number;
  updatedAt: number;
}

/** Platform entity id ↔ CIF. */
export interface XrefRow {
  entityId: string;
  cif: string | null;
  tinHash: string | null;
  matchedBy: MatchedBy;
  firstLoanId: string;
  lastLoanId: string;
  resolvedAt: number;
  updatedAt: number;
}

/** What one loan resolved for one of its businesses or people. */
export interface LoanCustomerRow {
  loanId: string;
  entityId: string;
  cif: string | null;
  tinHash: string | null;
  matchedBy: MatchedBy;
  existing: boolean;
  nameAgrees: boolean | null;
  resolvedAt: number;
}

export interface CustomerStore {
  /**
   * Remembers the fingerprint of the TIN hash key on first use and refuses another key later:
   * hashes made with another key never match, and every repeat borrower would become a new customer.
   */
  checkKey(fingerprint: string, now: number): Promise<'stored' | 'same' | 'different'>;
  /** Whether a key's fingerprint is stored already (its customers were hashed with some key). */
  hasKey(): Promise<boolean>;
  /** The fingerprint of the key the stored tax-id hashes were made with (null: none hashed yet). */
  keyFingerprint(): Promise<string | null>;
  byTin(tinHash: string): Promise<CustomerRow | undefined>;
  xref(entityId: string): Promise<XrefRow | undefined>;
  /** A customer the core already has (extract, search). */
  recordCore(tinHash: string, cif: string, now: number): Promise<CustomerRow>;
  /** This loan's write creates the customer: the claim is committed before the write. */
  claim(tinHash: string, cif: string | null, loanId: string, now: number): Promise<CustomerRow>;
  /**
   * Another loan's claim that never reached the core (that loan was quarantined or skipped before writing)
   * passes to this loan.
   */
  takeOver(tinHash: string, fromLoanId: string, toLoanId: string, now: number): Promise<boolean>;
  /** The core learnt of the customer (a Fineract client found by search after its creating loan was written). */
  setCif(tinHash: string, cif: string, now: number): Promise<void>;
  /**
   * The loan's write is done: every customer it claimed exists in the core (cifs: numbers the core assigned,
   * by tin hash).
   */
  markWritten(loanId: string, cifs: ReadonlyMap<string, string>, now: number): Promise<void>;
  /** Records what a loan resolved for one entity (and the entity ↔ CIF cross-reference). */
  resolved(r: Omit<LoanCustomerRow, 'resolvedAt'>, now: number): Promise<void>;
  forLoan(loanId: string): Promise<LoanCustomerRow[]>;
  /** Every loan that resolved this entity, oldest first. */
  forEntity(entityId: string): Promise<LoanCustomerRow[]>;
  /** Cross-reference rows by entity id or CIF. */
  find(entityIdOrCif: string): Promise<XrefRow[]>;
  list(filter: { matchedBy?: MatchedBy; limit?: number }): Promise<XrefRow[]>;
  /** What loans written to the core resolved in [since, until), oldest first (streamed). */
  resolvedBetween(since: number, until: number): AsyncIterable<LoanCustomerRow>;
}

interface RawCustomer {
  tin_hash: string;
  cif: string | null;
  origin: 'core' | 'created';
  status: 'claimed' | 'written';
  creator_loan_id: string | null;
  created_at: number;
  updated_at: number;
}
interface RawXref {
  entity_id: string;
  cif: string | null;
  tin_hash: string | null;
  matched_by: MatchedBy;
  first_loan_id: string;
  last_loan_id: string;
  resolved_at: number;
  updated_at: number;
}
interface RawLoanCustomer {
  loan_id: string;
  entity_id: string;
  cif: string | null;
  tin_hash: string | null;
  matched_by: MatchedBy;
  existing: number;
  name_agrees: number | null;
  resolved_at: number;
}

const customer = (r: RawCustomer): CustomerRow => ({
  tinHash: r.tin_hash,
  cif: r.cif,
  origin: r.origin,
  status: r.status,
  creatorLoanId: r.creator_loan_id,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const xref = (r: RawXref): XrefRow => ({
  entityId: r.entity_id,
  cif: r.cif,
  tinHash: r.tin_hash,
  matchedBy: r.matched_by,
  firstLoanId: r.first_loan_id,
  lastLoanId: r.last_loan_id,
  resolvedAt: r.resolved_at,
  updatedAt: r.updated_at,
});
const loanCustomer = (r: RawLoanCustomer): LoanCustomerRow => ({
  loanId: r.loan_id,
  entityId: r.entity_id,
  cif: r.cif,
  tinHash: r.tin_hash,
  matchedBy: r.matched_by,
  existing: Number(r.existing) === 1,
  nameAgrees: r.name_agrees === null ? null : Number(r.name_agrees) === 1,
  resolvedAt: r.resolved_at,
});

/** The tax-id hash key's fingerprint: every replica (and every restart) must hash with one key. */
function tinKeyCheck(db: StoreDb): Pick<CustomerStore, 'checkKey' | 'hasKey' | 'keyFingerprint'> {
  const GET_SETTING = 'SELECT value FROM customer_settings WHERE name = ?';
  const PUT_SETTING =
    'INSERT INTO customer_settings (name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING';
  return {
    checkKey: (fingerprint, now) =>
      db.write(async () => {
        const cur = await db.get<{ value: string }>(GET_SETTING, ['tin_key_check']);
        if (cur === undefined) {
          await db.run(PUT_SETTING, ['tin_key_check', fingerprint]);
          await db.run(PUT_SETTING, ['tin_key_since', String(now)]);
          return 'stored' as const;
        }
        return cur.value === fingerprint ? ('same' as const) : ('different' as const);
      }),
    hasKey: async () => (await db.get(GET_SETTING, ['tin_key_check'])) !== undefined,
    keyFingerprint: async () =>
      (await db.get<{ value: string }>(GET_SETTING, ['tin_key_check']))?.value ?? null,
  };
}

/** Customers by tax-id hash: found in the core, or claimed by the loan that creates them. */
function customerRecords(
  db: StoreDb,
): Pick<CustomerStore, 'byTin' | 'recordCore' | 'claim' | 'takeOver' | 'setCif' | 'markWritten'> {
  const SEL_TIN = 'SELECT * FROM customers WHERE tin_hash = ?';
  const INS_CORE = `INSERT INTO customers (tin_hash, cif, origin, status, creator_loan_id, created_at,
     updated_at) VALUES (?, ?, 'core', 'written', NULL, ?, ?)
     ON CONFLICT(tin_hash) DO NOTHING`;
  const INS_CLAIM = `INSERT INTO customers (tin_hash, cif, origin, status, creator_loan_id, created_at,
     updated_at) VALUES (?, ?, 'created', 'claimed', ?, ?, ?)
     ON CONFLICT(tin_hash) DO NOTHING`;
  const FILL_XREF = 'UPDATE customer_xref SET cif = ?, updated_at = ? WHERE tin_hash = ? AND cif IS NULL';
  const FILL_LOAN = 'UPDATE loan_customers SET cif = ? WHERE tin_hash = ? AND cif IS NULL';
  const selTin = (h: string): Promise<RawCustomer | undefined> => db.get<RawCustomer>(SEL_TIN, [h]);
  return {
    byTin: async (h) => {
      const r = await selTin(h);
      return r === undefined ? undefined : customer(r);
    },
    recordCore: (h, cif, now) =>
      db.write(async () => {
        await db.run(INS_CORE, [h, cif, now, now]);
        return customer((await selTin(h)) as RawCustomer);
      }),
    claim: (h, cif, loanId, now) =>
      db.write(async () => {
        await db.run(INS_CLAIM, [h, cif, loanId, now, now]);
        return customer((await selTin(h)) as RawCustomer);
      }),
    takeOver: async (h, from, to, now) =>
      (
        await db.run(
          `UPDATE customers SET creator_loan_id = ?, updated_at = ? WHERE ` +
            `tin_hash = ? AND status = 'claimed' AND creator_loan_id = ?`,
          [to, now, h, from],
        )
      ).changes === 1,
    setCif: (h, cif, now) =>
      db.write(async () => {
        await db.run('UPDATE customers SET cif = ?, updated_at = ? WHERE tin_hash = ? AND cif IS NULL', [
          cif,
          now,
          h,
        ]);
        await db.run(FILL_XREF, [cif, now, h]);
        await db.run(FILL_LOAN, [cif, h]);
      }),
    async markWritten(loanId, cifs, now) {
      for (const c of await db.all<RawCustomer>(
        `SELECT * FROM customers WHERE creator_loan_id = ? AND status = 'claimed'`,
        [loanId],
      )) {
        const cif = c.cif ?? cifs.get(c.tin_hash) ?? null;
        await db.run(
          `UPDATE customers SET status = 'written', cif = COALESCE(cif, ?), updated_at = ? WHERE tin_hash = ?`,
          [cif, now, c.tin_hash],
        );
        if (cif !== null) {
          await db.run(FILL_XREF, [cif, now, c.tin_hash]);
          await db.run(FILL_LOAN, [cif, c.tin_hash]);
        }
      }
    },
  };
}

/** How each loan's parties were resolved (the entity ↔ CIF cross-reference and per-loan rows). */
function resolutions(
  db: StoreDb,
): Pick<CustomerStore, 'xref' | 'resolved' | 'forLoan' | 'forEntity' | 'find' | 'list' | 'resolvedBetween'> {
  const UP_XREF = `INSERT INTO customer_xref (entity_id, cif, tin_hash, matched_by, first_loan_id, last_loan_id,
     resolved_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT(entity_id) DO UPDATE SET cif = COALESCE(excluded.cif, customer_xref.cif),
       tin_hash = excluded.tin_hash,
       last_loan_id = excluded.last_loan_id, updated_at = excluded.updated_at`;
  const UP_LOAN = `INSERT INTO loan_customers (loan_id, entity_id, cif, tin_hash, matched_by, existing,
     name_agrees, resolved_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT(loan_id, entity_id) DO UPDATE SET cif = excluded.cif, tin_hash = excluded.tin_hash,
       matched_by = excluded.matched_by,
       existing = excluded.existing, name_agrees = excluded.name_agrees, resolved_at = excluded.resolved_at`;
  const BETWEEN_PAGE = 1000;
  const BETWEEN_FIRST = `SELECT lc.* FROM loan_customers lc JOIN loans l ON l.id = lc.loan_id
      WHERE lc.resolved_at >= ? AND lc.resolved_at < ? AND l.written_at IS NOT NULL
      ORDER BY lc.resolved_at, lc.loan_id, lc.entity_id LIMIT ${BETWEEN_PAGE}`;
  const BETWEEN_AFTER = `SELECT lc.* FROM loan_customers lc JOIN loans l ON l.id = lc.loan_id
      WHERE lc.resolved_at >= ? AND lc.resolved_at < ? AND l.written_at IS NOT NULL
        AND (lc.resolved_at, lc.loan_id, lc.entity_id) > (?, ?, ?)
      ORDER BY lc.resolved_at, lc.loan_id, lc.entity_id LIMIT ${BETWEEN_PAGE}`;
  return {
    xref: async (id) => {
      const r = await db.get<RawXref>('SELECT * FROM customer_xref WHERE entity_id = ?', [id]);
      return r === undefined ? undefined : xref(r);
    },
    resolved: (r, now) =>
      db.write(async () => {
        await db.run(UP_XREF, [r.entityId, r.cif, r.tinHash, r.matchedBy, r.loanId, r.loanId, now, now]);
        await db.run(UP_LOAN, [
          r.loanId,
          r.entityId,
          r.cif,
          r.tinHash,
          r.matchedBy,
          r.existing ? 1 : 0,
          r.nameAgrees === null ? null : r.nameAgrees ? 1 : 0,
          now,
        ]);
      }),
    forLoan: async (id) =>
      (
        await db.all<RawLoanCustomer>('SELECT * FROM loan_customers WHERE loan_id = ? ORDER BY rowid', [id])
      ).map(loanCustomer),
    forEntity: async (id) =>
      (
        await db.all<RawLoanCustomer>(
          'SELECT * FROM loan_customers WHERE entity_id = ? ORDER BY resolved_at, rowid',
          [id],
        )
      ).map(loanCustomer),
    find: async (key) =>
      (
        await db.all<RawXref>(
          'SELECT * FROM customer_xref WHERE entity_id = ? OR cif = ? ORDER BY resolved_at, entity_id',
          [key, key],
        )
      ).map(xref),
    list: async ({ matchedBy, limit = 1000 }) =>
      (matchedBy
        ? await db.all<RawXref>(
            'SELECT * FROM customer_xref WHERE matched_by = ? ORDER BY resolved_at, entity_id LIMIT ?',
            [matchedBy, limit],
          )
        : await db.all<RawXref>('SELECT * FROM customer_xref ORDER BY resolved_at, entity_id LIMIT ?', [
            limit,
          ])
      ).map(xref),
    // Keyset pages (resolved_at, loan, entity): a report over a busy day holds one page.
    async *resolvedBetween(since, until) {
      let after: RawLoanCustomer | null = null;
      for (;;) {
        const rows: RawLoanCustomer[] =
          after === null
            ? await db.all<RawLoanCustomer>(BETWEEN_FIRST, [since, until])
            : await db.all<RawLoanCustomer>(BETWEEN_AFTER, [
                since,
                until,
                after.resolved_at,
                after.loan_id,
                after.entity_id,
              ]);
        for (const r of rows) yield loanCustomer(r);
        if (rows.length < BETWEEN_PAGE) return;
        after = rows[rows.length - 1] as RawLoanCustomer;
      }
    },
  };
}

export function createCustomerStore(db: StoreDb): CustomerStore {
  return { ...tinKeyCheck(db), ...customerRecords(db), ...resolutions(db) };
}
