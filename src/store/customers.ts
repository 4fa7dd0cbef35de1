import type { Db } from './db.js';

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
  checkKey(fingerprint: string, now: number): 'stored' | 'same' | 'different';
  /** Whether a key's fingerprint is stored already (its customers were hashed with some key). */
  hasKey(): boolean;
  byTin(tinHash: string): CustomerRow | undefined;
  xref(entityId: string): XrefRow | undefined;
  /** A customer the core already has (extract, search). */
  recordCore(tinHash: string, cif: string, now: number): CustomerRow;
  /** This loan's write creates the customer: the claim is committed before the write. */
  claim(tinHash: string, cif: string | null, loanId: string, now: number): CustomerRow;
  /** Another loan's claim that never reached the core (that loan was quarantined or skipped before writing) passes to this loan. */
  takeOver(tinHash: string, fromLoanId: string, toLoanId: string, now: number): boolean;
  /** The core learnt of the customer (a Fineract client found by search after its creating loan was written). */
  setCif(tinHash: string, cif: string, now: number): void;
  /** The loan's write is done: every customer it claimed exists in the core (cifs: numbers the core assigned, by tin hash). */
  markWritten(loanId: string, cifs: ReadonlyMap<string, string>, now: number): void;
  /** Records what a loan resolved for one entity (and the entity ↔ CIF cross-reference). */
  resolved(r: Omit<LoanCustomerRow, 'resolvedAt'>, now: number): void;
  forLoan(loanId: string): LoanCustomerRow[];
  /** Every loan that resolved this entity, oldest first. */
  forEntity(entityId: string): LoanCustomerRow[];
  /** Cross-reference rows by entity id or CIF. */
  find(entityIdOrCif: string): XrefRow[];
  list(filter: { matchedBy?: MatchedBy; limit?: number }): XrefRow[];
  /** What loans written to the core resolved in [since, until), oldest first (streamed). */
  resolvedBetween(since: number, until: number): Iterable<LoanCustomerRow>;
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
  existing: r.existing === 1,
  nameAgrees: r.name_agrees === null ? null : r.name_agrees === 1,
  resolvedAt: r.resolved_at,
});

