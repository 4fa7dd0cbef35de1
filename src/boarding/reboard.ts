import type { CoreSystem, DocumentFetcher } from '../core/port.js';
import type { Clock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { CHANGE_WORDS, diffRecordLists } from '../mapping/fixtures.js';
import type { Mapper } from '../mapping/types.js';
import { formatIssue } from '../mapping/types.js';
import type { PlatformApi } from '../platform/api.js';
import type { BoardingStore } from '../store/index.js';
import { redactForStorage } from '../store/redact.js';
import { quarantineReasonFor } from './board-loan.js';
import { canonicalFields, fetchMappingInput, maskRecords, parseBoardedRecords, storableRecords, storedItemOrLoan } from './mapping-input.js';
import { payloadHash } from './release.js';

export interface ReboardDeps {
  store: BoardingStore;
  platform: Pick<PlatformApi, 'getLoan' | 'getEntities' | 'listDocuments'>;
  mapper: Mapper;
  core: CoreSystem;
  fetchDocument: DocumentFetcher;
  clock: Clock;
  logger: Logger;
  connectorVersion: string;
}

export interface ReboardRequest {
  actor: string;
  reason: string;
  /** Re-write even when neither the mapping version nor the input changed since the last write. */
  force?: boolean;
  signal?: AbortSignal;
}

export type ReboardResult =
  | { loanId: string; outcome: 'rewritten'; coreReference: string; previousVersion: string | null; mappingVersion: string; changes: string[] }
  | { loanId: string; outcome: 'unchanged'; mappingVersion: string }
  /** The current mapping would quarantine the loan: the core keeps what it has; the loan stays acknowledged. */
  | { loanId: string; outcome: 'would_quarantine'; reason: string; message: string }
  | { loanId: string; outcome: 'not_acknowledged'; state: string }
  | { loanId: string; outcome: 'failed'; message: string };

/**
 * `loans reboard`: writes an acknowledged loan to the core again with the mapping loaded now,
 * after a mapping fix. The core write is idempotent by external id (the file core replaces the
 * package; Fineract completes what is missing), the platform is not acknowledged a second time
 * (the loan's release was acknowledged already and its state stays `acknowledged`), and each
 * re-board is an audited event with who, why, the versions and the field changes.
 */
export async function reboardLoan(deps: ReboardDeps, loanId: string, req: ReboardRequest): Promise<ReboardResult> {
  const { store, clock } = deps;
  const log = deps.logger.child({ loanId, component: 'reboard' });
  const row = store.loans.get(loanId);
  if (!row || row.state !== 'acknowledged') return { loanId, outcome: 'not_acknowledged', state: row?.state ?? 'unknown' };
  try {
    const item = await storedItemOrLoan(deps.platform, loanId, row.queueItem, req.signal);
    const input = await fetchMappingInput(deps.platform, item, req.signal);
    const hash = payloadHash(input);
    if (!req.force && row.mappingVersion === deps.mapper.version && row.payloadHash === hash) {
      return { loanId, outcome: 'unchanged', mappingVersion: deps.mapper.version };
    }
    const outcome = await deps.mapper.map(input);
    if (!outcome.ok) {
      const reason = quarantineReasonFor(outcome.issues);
      const message = redactForStorage(outcome.issues.map(formatIssue).join('; ')).slice(0, 2000);
      store.loans.recordEvent(loanId, { kind: 'ops', actor: req.actor, reason: `reboard refused: the mapping would quarantine (${reason})`, detail: { why: req.reason, mappingVersion: outcome.mappingVersion, issues: outcome.issues.slice(0, 20) } }, clock.now());
      return { loanId, outcome: 'would_quarantine', reason, message };
    }
    const before = parseBoardedRecords(row.boardedRecords);
    const changes = before ? diffRecordLists(before, maskRecords(outcome.records), CHANGE_WORDS) : ['(the records of the last write were not kept: written before this version)'];
    const receipt = await deps.core.board(
      {
        loanId,
        loanNumber: item.loanNumber ?? null,
        mappingVersion: outcome.mappingVersion,
        connectorVersion: deps.connectorVersion,
        records: outcome.records,
        documents: input.documents,
        fetchDocument: deps.fetchDocument,
        source: canonicalFields(item),
      },
      req.signal ? { signal: req.signal } : {},
    );
    const warnings = outcome.warnings ?? [];
    store.loans.amend(
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
          ...(warnings.length > 0 ? { warnings: warnings.slice(0, 50).map((w) => ({ code: w.code, field: `${w.target}.${w.field}`, message: redactForStorage(w.message), at: `${w.file}:${w.line}:${w.column}` })) } : {}),
        },
        patch: { mappingVersion: outcome.mappingVersion, coreReference: receipt.coreReference, payloadHash: hash, boardedRecords: storableRecords(outcome.records), reviewItems: warnings.length },
      },
      clock.now(),
    );
    log.info({ actor: req.actor, previous: row.mappingVersion, mappingVersion: outcome.mappingVersion, changes: changes.length }, 'loan re-boarded to the core');
    return { loanId, outcome: 'rewritten', coreReference: receipt.coreReference, previousVersion: row.mappingVersion, mappingVersion: outcome.mappingVersion, changes };
  } catch (err) {
    const message = redactForStorage(errorMessage(err)).slice(0, 2000);
    log.warn({ err: message }, 'reboard failed; the loan stays acknowledged (if the core write went through, the core may hold the new records while the connector keeps its record of the earlier ones)');
    store.loans.recordEvent(loanId, { kind: 'ops', actor: req.actor, reason: 'reboard failed', detail: { why: req.reason, message } }, clock.now());
    return { loanId, outcome: 'failed', message };
  }
}
