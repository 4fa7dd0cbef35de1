import { createCheckpointStore, type CheckpointStore } from './checkpoints.js';
import { createCustomerStore, type CustomerStore } from './customers.js';
import { createDaemonStatusStore, type DaemonStatusStore } from './daemon-status.js';
import type { Db } from './db.js';
import { createIdempotencyStore, type IdempotencyStore } from './idempotency.js';
import { createLeaseStore, type LeaseStore } from './leases.js';
import { createLoanStore, type LoanStore } from './loans.js';
import { createNumberStore, type NumberPools, type NumberStore } from './numbers.js';

/** The repositories the boarding pipeline works with, over one database handle. */
export interface BoardingStore {
  db: Db;
  loans: LoanStore;
  checkpoints: CheckpointStore;
  keys: IdempotencyStore;
  leases: LeaseStore;
  daemon: DaemonStatusStore;
  /** The bank's account and customer numbers (numbers.ts). */
  numbers: NumberStore;
  /** Customer match: customers by TIN hash, entity ↔ CIF cross-reference, per-loan resolutions. */
  customers: CustomerStore;
  /** Runs `fn` in one IMMEDIATE transaction (see db.ts): its writes commit together or not at all. */
  atomically<T>(fn: () => T): T;
}

export interface BoardingStoreOptions {
  /** The number pools from config (identity.*.pool); the schema's defaults when absent. */
  numberPools?: NumberPools;
}

export function createBoardingStore(db: Db, opts: BoardingStoreOptions = {}): BoardingStore {
  return {
    db,
    loans: createLoanStore(db),
    checkpoints: createCheckpointStore(db),
    keys: createIdempotencyStore(db),
    leases: createLeaseStore(db),
    daemon: createDaemonStatusStore(db),
    numbers: createNumberStore(db, opts.numberPools),
    customers: createCustomerStore(db),
    atomically: (fn) => db.transaction(fn).immediate(),
  };
}
