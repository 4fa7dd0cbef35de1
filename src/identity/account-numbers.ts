import type { Logger } from '../lib/logger.js';
import type { MappingIdentity } from '../mapping/types.js';
import { numberSource, type Config } from '../config/schema.js';
import type { BoardingStore } from '../store/index.js';
import type { NumberPoolName, PoolUsage } from '../store/identity/numbers.js';

/**
 * The loan's core account number (docs/core.md "Account and customer numbers"). With source
 * `pool` the connector allocates it from identity.accountNumbers.pool, keyed by the platform loan
 * id, in the same transaction as the loan's `fetched` transition: committed before any core
 * write, so a retry, a restart or a re-board finds the same number. With source `core` the core
 * assigns it (Fineract's accountNo): null here, and the core adapter reads it back after the
 * create (the receipt carries it).
 */
export type NumberSource = 'pool' | 'core';

export interface AccountNumbers {
  readonly source: NumberSource;
  /**
   * The loan's number, allocated on first use (source pool); null for source core. Call inside the state
   * change's transaction.
   */
  accountNumberFor(row: { id: string }, now: number): Promise<string | null>;
  /** The number the loan holds already, without allocating (preview, dry run, loans show). */
  existing(loanId: string): Promise<string | null>;
  /**
   * The number a preview or dry run maps with: the loan's own, else the one the pool would give it
   * next (not allocated: a preview writes nothing); null for source core.
   */
  preview(loanId: string): Promise<string | null>;
}

/**
 * Warns once per process when a pool crosses its warnAt share (and again at each further whole
 * percent), so a bank extends the ranges long before boarding stops. The returned usage may be up
 * to a thousandth of the capacity old (see below).
 */
export function createPoolWatch(store: BoardingStore, logger: Logger) {
  const warnedAt = new Map<NumberPoolName, number>();
  // The usage is read again after every thousandth of the pool's capacity allocated here (every
  // allocation for a pool under 2,000 numbers), not after each one: two queries per number were a
  // tenth of a board's statements, and a share moves by 1 / capacity per allocation.
  const seen = new Map<NumberPoolName, { usage: PoolUsage; since: number }>();
  return async (pool: NumberPoolName): Promise<PoolUsage> => {
    const last = seen.get(pool);
    if (last !== undefined) {
      last.since += 1;
      if (last.since < Math.max(1, Math.floor(last.usage.capacity / 1000))) return last.usage;
    }
    const usage = await store.numbers.usage(pool);
    seen.set(pool, { usage, since: 0 });
    if (usage.ratio >= usage.warnAt) {
      const percent = Math.floor(usage.ratio * 100);
      if ((warnedAt.get(pool) ?? -1) < percent) {
        warnedAt.set(pool, percent);
        logger.warn(
          { pool, used: usage.used, capacity: usage.capacity, ratio: usage.ratio, warnAt: usage.warnAt },
          `number pool "${pool}" is ${percent}% used (${usage.used} of ${usage.capacity}); add a ` +
            `range to identity.${pool === 'account' ? 'accountNumbers' : 'customerNumbers'}.pool.ranges ` +
            `before it runs out (boarding stops then)`,
        );
      }
    }
    return usage;
  };
}

export function createAccountNumbers(deps: {
  store: BoardingStore;
  source: NumberSource;
  logger: Logger;
}): AccountNumbers {
  const watch = createPoolWatch(deps.store, deps.logger);
  return {
    source: deps.source,
    async accountNumberFor(row, now) {
      if (deps.source === 'core') return null;
      const { number, fresh } = await deps.store.numbers.allocate('account', row.id, now);
      if (fresh) await watch('account');
      return number;
    },
    existing(loanId) {
      return deps.store.numbers.get('account', loanId);
    },
    async preview(loanId) {
      if (deps.source === 'core') return null;
      return (await deps.store.numbers.get('account', loanId)) ?? (await deps.store.numbers.peek('account'));
    },
  };
}

/** The identity block of the mapping input with the account number; customers are filled by customer matching. */
export function mappingIdentity(accountNumber: string | null): MappingIdentity {
  return { accountNumber, customers: {} };
}

/** The account numbers of a CLI command from its config (preview, dry run): over its own state database handle. */
export function accountNumbersFromConfig(
  config: Config,
  store: BoardingStore,
  logger: Logger,
): AccountNumbers {
  return createAccountNumbers({ store, source: numberSource(config, 'accountNumbers'), logger });
}