export function createCustomerStore(db: Db): CustomerStore {
  const getSetting = db.prepare<[string], { value: string }>('SELECT value FROM customer_settings WHERE name = ?');
  const putSetting = db.prepare('INSERT INTO customer_settings (name, value) VALUES (?, ?) ON CONFLICT(name) DO NOTHING');
  const selTin = db.prepare<[string], RawCustomer>('SELECT * FROM customers WHERE tin_hash = ?');
  const insCore = db.prepare(
    `INSERT INTO customers (tin_hash, cif, origin, status, creator_loan_id, created_at, updated_at) VALUES (?, ?, 'core', 'written', NULL, ?, ?)
     ON CONFLICT(tin_hash) DO NOTHING`,
  );
  const insClaim = db.prepare(
    `INSERT INTO customers (tin_hash, cif, origin, status, creator_loan_id, created_at, updated_at) VALUES (?, ?, 'created', 'claimed', ?, ?, ?)
     ON CONFLICT(tin_hash) DO NOTHING`,
  );
  const takeOverQ = db.prepare(`UPDATE customers SET creator_loan_id = ?, updated_at = ? WHERE tin_hash = ? AND status = 'claimed' AND creator_loan_id = ?`);
  const setCifQ = db.prepare('UPDATE customers SET cif = ?, updated_at = ? WHERE tin_hash = ? AND cif IS NULL');
  const claimedBy = db.prepare<[string], RawCustomer>(`SELECT * FROM customers WHERE creator_loan_id = ? AND status = 'claimed'`);
  const written = db.prepare(`UPDATE customers SET status = 'written', cif = COALESCE(cif, ?), updated_at = ? WHERE tin_hash = ?`);
  const fillXref = db.prepare('UPDATE customer_xref SET cif = ?, updated_at = ? WHERE tin_hash = ? AND cif IS NULL');
  const fillLoan = db.prepare('UPDATE loan_customers SET cif = ? WHERE tin_hash = ? AND cif IS NULL');
  const selXref = db.prepare<[string], RawXref>('SELECT * FROM customer_xref WHERE entity_id = ?');
  const upXref = db.prepare(
    `INSERT INTO customer_xref (entity_id, cif, tin_hash, matched_by, first_loan_id, last_loan_id, resolved_at, updated_at)
     VALUES (@entityId, @cif, @tinHash, @matchedBy, @loanId, @loanId, @now, @now)
     ON CONFLICT(entity_id) DO UPDATE SET cif = COALESCE(excluded.cif, customer_xref.cif), tin_hash = excluded.tin_hash,
       last_loan_id = excluded.last_loan_id, updated_at = excluded.updated_at`,
  );
  const upLoan = db.prepare(
    `INSERT INTO loan_customers (loan_id, entity_id, cif, tin_hash, matched_by, existing, name_agrees, resolved_at)
     VALUES (@loanId, @entityId, @cif, @tinHash, @matchedBy, @existing, @nameAgrees, @now)
     ON CONFLICT(loan_id, entity_id) DO UPDATE SET cif = excluded.cif, tin_hash = excluded.tin_hash, matched_by = excluded.matched_by,
       existing = excluded.existing, name_agrees = excluded.name_agrees, resolved_at = excluded.resolved_at`,
  );
  const selLoan = db.prepare<[string], RawLoanCustomer>('SELECT * FROM loan_customers WHERE loan_id = ? ORDER BY rowid');
  const selEntity = db.prepare<[string], RawLoanCustomer>('SELECT * FROM loan_customers WHERE entity_id = ? ORDER BY resolved_at');
  const findQ = db.prepare<[string, string], RawXref>('SELECT * FROM customer_xref WHERE entity_id = ? OR cif = ? ORDER BY resolved_at, entity_id');
  const listAll = db.prepare<[number], RawXref>('SELECT * FROM customer_xref ORDER BY resolved_at, entity_id LIMIT ?');
  const listBy = db.prepare<[string, number], RawXref>('SELECT * FROM customer_xref WHERE matched_by = ? ORDER BY resolved_at, entity_id LIMIT ?');
  const between = db.prepare<[number, number], RawLoanCustomer>(
    `SELECT lc.* FROM loan_customers lc JOIN loans l ON l.id = lc.loan_id
      WHERE lc.resolved_at >= ? AND lc.resolved_at < ? AND l.written_at IS NOT NULL ORDER BY lc.resolved_at`,
  );
  const tx = <A extends unknown[], R>(fn: (...a: A) => R) => {
    const t = db.transaction(fn);
    return (...a: A): R => t.immediate(...a);
  };

  return {
    checkKey: tx((fingerprint: string, now: number) => {
      const cur = getSetting.get('tin_key_check');
      if (cur === undefined) {
        putSetting.run('tin_key_check', fingerprint);
        putSetting.run('tin_key_since', String(now));
        return 'stored' as const;
      }
      return cur.value === fingerprint ? ('same' as const) : ('different' as const);
    }),
    hasKey: () => getSetting.get('tin_key_check') !== undefined,
    byTin: (h) => {
      const r = selTin.get(h);
      return r === undefined ? undefined : customer(r);
    },
    xref: (id) => {
      const r = selXref.get(id);
      return r === undefined ? undefined : xref(r);
    },
    recordCore: tx((h: string, cif: string, now: number) => {
      insCore.run(h, cif, now, now);
      return customer(selTin.get(h) as RawCustomer);
    }),
    claim: tx((h: string, cif: string | null, loanId: string, now: number) => {
      insClaim.run(h, cif, loanId, now, now);
      return customer(selTin.get(h) as RawCustomer);
    }),
    takeOver: (h, from, to, now) => takeOverQ.run(to, now, h, from).changes === 1,
    setCif: tx((h: string, cif: string, now: number) => {
      setCifQ.run(cif, now, h);
      fillXref.run(cif, now, h);
      fillLoan.run(cif, h);
    }),
    markWritten(loanId, cifs, now) {
      for (const c of claimedBy.all(loanId)) {
        const cif = c.cif ?? cifs.get(c.tin_hash) ?? null;
        written.run(cif, now, c.tin_hash);
        if (cif !== null) {
          fillXref.run(cif, now, c.tin_hash);
          fillLoan.run(cif, c.tin_hash);
        }
      }
    },
    resolved: tx((r: Omit<LoanCustomerRow, 'resolvedAt'>, now: number) => {
      const p = { loanId: r.loanId, entityId: r.entityId, cif: r.cif, tinHash: r.tinHash, matchedBy: r.matchedBy, now };
      upXref.run(p);
      upLoan.run({ ...p, existing: r.existing ? 1 : 0, nameAgrees: r.nameAgrees === null ? null : r.nameAgrees ? 1 : 0 });
    }),
    forLoan: (id) => selLoan.all(id).map(loanCustomer),
    forEntity: (id) => selEntity.all(id).map(loanCustomer),
    find: (key) => findQ.all(key, key).map(xref),
    list: ({ matchedBy, limit = 1000 }) => (matchedBy ? listBy.all(matchedBy, limit) : listAll.all(limit)).map(xref),
    *resolvedBetween(since, until) {
      for (const r of between.iterate(since, until)) yield loanCustomer(r);
    },
  };
}
