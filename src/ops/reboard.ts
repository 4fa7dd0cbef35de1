import type { CoreSystem, DocumentFetcher } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { CHANGE_WORDS, diffRecordLists } from '../mapping/record-diff.js';
import type { Mapper, MappingInput, MappingIssue, MappingOutcome } from '../mapping/types.js';
import { formatIssue } from '../mapping/types.js';
import type { QueueItem } from '../contract/schemas.js';
import type { LoanRow, LoanStore } from '../store/loans.js';
import type { OpPlan } from './loan-plan.js';
import type { PlatformApi } from '../platform/api.js';
import type { BoardingStore } from '../store/index.js';
import { redactForStorage } from '../lib/redact.js';
import { quarantineReasonFor } from '../pipeline/board-loan.js';
import {
  boardingPackage,
  fetchMappingInput,
  maskRecords,
  parseBoardedRecords,
  storableRecords,
  storedItemOrLoan,
} from '../pipeline/mapping-input.js';
import { payloadHash } from '../pipeline/release.js';
import { mappingIdentity, type AccountNumbers } from '../identity/account-numbers.js';
import { storedCustomers } from '../identity/customer-match.js';

export interface ReboardDeps {
  store: BoardingStore;
  platform: Pick<PlatformApi, 'getLoan' | 'getEntities' | 'listDocuments'>;
  mapper: Mapper;
  core: CoreSystem;
  fetchDocument: DocumentFetcher;
  clock: Clock;
  logger: Logger;
  connectorVersion: string;
  /** The loan's core account number (identity.ts); default: the store's account pool. */
  /** The runtime's account numbers (pool or core-assigned, as configured). */
  accountNumbers: AccountNumbers;
}

export interface ReboardRequest {
  actor: string;
  reason: string;
  /** Re-write even when neither the mapping version nor the input changed since the last write. */
  force?: boolean;
  signal?: AbortSignal;
}

export type ReboardResult =
  | {
      loanId: string;
      outcome: 'rewritten';
      coreReference: string;
      previousVersion: string | null;
      mappingVersion: string;
      changes: string[];
    }
  | { loanId: string; outcome: 'unchanged'; mappingVersion: string }
  /** The current mapping would quarantine the loan: the core keeps what it has; the loan stays acknowledged. */
  | { loanId: string; outcome: 'would_quarantine'; reason: string; message: string }
  | { loanId: string; outcome: 'not_acknowledged'; state: string }
  | { loanId: string; outcome: 'failed'; message: string };

/** `loans reboard --dry-run`: what a re-board would do; `would_rewrite` carries the field changes. */
export type ReboardPreview =
  | Exclude<ReboardResult, { outcome: 'rewritten' }>
  | {
      loanId: string;
      outcome: 'would_rewrite';
      previousVersion: string | null;
      mappingVersion: string;
      changes: string[];
    };

/**
 * Whether a re-board would take this loan: only an acknowledged loan is re-boarded (the others are
 * retried). Changes nothing; reboardLoan checks it again when it runs (not_acknowledged).
 */
export async function planReboard(loans: Pick<LoanStore, 'get'>, id: string): Promise<OpPlan> {
  return acknowledgedOnly(loans, id, 're-boarded');
}

/** The rule a re-board and an imaging re-export share: an acknowledged loan, else why not. */
export async function acknowledgedOnly(
  loans: Pick<LoanStore, 'get'>,
  id: string,
  what: string,
): Promise<OpPlan> {
  const row = await loans.get(id);
  if (!row) return { loanId: id, ok: false, state: null, why: `no loan ${id} in the state database` };
  if (row.state !== 'acknowledged')
    return {
      loanId: id,
      ok: false,
      state: row.state,
      why: `loan ${id} is ${row.state}; only acknowledged loans can be ${what} (retry the others)`,
    };
  const { quarantineReason, loanNumber } = row;
  return { loanId: id, ok: true, state: row.state, quarantineReason, loanNumber, ackOnly: false };
}

/** What a preview reads with: the state database, platform reads and the mapper (no core). */
export type ReboardPreviewDeps = Pick<ReboardDeps, 'store' | 'platform' | 'mapper' | 'accountNumbers'>;

