/**
 * The file core's batch store: the port the batches (batches.ts) need from the state database
 * (issue 34: ports belong to their users). src/store/file-batches.ts implements it without
 * importing the core; src/app/core.ts wires the two and the compiler checks the fit there.
 * Every decision that must be atomic (is the open batch past its cut-off, which batch a loan goes
 * to, first board or correction) is one write transaction in the store.
 */

/** One batch as the store keeps it. Times are epoch ms. */
export interface FileBatchRow {
  id: string;
  status: 'open' | 'sealing' | 'sealed';
  openedAt: number;
  cutoffAt: number;
  /** When the batch was frozen (open → sealing: boards went to the next batch from then on). */
  sealingAt: number | null;
  sealedAt: number | null;
  sealReason: string | null;
  sealedBy: string | null;
  /** Sum of the first boards' principal, fixed at the seal (null before). */
  principalCents: string | null;
  /** The layout.yaml text the batch is written in. */
  layout: string;
}

export type BatchRowKind = 'new' | 'correction';

export interface BatchLoanRow {
  batchId: string;
  loanId: string;
  kind: BatchRowKind;
  principalCents: string | null;
  digest: string;
  rowsJson: string;
  recordCount: number;
  boardedAt: number;
}

/** What a board puts into the open batch, rendered for the kind the store decided on. */
export interface RenderedLoan {
  digest: string;
  rowsJson: string;
  recordCount: number;
}

export interface AppendInput {
  loanId: string;
  principalCents: string | null;
  now: number;
  /** The layout.yaml text the loan is rendered in: an open batch in another layout is frozen first. */
  layout: string;
  /** Cut-off and id of a batch opened now. */
  openBatch(now: number): { cutoffAt: number; day: string };
  /** Rendered once the batch is known: the rows are encrypted with that batch's key (core/file/batch-keys.ts). */
  render(kind: BatchRowKind, batchId: string): RenderedLoan;
}

export interface AppendResult {
  batchId: string;
  kind: BatchRowKind;
  outcome: 'appended' | 'replaced' | 'unchanged';
  /** Batches this call froze because their cut-off had passed: their files must now be written. */
  frozen: string[];
}

/** What the file core asks of the state database. */
export interface FileBatchStore {
  get(id: string): Promise<FileBatchRow | undefined>;
  /** Newest first. */
  list(limit?: number): Promise<FileBatchRow[]>;
  /** Frozen batches whose files are not known to be complete (a crash, or a seal in progress). */
  sealing(): Promise<FileBatchRow[]>;
  /** A batch's loans in the order they were (last) boarded, one page at a time. */
  loansOf(batchId: string): AsyncIterable<BatchLoanRow>;
  counts(batchId: string): Promise<{ loans: number; corrections: number; records: number }>;
  /** Sum of the batch's first boards' principal, in cents. */
  principalOf(batchId: string): Promise<string>;
  /** Puts a board into the open batch (opening or freezing batches as the cut-off says), atomically. */
  append(input: AppendInput): Promise<AppendResult>;
  /** Freezes the open batch if its cut-off has passed: its id, or undefined. */
  freezeDue(now: number): Promise<string | undefined>;
  /** Freezes the open batch (or the one named) now, by an operator. */
  freezeOpen(now: number, reason: string, by: string, id?: string): Promise<string | undefined>;
  /** sealing → sealed, and the batch's stored lines cleared; false when it was not sealing. */
  markSealed(id: string, now: number, totals: { principalCents: string }): Promise<boolean>;
  /** After a seal: the cleared lines gone from the engine's files too (SQLite: WAL truncated). */
  scrubAfterSeal(): { done: boolean; frames: number };
  hasLoan(loanId: string): Promise<boolean>;
  /**
   * Runs `then` once the caller's state transaction has committed (at once outside one): an append
   * made inside a board's `written` transaction (issue 44 item 5) froze a batch, whose files may only
   * be written once the freeze is durable, never for a freeze a rollback undoes.
   */
  afterCommit(then: () => Promise<void>): Promise<void>;
  /**
   * Runs fn outside the caller's transaction (its writes commit on their own): the crash recovery
   * of a seal, which a first board runs before its own step begins, must not join that step — a
   * rollback of the step would undo `sealed` after the batch's key was destroyed. Optional.
   */
  outside?<T>(fn: () => Promise<T>): Promise<T>;
}
