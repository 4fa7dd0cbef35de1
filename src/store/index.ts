import { createCheckpointStore, type CheckpointStore } from './checkpoints.js';
import type { Db } from './db.js';
import { createIdempotencyStore, type IdempotencyStore } from './idempotency.js';
import { createLoanStore, type LoanStore } from './loans.js';

/** The repositories the boarding pipeline works with, over one database handle. */
export interface BoardingStore {
  db: Db;
  loans: LoanStore;
  checkpoints: CheckpointStore;
  keys: IdempotencyStore;
}

export function createBoardingStore(db: Db): BoardingStore {
  return {
    db,
    loans: createLoanStore(db),
    checkpoints: createCheckpointStore(db),
    keys: createIdempotencyStore(db),
  };
}
