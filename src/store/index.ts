import { createCheckpointStore, type CheckpointStore } from './checkpoints.js';
import { createCustomerStore, type CustomerStore, type LoanCustomerRow } from './customers.js';
import { createDaemonStatusStore, type DaemonStatusStore } from './daemon-status.js';
import type { Db } from './db.js';
import { createIdempotencyStore, type IdempotencyStore } from './idempotency.js';
import { createLeaseStore, type LeaseStore } from './leases.js';
import { createLoanStore, type LoanStore } from './loans.js';
import { FileBatchStore, type BatchTieRows } from './file-batches.js';
import { createWebhookInbox, type WebhookInbox } from './inbox.js';
import { createLoanScan, type LoanScan } from './loan-scan.js';
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
  /** What the reconciliation report reads (src/reports never touches SQL). */
  reports: ReportReads;
  /** Customer match: customers by TIN hash, entity ↔ CIF cross-reference, per-loan resolutions. */
  customers: CustomerStore;
  /** Runs `fn` in one IMMEDIATE transaction (see db.ts): its writes commit together or not at all. */
  atomically<T>(fn: () => T): T;
}

export interface BoardingStoreOptions {
  /** The number pools from config (identity.*.pool); the schema's defaults when absent. */
  numberPools?: NumberPools;
}

/** The reconciliation report's reads of the state database. */
export interface ReportReads {
  /** The connector's loans (optionally boarded since an instant), streamed in id order. */
  loanScan(since: string | null): LoanScan;
  /** loan.funded times from the webhook inbox. */
  fundedLoans(): ReturnType<WebhookInbox['fundedLoans']>;
  /** How many loan.funded deliveries the inbox holds (the demo's status line). */
  fundedWebhooks(): number;
  /** The file core's batch tie-out rows; null when no batch was ever written. */
  batchTie(asOfMs: number): BatchTieRows | null;
  /** How each loan's customers were resolved in [since, until) (new and matched customers per day). */
  customerResolutions(since: number, until: number): Iterable<LoanCustomerRow>;
}

export function createReportReads(db: Db): ReportReads {
  return {
    loanScan: (since) => createLoanScan(db, since),
    fundedLoans: () => createWebhookInbox(db).fundedLoans(),
    fundedWebhooks: () => createWebhookInbox(db).countOfType('loan.funded'),
    batchTie: (asOfMs) => new FileBatchStore(db).tieOut(asOfMs),
    customerResolutions: (since, until) => createCustomerStore(db).resolvedBetween(since, until),
  };
}

export function createBoardingStore(db: Db, opts: BoardingStoreOptions = {}): BoardingStore {
  return {
    db,
    loans: createLoanStore(db),
    checkpoints: createCheckpointStore(db),
    keys: createIdempotencyStore(db),
    leases: createLeaseStore(db),
    reports: createReportReads(db),
    daemon: createDaemonStatusStore(db),
    numbers: createNumberStore(db, opts.numberPools),
    customers: createCustomerStore(db),
    atomically: (fn) => db.transaction(fn).immediate(),
  };
}