interface Prepared {
  row: LoanRow;
  item: QueueItem;
  input: MappingInput;
  hash: string;
  outcome: Extract<MappingOutcome, { ok: true }>;
  changes: string[];
  accountNumber: string | null;
}

/** Nothing to write: the loan is not acknowledged, or nothing changed since its last write. */
type Settled = Extract<ReboardResult, { outcome: 'unchanged' | 'not_acknowledged' }>;

/** Quarantine issues of the current mapping, as a re-board reports them. */
type Refusal = {
  loanId: string;
  outcome: 'would_quarantine';
  reason: string;
  message: string;
  issues: readonly MappingIssue[];
  mappingVersion: string;
};

/**
 * The reading half of a re-board, shared by the write and the dry run: the loan's item and inputs
 * (platform reads), the mapping, and the field changes against the records last written. Writes
 * nothing anywhere (the platform client books its reads in the rate ledger).
 */
async function prepare(
  deps: ReboardPreviewDeps,
  loanId: string,
  req: Pick<ReboardRequest, 'force' | 'signal'>,
  /** The account number the mapping gets: the re-board allocates one if the loan has none; a preview only looks. */
  accountNumberOf: (row: LoanRow) => Promise<string | null>,
): Promise<Prepared | Refusal | Settled> {
  const row = await deps.store.loans.get(loanId);
  if (!row || row.state !== 'acknowledged')
    return { loanId, outcome: 'not_acknowledged', state: row?.state ?? 'unknown' };
  const item = await storedItemOrLoan(deps.platform, loanId, row.queueItem, req.signal);
  const input = await fetchMappingInput(deps.platform, item, req.signal);
  const hash = payloadHash(input);
  if (!req.force && row.mappingVersion === deps.mapper.version && row.payloadHash === hash) {
    return { loanId, outcome: 'unchanged', mappingVersion: deps.mapper.version };
  }
  const accountNumber = await accountNumberOf(row);
  // With the customers its board resolved (CIFs, existing or created): a re-board writes no second customer.
  const outcome = await deps.mapper.map({
    ...input,
    identity: {
      ...mappingIdentity(accountNumber),
      customers: storedCustomers(await deps.store.customers.forLoan(loanId)),
    },
  });
  if (!outcome.ok) {
    const reason = quarantineReasonFor(outcome.issues);
    const message = redactForStorage(outcome.issues.map(formatIssue).join('; ')).slice(0, 2000);
    return {
      loanId,
      outcome: 'would_quarantine',
      reason,
      message,
      issues: outcome.issues,
      mappingVersion: outcome.mappingVersion,
    };
  }
  const before = parseBoardedRecords(row.boardedRecords);
  const changes = before
    ? diffRecordLists(before, maskRecords(outcome.records, input), CHANGE_WORDS)
    : ['(the records of the last write were not kept: written before this version)'];
  return { row, item, input, hash, outcome, changes, accountNumber };
}

const isPrepared = (p: Prepared | Refusal | Settled): p is Prepared => 'row' in p;

/**
 * `loans reboard --dry-run`: per loan, what a re-board would write to the core (field changes
 * against the records last written, masked), and nothing else: no core write, no state change,
 * no audit event, no acknowledgement.
 */
export async function previewReboard(
  deps: ReboardPreviewDeps,
  loanId: string,
  req: Pick<ReboardRequest, 'force' | 'signal'> = {},
): Promise<ReboardPreview> {
  try {
    // The loan's own number, else the one the pool would give it next (not allocated: a preview writes nothing).
    const p = await prepare(deps, loanId, req, (row) => deps.accountNumbers.preview(row.id));
    if (!isPrepared(p)) {
      if (p.outcome === 'would_quarantine')
        return { loanId, outcome: 'would_quarantine', reason: p.reason, message: p.message };
      return p;
    }
    return {
      loanId,
      outcome: 'would_rewrite',
      previousVersion: p.row.mappingVersion,
      mappingVersion: p.outcome.mappingVersion,
      changes: p.changes,
    };
  } catch (err) {
    return { loanId, outcome: 'failed', message: redactForStorage(errorMessage(err)).slice(0, 2000) };
  }
}

/**
 * `loans reboard`: writes an acknowledged loan to the core again with the mapping loaded now,
 * after a mapping fix. The core write is idempotent by external id (the file core replaces the
 * package; Fineract completes what is missing), the platform is not acknowledged a second time
 * (the loan's release was acknowledged already and its state stays `acknowledged`), and each
 * re-board is an audited event with who, why, the versions and the field changes.
 */
