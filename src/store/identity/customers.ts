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

/**
 * Platform entity id ↔ CIF. lastLoanId is the loan that resolved the entity last (read from
 * loan_customers: a repeat borrower writes no cross-reference); updatedAt when the reference last
 * changed (CIF, tax id).
 */
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
  /** The customers of several tax-id hashes in one look-up (a loan's parties). */
  byTins(tinHashes: readonly string[]): Promise<Map<string, CustomerRow>>;
  xref(entityId: string): Promise<XrefRow | undefined>;
  /** The cross-references of several entities in one look-up (a loan's parties). */
  xrefs(entityIds: readonly string[]): Promise<Map<string, XrefRow>>;
  /** A customer the core already has (extract, search). */
  recordCore(tinHash: string, cif: string, now: number): Promise<CustomerRow>;
  /** This loan's write creates the customer: the claim is committed before the write. */
  claim(tinHash: string, cif: string | null, loanId: string, now: number): Promise<CustomerRow>;
  /**
   * claim for several customers in one statement: returns the tax-id hashes this call claimed (one
   * missing: another writer holds it).
   */
  claimAll(
    claims: ReadonlyArray<{ tinHash: string; cif: string | null }>,
    loanId: string,
    now: number,
  ): Promise<Set<string>>;
  /** recordCore for several customers in one statement (a customer already known keeps its row). */
  recordCoreAll(found: ReadonlyArray<{ tinHash: string; cif: string }>, now: number): Promise<void>;
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
  /**
   * What a loan resolved for all its entities: one statement for the loan's rows, one for the
   * cross-references that are new or changed against `before` (a repeat borrower writes none).
   */
  resolvedAll(
    rows: ReadonlyArray<Omit<LoanCustomerRow, 'resolvedAt'>>,
    before: ReadonlyMap<string, XrefRow>,
    now: number,
  ): Promise<void>;
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

/**
 * A cross-reference as shown: the last loan is the latest loan_customers row of the entity (an
 * index probe), so a repeat borrower's board need not rewrite its cross-reference.
 */
const XREF_COLS = `entity_id, cif, tin_hash, matched_by, first_loan_id,
  COALESCE((SELECT lc.loan_id FROM loan_customers lc WHERE lc.entity_id = customer_xref.entity_id
    ORDER BY lc.resolved_at DESC, lc.rowid DESC LIMIT 1), last_loan_id) AS last_loan_id, resolved_at, updated_at`;

const marks = (n: number): string => Array.from({ length: n }, () => '?').join(', ');

/** Rows of `table` whose `column` is one of `keys` (each asked once), by that key: one statement. */
async function rowsByKey<Raw, Row>(
  db: StoreDb,
  table: string,
  column: keyof Raw & string,
  keys: readonly string[],
  toRow: (r: Raw) => Row,
): Promise<Map<string, Row>> {
  const out = new Map<string, Row>();
  const unique = [...new Set(keys)];
  if (unique.length === 0) return out;
  for (const r of await db.all<Raw>(
    `SELECT * FROM ${table} WHERE ${column} IN (${marks(unique.length)})`,
    unique,
  ))
    out.set(String(r[column]), toRow(r));
  return out;
}

/** The last of each key (a multi-row upsert may not touch one row twice: PostgreSQL refuses it). */
function uniqueBy<T>(rows: readonly T[], key: (r: T) => string): T[] {
  return [...new Map(rows.map((r) => [key(r), r] as const)).values()];
}

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
): Pick<
  CustomerStore,
  | 'byTin'
  | 'byTins'
  | 'recordCore'
  | 'recordCoreAll'
  | 'claim'
  | 'claimAll'
  | 'takeOver'
  | 'setCif'
  | 'markWritten'
> {
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
    byTins: (hs) => rowsByKey<RawCustomer, CustomerRow>(db, 'customers', 'tin_hash', hs, customer),
    recordCoreAll: async (found, now) => {
      const rows = uniqueBy(found, (f) => f.tinHash);
      if (rows.length === 0) return;
      await db.run(
        `INSERT INTO customers (tin_hash, cif, origin, status, creator_loan_id, created_at, updated_at) VALUES ` +
          rows.map(() => `(?, ?, 'core', 'written', NULL, ?, ?)`).join(', ') +
          ' ON CONFLICT(tin_hash) DO NOTHING',
        rows.flatMap((f) => [f.tinHash, f.cif, now, now]),
      );
    },
    claimAll: async (claims, loanId, now) => {
      const rows = uniqueBy(claims, (c) => c.tinHash);
      if (rows.length === 0) return new Set();
      const got = await db.all<{ tin_hash: string }>(
        `INSERT INTO customers (tin_hash, cif, origin, status, creator_loan_id, created_at, updated_at) VALUES ` +
          rows.map(() => `(?, ?, 'created', 'claimed', ?, ?, ?)`).join(', ') +
          ' ON CONFLICT(tin_hash) DO NOTHING RETURNING tin_hash',
        rows.flatMap((c) => [c.tinHash, c.cif, loanId, now, now]),
      );
      return new Set(got.map((r) => r.tin_hash));
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
    // One statement when the customers' numbers were known at the claim (a pool, the file core);
    // numbers the core assigned (Fineract) fill the three tables with one statement each.
    async markWritten(loanId, cifs, now) {
      const written = await db.all<{ tin_hash: string; cif: string | null }>(
        `UPDATE customers SET status = 'written', updated_at = ? WHERE creator_loan_id = ? AND status = 'claimed' ` +
          'RETURNING tin_hash, cif',
        [now, loanId],
      );
      const fill = written.flatMap((c) => {
        const cif = c.cif === null ? cifs.get(c.tin_hash) : undefined;
        return cif === undefined ? [] : [[c.tin_hash, cif] as const];
      });
      if (fill.length === 0) return;
      const byTin = `CASE tin_hash ${fill.map(() => 'WHEN ? THEN ?').join(' ')} END`;
      const pairs = fill.flat();
      const hashes = fill.map(([h]) => h);
      const where = `WHERE tin_hash IN (${marks(hashes.length)}) AND cif IS NULL`;
      await db.run(`UPDATE customers SET cif = ${byTin}, updated_at = ? ${where}`, [
        ...pairs,
        now,
        ...hashes,
      ]);
      await db.run(`UPDATE customer_xref SET cif = ${byTin}, updated_at = ? ${where}`, [
        ...pairs,
        now,
        ...hashes,
      ]);
      await db.run(`UPDATE loan_customers SET cif = ${byTin} ${where}`, [...pairs, ...hashes]);
    },
  };
}

