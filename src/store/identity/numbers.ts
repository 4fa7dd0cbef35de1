import { checkDigit, type CheckDigitScheme } from '../../lib/check-digit.js';
import { FatalError } from '../../lib/errors.js';
import type { StoreDb } from '../sql.js';

/**
 * The bank's own numbers (docs/core.md "Account and customer numbers"): a loan's core account
 * number and a new customer's CIF, allocated from configured pools. A key (the loan id, a
 * customer's TIN hash) gets one number forever: the allocation is committed before `allocate`
 * returns (inside the caller's transaction when there is one), so a retry, a restart or a
 * re-board finds it again, and UNIQUE(pool, number) guarantees no two keys ever share a number.
 *
 * Sequences are taken from each range in the order the ranges are listed; a per-range cursor
 * (`bank_number_cursors`, keyed by the range's start) records the last sequence consumed, so a
 * range added or widened later is used without renumbering. A sequence is skipped (consumed, never
 * issued) when its mod-11 check digit would be 10, or when its formatted number is already held by
 * another key (a range re-declared after a config change). Gaps therefore can occur: a sequence
 * skipped that way, and a number allocated for a loan that then never boards (quarantined,
 * skipped), which keeps its number and is not given to another loan.
 */
export type NumberPoolName = 'account' | 'customer';

export interface NumberPoolSpec {
  ranges: ReadonlyArray<{ from: string; to: string }>;
  prefix: string;
  width: number;
  checkDigit: CheckDigitScheme;
  warnAt: number;
}

/** The pools the store allocates from, and the config key each one is set under (named in errors). */
export interface NumberPools {
  account: NumberPoolSpec;
  customer: NumberPoolSpec;
}

export const POOL_CONFIG_KEY: Record<NumberPoolName, string> = {
  account: 'identity.accountNumbers.pool',
  customer: 'identity.customerNumbers.pool',
};

/** The schema's defaults (src/config/schema.ts identitySchema), for a store opened without config. */
export const DEFAULT_NUMBER_POOLS: NumberPools = {
  account: {
    ranges: [{ from: '100000000', to: '999999999' }],
    prefix: '',
    width: 10,
    checkDigit: 'luhn',
    warnAt: 0.9,
  },
  customer: {
    ranges: [{ from: '10000000', to: '99999999' }],
    prefix: '',
    width: 9,
    checkDigit: 'luhn',
    warnAt: 0.9,
  },
};

export interface AllocatedNumber {
  number: string;
  /** true when this call allocated it; false when the key already had it. */
  fresh: boolean;
}

export interface PoolUsage {
  pool: NumberPoolName;
  /** Sequences consumed (issued or skipped) across the configured ranges. */
  used: number;
  /** Sequences in the configured ranges. */
  capacity: number;
  /** used / capacity (1 when exhausted). */
  ratio: number;
  warnAt: number;
  /** Numbers held by keys (all time, including ones from ranges no longer configured). */
  allocated: number;
}

/** A pool has no number left: boarding stops (a FatalError: the cycle stops, `sync --once` exits non-zero). */
export class PoolExhaustedError extends FatalError {
  constructor(
    readonly pool: NumberPoolName,
    readonly capacity: number,
  ) {
    super(
      `${POOL_CONFIG_KEY[pool]}: the ${pool} number pool is exhausted ` +
        `(all ${capacity} sequence(s) of its ranges are used); ` +
        `add a range to ${POOL_CONFIG_KEY[pool]}.ranges and restart. Boarding stopped: no number is ever reused`,
    );
  }

  readonly code = 'identity.pool_exhausted';
}

export interface NumberStore {
  /** The key's number, allocating the next free one on first use. Throws PoolExhaustedError when none is left. */
  allocate(pool: NumberPoolName, key: string, now: number): Promise<AllocatedNumber>;
  /** The key's number, or null when it has none. */
  get(pool: NumberPoolName, key: string): Promise<string | null>;
  /** The key that holds `number`, or null. */
  keyOf(pool: NumberPoolName, number: string): Promise<string | null>;
  /** The number the next new key would get, without allocating it (previews); null when the pool is exhausted. */
  peek(pool: NumberPoolName): Promise<string | null>;
  usage(pool: NumberPoolName): Promise<PoolUsage>;
  /** The pool specs this store allocates from. */
  readonly pools: Readonly<NumberPools>;
}

