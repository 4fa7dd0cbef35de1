import { createCheckpointStore, type CheckpointStore } from './checkpoints.js';
import { createCustomerStore, type CustomerStore } from './customers.js';
import { createDaemonStatusStore, type DaemonStatusStore } from './daemon-status.js';
import type { Db } from './db.js';
import { createIdempotencyStore, type IdempotencyStore } from './idempotency.js';
import { createLeaseStore, type LeaseStore } from './leases.js';
import { createLoanStore, type LoanStore } from './loans.js';

/** The repositories the boarding pipeline works with, over one database handle. */
export interface BoardingStore {
  db: Db;
  loans: LoanStore;
  checkpoints: CheckpointStore;
  keys: IdempotencyStore;
  leases: LeaseStore;
  daemon: DaemonStatusStore;
  /** Customer match: customers by TIN hash, entity ↔ CIF cross-reference, per-loan resolutions. */
  customers: CustomerStore;
  /** Runs `fn` in one IMMEDIATE transaction (see db.ts): its writes commit together or not at all. */
  atomically<T>(fn: () => T): T;
}

export function createBoardingStore(db: Db): BoardingStore {
  return {
    db,
    loans: createLoanStore(db),
    checkpoints: createCheckpointStore(db),
    keys: createIdempotencyStore(db),
    leases: createLeaseStore(db),
    daemon: createDaemonStatusStore(db),
    customers: createCustomerStore(db),
    atomically: (fn) => db.transaction(fn).immediate(),
  };
}