/** How each loan's parties were resolved (the entity ↔ CIF cross-reference and per-loan rows). */
function resolutions(
  db: StoreDb,
): Pick<
  CustomerStore,
  | 'xref'
  | 'xrefs'
  | 'resolved'
  | 'resolvedAll'
  | 'forLoan'
  | 'forEntity'
  | 'find'
  | 'list'
  | 'resolvedBetween'
> {
  const UP_XREF_HEAD = `INSERT INTO customer_xref (entity_id, cif, tin_hash, matched_by, first_loan_id, last_loan_id,
     resolved_at, updated_at) VALUES `;
  const UP_XREF_TAIL = ` ON CONFLICT(entity_id) DO UPDATE SET cif = COALESCE(excluded.cif, customer_xref.cif),
       tin_hash = excluded.tin_hash,
       last_loan_id = excluded.last_loan_id, updated_at = excluded.updated_at`;
  const UP_XREF = `${UP_XREF_HEAD}(?, ?, ?, ?, ?, ?, ?, ?)${UP_XREF_TAIL}`;
  const UP_LOAN_HEAD = `INSERT INTO loan_customers (loan_id, entity_id, cif, tin_hash, matched_by, existing,
     name_agrees, resolved_at) VALUES `;
  const UP_LOAN_TAIL = ` ON CONFLICT(loan_id, entity_id) DO UPDATE SET cif = excluded.cif, tin_hash = excluded.tin_hash,
       matched_by = excluded.matched_by,
       existing = excluded.existing, name_agrees = excluded.name_agrees, resolved_at = excluded.resolved_at`;
  const UP_LOAN = `${UP_LOAN_HEAD}(?, ?, ?, ?, ?, ?, ?, ?)${UP_LOAN_TAIL}`;
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
      const r = await db.get<RawXref>(`SELECT ${XREF_COLS} FROM customer_xref WHERE entity_id = ?`, [id]);
      return r === undefined ? undefined : xref(r);
    },
    // The resolver reads cif, tax id and first loan only: the stored last_loan_id (not derived) will do.
    xrefs: (ids) => rowsByKey<RawXref, XrefRow>(db, 'customer_xref', 'entity_id', ids, xref),
    resolvedAll: async (rows, before, now) => {
      const perEntity = new Map<string, Omit<LoanCustomerRow, 'resolvedAt'>>();
      for (const r of rows) {
        const prev = perEntity.get(r.entityId);
        perEntity.set(r.entityId, prev === undefined ? r : { ...r, cif: r.cif ?? prev.cif });
      }
      const all = [...perEntity.values()];
      if (all.length === 0) return;
      const changed = all.filter((r) => {
        const b = before.get(r.entityId);
        return b === undefined || (r.cif !== null && r.cif !== b.cif) || r.tinHash !== b.tinHash;
      });
      if (changed.length > 0) {
        await db.run(
          UP_XREF_HEAD + changed.map(() => '(?, ?, ?, ?, ?, ?, ?, ?)').join(', ') + UP_XREF_TAIL,
          changed.flatMap((r) => [r.entityId, r.cif, r.tinHash, r.matchedBy, r.loanId, r.loanId, now, now]),
        );
      }
      await db.run(
        UP_LOAN_HEAD + all.map(() => '(?, ?, ?, ?, ?, ?, ?, ?)').join(', ') + UP_LOAN_TAIL,
        all.flatMap((r) => [
          r.loanId,
          r.entityId,
          r.cif,
          r.tinHash,
          r.matchedBy,
          r.existing ? 1 : 0,
          r.nameAgrees === null ? null : r.nameAgrees ? 1 : 0,
          now,
        ]),
      );
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
          `SELECT ${XREF_COLS} FROM customer_xref WHERE entity_id = ? OR cif = ? ORDER BY resolved_at, entity_id`,
          [key, key],
        )
      ).map(xref),
    list: async ({ matchedBy, limit = 1000 }) =>
      (matchedBy
        ? await db.all<RawXref>(
            `SELECT ${XREF_COLS} FROM customer_xref WHERE matched_by = ? ORDER BY resolved_at, entity_id LIMIT ?`,
            [matchedBy, limit],
          )
        : await db.all<RawXref>(
            `SELECT ${XREF_COLS} FROM customer_xref ORDER BY resolved_at, entity_id LIMIT ?`,
            [limit],
          )
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
