import { createCheckpointStore, type CheckpointStore } from './checkpoints.js';
import { createCustomerStore, type CustomerStore, type LoanCustomerRow } from './identity/customers.js';
import { createDaemonStatusStore, type DaemonStatusStore } from './daemon-status.js';
import type { Fence, StoreDb } from './sql.js';
import { createIdempotencyStore, type IdempotencyStore } from './idempotency.js';
import { createLoanStore, type LoanStore } from './loans.js';
import { FileBatchStore, type BatchTieRows } from './file-batches.js';
import { ImagingStore, type ImagingLoanTie } from './imaging.js';
import { createWebhookInbox, type WebhookInbox } from './inbox.js';
import { createLoanScan, type LoanScan } from './loan-scan.js';
import { createNumberStore, type NumberPools, type NumberStore } from './identity/numbers.js';

/** The one fence error (issue 34): a stale holder's write, refused; nothing was written. */
export { FencedOut, type Fence, type FenceScope, type LeaveReason } from './leadership/fence.js';

/** The repositories the boarding pipeline works with, over one database handle. */
export interface BoardingStore {
  /** The engine-neutral handle every repository runs its SQL through (sql.ts). */
  db: StoreDb;
  loans: LoanStore;
  checkpoints: CheckpointStore;
  keys: IdempotencyStore;
  daemon: DaemonStatusStore;
  /** The bank's account and customer numbers (numbers.ts). */
  numbers: NumberStore;
  /** What the reconciliation report reads (src/reports never touches SQL). */
  reports: ReportReads;
  /** Customer match: customers by TIN hash, entity ↔ CIF cross-reference, per-loan resolutions. */
  customers: CustomerStore;
  /**
   * Runs `fn` in one write transaction (SQLite: IMMEDIATE, see sqlite/db.ts): every repository call it
   * makes commits together or not at all. With a fence, the lease is checked in the same
   * transaction first (sql.ts): a stale holder's write throws FencedOut and changes nothing.
   */
  write<T>(fn: () => Promise<T>, opts?: { fence?: Fence }): Promise<T>;
  /** Runs `fn` in one read transaction: its reads see one snapshot. */
  read<T>(fn: () => Promise<T>): Promise<T>;
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
  fundedWebhooks(): Promise<number>;
  /** The file core's batch tie-out rows; null when no batch was ever written. */
  batchTie(asOfMs: number): Promise<BatchTieRows | null>;
  /** How each loan's customers were resolved in [since, until) (new and matched customers per day). */
  customerResolutions(since: number, until: number): AsyncIterable<LoanCustomerRow>;
  /** The imaging export's documents per acknowledged loan; null when it never ran. */
  imagingTie(): Promise<ImagingLoanTie[] | null>;
}

export function createReportReads(db: StoreDb): ReportReads {
  return {
    loanScan: (since) => createLoanScan(db, since),
    fundedLoans: () => createWebhookInbox(db).fundedLoans(),
    fundedWebhooks: () => createWebhookInbox(db).countOfType('loan.funded'),
    batchTie: (asOfMs) => new FileBatchStore(db).tieOut(asOfMs),
    customerResolutions: (since, until) => createCustomerStore(db).resolvedBetween(since, until),
    imagingTie: () => new ImagingStore(db).tieOut(),
  };
}

export function createBoardingStore(db: StoreDb, opts: BoardingStoreOptions = {}): BoardingStore {
  return {
    db,
    loans: createLoanStore(db),
    checkpoints: createCheckpointStore(db),
    keys: createIdempotencyStore(db),
    reports: createReportReads(db),
    daemon: createDaemonStatusStore(db),
    numbers: createNumberStore(db, opts.numberPools),
    customers: createCustomerStore(db),
    write: (fn, o) => db.write(fn, o),
    read: (fn) => db.read(fn),
  };
}