/** The formatted number for a sequence, or null when the scheme has no check digit for it (mod 11 → 10). */
export function formatNumber(spec: NumberPoolSpec, seq: bigint): string | null {
  const checkLen = spec.checkDigit === 'none' ? 0 : 1;
  const digits = spec.width - spec.prefix.length - checkLen;
  const body = seq.toString();
  if (body.length > digits) throw new Error(`sequence ${body} does not fit ${digits} digit(s)`);
  const payload = `${spec.prefix}${body.padStart(digits, '0')}`;
  const check = checkDigit(spec.checkDigit, spec.checkDigit === 'none' ? body : payload);
  return check === null ? null : `${payload}${check}`;
}

const rangeKey = (from: string): string => BigInt(from).toString();

/**
 * Moves the range's cursor from `last` to `next` if it still stands at `last` and (guardKey) the
 * key holds no number yet: one statement, which also proves the key new. false: either of the two
 * does not hold.
 */
async function advance(
  db: StoreDb,
  pool: NumberPoolName,
  range: string,
  last: bigint | null,
  next: bigint,
  guardKey: string | null,
  now: number,
): Promise<boolean> {
  const unheld =
    guardKey === null ? '' : ' AND NOT EXISTS (SELECT 1 FROM bank_numbers WHERE pool = ? AND key = ?)';
  const guard = guardKey === null ? [] : [pool, guardKey];
  if (last === null) {
    // The range's first allocation (the key was checked just before): its cursor row.
    return (
      (
        await db.run(
          'INSERT INTO bank_number_cursors (pool, range_from, last_seq, updated_at) VALUES (?, ?, ?, ?) ' +
            'ON CONFLICT (pool, range_from) DO NOTHING',
          [pool, range, next.toString(), now],
        )
      ).changes === 1
    );
  }
  const r = await db.run(
    'UPDATE bank_number_cursors SET last_seq = ?, updated_at = ? WHERE pool = ? AND range_from = ? ' +
      `AND last_seq = ?${unheld}`,
    [next.toString(), now, pool, range, last.toString(), ...guard],
  );
  return r.changes === 1;
}