export async function reboardLoan(
  deps: ReboardDeps,
  loanId: string,
  req: ReboardRequest,
): Promise<ReboardResult> {
  const { store, clock } = deps;
  const log = deps.logger.child({ loanId, component: 'reboard' });
  try {
    // The number the loan was boarded with (a loan boarded before pools existed gets its first one
    // here, kept from then on).
    const numbers = deps.accountNumbers;
    const allocate = (row: LoanRow): Promise<string | null> =>
      store.write(async () => {
        const n = await numbers.accountNumberFor(row, clock.now());
        if (n !== null && row.accountNumber !== n)
          await store.loans.amend(
            loanId,
            {
              expected: 'acknowledged',
              kind: 'ops',
              actor: req.actor,
              reason: 'account number allocated',
              detail: { accountNumber: n },
              patch: { accountNumber: n },
            },
            clock.now(),
          );
        return n;
      });
    const p = await prepare(deps, loanId, req, allocate);
    if (!isPrepared(p)) {
      if (p.outcome !== 'would_quarantine') return p;
      await store.loans.recordEvent(
        loanId,
        {
          kind: 'ops',
          actor: req.actor,
          reason: `reboard refused: the mapping would quarantine (${p.reason})`,
          detail: { why: req.reason, mappingVersion: p.mappingVersion, issues: p.issues.slice(0, 20) },
        },
        clock.now(),
      );
      return { loanId, outcome: 'would_quarantine', reason: p.reason, message: p.message };
    }
    const { row, item, input, hash, outcome, changes, accountNumber } = p;
    const receipt = await deps.core.board(
      boardingPackage({
        loanId,
        item,
        accountNumber,
        outcome,
        input,
        connectorVersion: deps.connectorVersion,
        fetchDocument: deps.fetchDocument,
      }),
      req.signal ? { signal: req.signal } : {},
    );
    const warnings = outcome.warnings ?? [];
    await store.loans.amend(
      loanId,
      {
        expected: 'acknowledged',
        // Not a newer release the daemon boarded while this write ran: its records must stay.
        expectedReleaseMarker: row.releaseMarker,
        kind: 'ops',
        actor: req.actor,
        reason: `reboard: ${req.reason}`,
        detail: {
          previousMappingVersion: row.mappingVersion,
          mappingVersion: outcome.mappingVersion,
          coreReference: receipt.coreReference,
          changes: changes.slice(0, 100).map((c) => redactForStorage(c)),
          ...(warnings.length > 0
            ? {
                warnings: warnings.slice(0, 50).map((w) => ({
                  code: w.code,
                  field: `${w.target}.${w.field}`,
                  message: redactForStorage(w.message),
                  at: `${w.file}:${w.line}:${w.column}`,
                })),
              }
            : {}),
        },
        patch: {
          mappingVersion: outcome.mappingVersion,
          coreReference: receipt.coreReference,
          payloadHash: hash,
          boardedRecords: storableRecords(outcome.records, input),
          reviewItems: warnings.length,
          ...(receipt.accountNumber ? { accountNumber: receipt.accountNumber } : {}),
        },
      },
      clock.now(),
    );
    log.info(
      {
        actor: req.actor,
        previous: row.mappingVersion,
        mappingVersion: outcome.mappingVersion,
        changes: changes.length,
      },
      'loan re-boarded to the core',
    );
    return {
      loanId,
      outcome: 'rewritten',
      coreReference: receipt.coreReference,
      previousVersion: row.mappingVersion,
      mappingVersion: outcome.mappingVersion,
      changes,
    };
  } catch (err) {
    const message = redactForStorage(errorMessage(err)).slice(0, 2000);
    log.warn(
      { err: message },
      'reboard failed; the loan stays acknowledged (if the core write went through, the core may hold the new ' +
        'records while the connector keeps its record of the earlier ones)',
    );
    await store.loans.recordEvent(
      loanId,
      { kind: 'ops', actor: req.actor, reason: 'reboard failed', detail: { why: req.reason, message } },
      clock.now(),
    );
    return { loanId, outcome: 'failed', message };
  }
}