export function createNumberStore(db: StoreDb, pools: NumberPools = DEFAULT_NUMBER_POOLS): NumberStore {
  const selectByKey = (pool: string, key: string): Promise<{ number: string } | undefined> =>
    db.get<{ number: string }>('SELECT number FROM bank_numbers WHERE pool = ? AND key = ?', [pool, key]);
  const selectByNumber = (pool: string, number: string): Promise<{ key: string } | undefined> =>
    db.get<{ key: string }>('SELECT key FROM bank_numbers WHERE pool = ? AND number = ?', [pool, number]);
  const selectCursor = (pool: string, from: string): Promise<{ last_seq: string } | undefined> =>
    db.get<{ last_seq: string }>(
      'SELECT last_seq FROM bank_number_cursors WHERE pool = ? AND range_from = ?',
      [pool, from],
    );
  /**
   * The last sequence of each (pool, range) as this handle last wrote or read it (null: no cursor
   * row yet). Only a hint: every advance is a compare-and-set on the stored value, so a cursor another
   * handle moved, or a transaction that rolled back, fails the set and the cursor is read again.
   */
  const cursors = new Map<string, bigint | null>();
  const capacityOf = (spec: NumberPoolSpec): bigint =>
    spec.ranges.reduce((n, r) => n + (BigInt(r.to) - BigInt(r.from) + 1n), 0n);

  /**
   * The next free number of the pool, walking its ranges in order from each range's cursor; null
   * when every range is used up (previews: reads only).
   */
  async function nextFree(pool: NumberPoolName): Promise<string | null> {
    const spec = pools[pool];
    for (const range of spec.ranges) {
      const from = BigInt(range.from);
      const to = BigInt(range.to);
      const cursor = await selectCursor(pool, rangeKey(range.from));
      let seq = cursor ? BigInt(cursor.last_seq) + 1n : from;
      if (seq < from) seq = from;
      for (; seq <= to; seq++) {
        const number = formatNumber(spec, seq);
        if (number !== null && !(await selectByNumber(pool, number))) return number;
      }
    }
    return null;
  }

  /**
   * Two statements for a new key in the usual case: the cursor's compare-and-set (which also finds
   * the key holds no number) and the insert; a key that holds one costs the failed set and its read.
   * The pool's allocated count follows by trigger (migration 21).
   */
  async function allocateIn(pool: NumberPoolName, key: string, now: number): Promise<AllocatedNumber> {
    const spec = pools[pool];
    let keyIsNew = false;
    for (const range of spec.ranges) {
      const from = BigInt(range.from);
      const to = BigInt(range.to);
      const rk = rangeKey(range.from);
      const ck = `${pool}:${rk}`;
      for (;;) {
        const known = cursors.get(ck);
        if (known === undefined || (known === null && !keyIsNew)) {
          if (!keyIsNew) {
            const held = await selectByKey(pool, key);
            if (held) return { number: held.number, fresh: false };
            keyIsNew = true;
          }
          const row = await selectCursor(pool, rk);
          cursors.set(ck, row ? BigInt(row.last_seq) : null);
          continue;
        }
        if (known !== null && known >= to) break;
        let seq = known === null || known < from ? from : known + 1n;
        // A sequence without a check digit (mod 11 → 10) is consumed, never issued.
        while (seq <= to && formatNumber(spec, seq) === null) seq += 1n;
        // Nothing issuable left: the range is recorded as used to its end, so the next call starts past it.
        const next = seq <= to ? seq : to;
        if (!(await advance(db, pool, rk, known, next, keyIsNew ? null : key, now))) {
          // The key holds a number (the cursor hint may well be right: kept), or the hint is stale.
          if (!keyIsNew) {
            const held = await selectByKey(pool, key);
            if (held) return { number: held.number, fresh: false };
            keyIsNew = true;
          }
          cursors.delete(ck);
          continue;
        }
        keyIsNew = true;
        cursors.set(ck, next);
        if (seq > to) break;
        const number = formatNumber(spec, seq) as string;
        const inserted = await db.get<{ number: string }>(
          'INSERT INTO bank_numbers (pool, key, number, allocated_at) VALUES (?, ?, ?, ?) ' +
            'ON CONFLICT DO NOTHING RETURNING number',
          [pool, key, number, now],
        );
        if (inserted) return { number, fresh: true };
        // Held by another key (a range re-declared after a config change): consumed, try the next.
      }
    }
    // Every range used up: a key that holds a number still gets it.
    const held = keyIsNew ? undefined : await selectByKey(pool, key);
    if (held) return { number: held.number, fresh: false };
    throw new PoolExhaustedError(pool, Number(capacityOf(spec)));
  }

  return {
    pools,
    // A write transaction (IMMEDIATE on SQLite): two processes (or two handles) allocating at once
    // serialise on the write lock, and each sees the other's committed numbers. Inside a caller's
    // transaction it runs in that one, without a savepoint of its own: what a failed allocation can
    // leave there is a cursor moved past sequences it consumed (a gap, never a number twice). On
    // PostgreSQL every write transaction takes the store's advisory write lock first (sql.ts), so
    // allocations serialise there the same way; UNIQUE(pool, number) is the last guard, never the mechanism.
    allocate: (pool, key, now) => {
      if (key === '') throw new Error('number pool: empty key');
      return db.inTransaction ? allocateIn(pool, key, now) : db.write(() => allocateIn(pool, key, now));
    },
    get: async (pool, key) => (await selectByKey(pool, key))?.number ?? null,
    keyOf: async (pool, number) => (await selectByNumber(pool, number))?.key ?? null,
    peek: (pool) => nextFree(pool),
    usage: async (pool) => {
      const spec = pools[pool];
      let used = 0n;
      for (const range of spec.ranges) {
        const from = BigInt(range.from);
        const to = BigInt(range.to);
        const cursor = await selectCursor(pool, rangeKey(range.from));
        if (!cursor) continue;
        const last = BigInt(cursor.last_seq);
        if (last >= from) used += (last > to ? to : last) - from + 1n;
      }
      const capacity = capacityOf(spec);
      return {
        pool,
        used: Number(used),
        capacity: Number(capacity),
        ratio: capacity === 0n ? 1 : Number((used * 1_000_000n) / capacity) / 1_000_000,
        warnAt: spec.warnAt,
        allocated: Number(
          (
            await db.get<{ n: number }>('SELECT allocated AS n FROM bank_number_counts WHERE pool = ?', [
              pool,
            ])
          )?.n ?? 0,
        ),
      };
    },
  };
}

/** The pools as the config declares them (identity.accountNumbers.pool, identity.customerNumbers.pool). */
export function numberPoolsOf(identity: {
  accountNumbers: { pool: NumberPoolSpec };
  customerNumbers: { pool: NumberPoolSpec };
}): NumberPools {
  return { account: identity.accountNumbers.pool, customer: identity.customerNumbers.pool };
}
