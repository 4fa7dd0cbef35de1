import type { Clock } from '../lib/clock.js';
import { searchKey } from '../lib/search-key.js';
import type { Logger } from '../lib/logger.js';
import { redactForStorage } from '../lib/redact.js';
import type { Mapper, MappingIssue } from '../mapping/types.js';
import { formatIssue } from '../mapping/types.js';
import type { PlatformApi } from '../platform/api.js';
import { isPlatformError } from '../platform/errors.js';
import type { BoardingPackage, CoreReceipt, CoreSystem, DocumentFetcher } from '../core/port.js';
import type { QuarantineReason } from '../store/loan-states.js';
import { UNACKNOWLEDGED_STATES } from '../store/loan-states.js';
import type { BoardingStore } from '../store/index.js';
import type { LoanRow, TransitionInput } from '../store/loans.js';
import { retryDelayMs } from './backoff.js';
import { mappingIdentity, type AccountNumbers } from '../identity/account-numbers.js';
import { boardingPackage, fetchMappingInput, storableRecords, storedItemOrLoan } from './mapping-input.js';
import type { CustomerResolution, CustomerResolver } from '../identity/customer-match.js';
import { classifyFailure, type Failure, type FailurePhase, type RetryDisposition } from './failures.js';
import { KeyedLock } from '../core/keyed-lock.js';
import { ackKey, ackKeyForBody, payloadHash, writtenForCurrentRelease } from './release.js';
import type { ImagingStep } from '../imaging/step.js';
import type { MappingInput } from '../mapping/types.js';
import { activeTraceIds, annotateActiveSpan, inSpan, setSpanAttributes, type Span } from '../lib/tracing.js';

export interface BoardingSettings {
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
}

export interface LoanBoarderDeps {
  store: BoardingStore;
  platform: PlatformApi;
  mapper: Mapper;
  core: CoreSystem;
  fetchDocument: DocumentFetcher;
  clock: Clock;
  logger: Logger;
  settings: BoardingSettings;
  connectorVersion: string;
  random?: () => number;
  /**
   * The loan's core account number (identity.ts) from the configured source
   * (identity.accountNumbers.source): required, so no boarder falls back to the pool on its own.
   */
  accountNumbers: AccountNumbers;
  /** Customer match before create (customers.ts); absent: every entity maps as the platform sent it. */
  customers?: CustomerResolver;
  /**
   * Asked right before each core write and acknowledgement: false when this process no longer
   * leads (store/leadership/leadership.ts checkTrust), and then the call is not made. Absent: always true.
   */
  mayCall?: () => boolean;
  /** The imaging export (src/imaging/step.ts), after the core write and before the ack; absent when off. */
  imaging?: ImagingStep;
}

export type BoardOutcome =
  | { kind: 'acknowledged'; loanId: string; ackOnly: boolean }
  | {
      kind: 'retry_wait';
      loanId: string;
      code: string;
      /** Why it waits (failures.ts): the cycle counts core-unavailable and core-ambiguous towards its outage stop. */
      disposition: RetryDisposition;
      nextAttemptAt: number;
      message: string;
    }
  | { kind: 'quarantined'; loanId: string; reason: QuarantineReason; message: string }
  /** Stopped by shutdown: the loan stays in its last persisted state and resumes from it. */
  | { kind: 'interrupted'; loanId: string }
  /** Someone else moved the loan (operator, another process) while we worked on it. */
  | { kind: 'stale'; loanId: string }
  | { kind: 'not_eligible'; loanId: string; state: string }
  /** After 2 rate-limit strikes the client refuses writes: the loan waits, written, for a later cycle. */
  | { kind: 'traffic_stopped'; loanId: string; message: string }
  /** Auth/permission problem the operator must fix (platform key, core credentials): the cycle stops. */
  | { kind: 'fatal'; loanId: string; error: { code: string; message: string } };

/** A loan is boarded from any state it is still owed in. */
const WORKING: ReadonlySet<string> = new Set(UNACKNOWLEDGED_STATES);
const AMBIGUOUS = 'core.ambiguous';

/**
 * Ack body: a pure function of what was boarded (the core's reference, idempotent by external id,
 * and the mapping version), so every send under the key is byte-identical: retries, restarts, and a
 * re-send after a lost commit. The platform compares the whole body under an Idempotency-Key; with
 * `boardedAt` (our write time) in it, a loan written again after an asynchronous replica lost the
 * "written" and "acknowledged" commits carried a new time under the old key: 422, and the boarded
 * loan was quarantined as ack_rejected (issue 37). The platform records when it was boarded itself.
 * Nor the connector's version (issue 43): an upgrade between an accepted ack and its lost commit
 * changed the body under the key; the version is in the logs and the report, not in the ack.
 */
function ackBody(row: LoanRow): Record<string, unknown> {
  return {
    boardingReference: row.coreReference,
    notes: `boarding-connector; mapping ${row.mappingVersion ?? 'unknown'}`,
  };
}

export function quarantineReasonFor(issues: readonly MappingIssue[]): QuarantineReason {
  if (issues.some((i) => i.code === 'contradictory')) return 'contradictory';
  if (issues.some((i) => i.code === 'tin_incomplete')) return 'tin_incomplete';
  if (issues.some((i) => i.code === 'validation')) return 'validation';
  return 'mapping';
}

/**
 * One attempt at a loan. The attempt is counted (attempts + 1) on its first transition, in the same
 * transaction: every SQLite commit is a synchronous fsync that stalls the whole process, so a loan
 * costs four commits (fetched, mapped, written, acknowledged), not one per bookkeeping step.
 */
interface Attempt {
  n: number;
  counted: boolean;
  ackOnly: boolean;
  /** What this attempt fetched and mapped (the imaging step reuses it instead of reading it again). */
  input?: MappingInput;
  /** This attempt stored the ack key with its `written` commit (the acknowledgement need not look). */
  ackKeyStored?: boolean;
}

/** What every step of a loan's attempt works with (one per boarder). */
function loanBoarderContext(deps: LoanBoarderDeps) {
  const { store, platform, mapper, core, clock, settings } = deps;
  const loans = store.loans;
  const random = deps.random ?? Math.random;
  const { accountNumbers } = deps;

  /** Loans that share a tax id are resolved and written one after the other (never two new customers). */
  const customerLocks = new KeyedLock();
  return {
    deps,
    store,
    platform,
    mapper,
    core,
    clock,
    settings,
    loans,
    random,
    accountNumbers,
    customerLocks,
  };
}
type BoarderCtx = ReturnType<typeof loanBoarderContext>;

/** Boards one loan from whatever state it was persisted in; never throws for a loan's own failure. */
export function createLoanBoarder(deps: LoanBoarderDeps) {
  const c = loanBoarderContext(deps);
  return { board: (loanId: string, signal: AbortSignal) => board(c, loanId, signal) };
}

async function withLocks<T>(c: BoarderCtx, keys: readonly string[], fn: () => Promise<T>): Promise<T> {
  const { customerLocks } = c;
  const [first, ...rest] = keys;
  if (first === undefined) return fn();
  return customerLocks.run(first, () => withLocks(c, rest, fn));
}

/** No call once the term is over: checkTrust aborts the term's signal, which reaches `signal`. */
function assertMayCall(c: BoarderCtx, signal: AbortSignal): void {
  const { deps } = c;
  if (deps.mayCall !== undefined && !deps.mayCall()) {
    signal.throwIfAborted();
    throw new Error('this process no longer leads: the call is not made');
  }
}

/** An event's detail with the trace it happened in (the console's loan page shows the last one). */
function tracedDetail(d: unknown): unknown {
  const ids = activeTraceIds();
  if (ids === null) return d;
  const detail: object = d !== null && typeof d === 'object' ? d : d === undefined ? {} : { value: d };
  return { ...detail, traceId: ids.trace_id };
}

function transition(c: BoarderCtx, att: Attempt, id: string, traced: TransitionInput): Promise<LoanRow> {
  const { clock, loans } = c;
  const input = { ...traced, detail: tracedDetail(traced.detail) };
  if (att.counted) return loans.transition(id, input, clock.now());
  att.counted = true;
  const d = input.detail;
  const detail: object = d !== null && typeof d === 'object' ? d : d === undefined ? {} : { value: d };
  return loans.transition(
    id,
    {
      ...input,
      patch: { ...input.patch, attempts: att.n },
      detail: { attempt: att.n, ...(att.ackOnly ? { ackOnly: true } : {}), ...detail },
    },
    clock.now(),
  );
}

/** Full board: (core check) → fetch → map → write. Returns the row in state written. */
async function writeToCore(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  signal: AbortSignal,
): Promise<LoanRow | BoardOutcome> {
  const { deps, platform, core, clock } = c;
  const log = deps.logger.child({ loanId: row.id });
  // After an ambiguous answer (a timeout: the write may have committed) ask the core first, and do
  // not write again if it has the loan. After a crash mid-write (state mapped, no answer at all)
  // write again instead: board(c) is idempotent by external id and completes whatever part of a
  // multi-step write (package and batch row; client, loan and documents) the crash cut off.
  if (row.coreWriteStartedAt !== null && row.lastErrorCode !== AMBIGUOUS) {
    log.info(
      'a core write for this release may have been interrupted: writing again (idempotent by external id)',
    );
  }
  if (row.coreWriteStartedAt !== null && row.lastErrorCode === AMBIGUOUS) {
    const found = await core.findLoan(row.id);
    if (found && found.complete === false) {
      log.info(
        { coreReference: found.coreReference },
        'core holds part of this loan after an uncertain write: ' +
          'boarding again to complete it (idempotent by external id)',
      );
    } else if (
      found &&
      (row.mappingVersion === null ||
        found.mappingVersion === null ||
        found.mappingVersion === row.mappingVersion)
    ) {
      log.info(
        { coreReference: found.coreReference },
        'core already holds this loan (earlier write committed): not writing again',
      );
      return transition(c, att, row.id, {
        to: 'written',
        expectedFrom: row.state,
        reason: 'found in core after an uncertain write',
        detail: { coreReference: found.coreReference },
        // The records of this write are not known here: no stale ones from an earlier release for a preview
        // to diff against.
        patch: {
          coreReference: found.coreReference,
          writtenAt: clock.now(),
          writtenReleaseMarker: row.releaseMarker,
          lastErrorCode: null,
          lastErrorMessage: null,
          nextAttemptAt: null,
          boardedRecords: null,
        },
        also: async () => {
          await ensureAckKey(c, att, row);
          await deps.customers?.afterWrite(row.id, null);
        },
      });
    }
  }
  const item = await storedItemOrLoan(platform, row.id, row.queueItem, signal);
  const input = await fetchMappingInput(platform, item, signal);
  const resolver = deps.customers;
  return withLocks(c, resolver ? resolver.lockKeys(input.entities) : [], () =>
    mapAndWrite(c, att, row, item, input, signal),
  );
}

/**
 * The step before the core write, one transaction (issue 44 item 5): the customer claims, the
 * bank's account number, `fetched` and `mapped` (or `quarantined`) with their events and review
 * items commit together. Nothing external happens between fetched and mapped, so they need not be
 * separate commits; the number still commits before anything reaches the core (a retry, a restart
 * or a re-board reuses it; an exhausted pool throws here: a fatal stop). The customer look-ups,
 * which may ask the core, run before the transaction begins (StoreDb.unit).
 */
async function beforeCoreWrite(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  input: Awaited<ReturnType<typeof fetchMappingInput>>,
  signal: AbortSignal,
): Promise<
  | { kind: 'mapped'; row: LoanRow; outcome: Extract<MapOutcome, { ok: true }>; accountNumber: string | null }
  | BoardOutcome
> {
  const { deps, store, clock, accountNumbers } = c;
  const { entities, documents } = input;
  const borrowerName = borrowerNameOf(entities);
  return store.db.unit(async () => {
    const resolver = deps.customers;
    let customers: CustomerResolution | undefined;
    if (resolver) customers = await resolver.resolve(row.id, entities, signal);
    const n = await accountNumbers.accountNumberFor(row, clock.now());
    const fetched = await transition(c, att, row.id, {
      to: 'fetched',
      row,
      detail: {
        businesses: entities.businesses.length,
        people: entities.people.length,
        documents: documents.length,
        ...(n !== null ? { accountNumber: n } : {}),
      },
      patch: {
        payloadHash: payloadHash(input),
        borrowerName,
        borrowerKey: borrowerName === null ? null : searchKey(borrowerName),
        ...(n !== null ? { accountNumber: n } : {}),
      },
    });
    const mappingInput: MappingInput = {
      ...input,
      identity: {
        ...mappingIdentity(n),
        ...(customers ? { customers: customers.customers } : {}),
      },
    };
    att.input = mappingInput;
    const outcome = await mapTraced(c.mapper, mappingInput);
    annotateActiveSpan({ 'mapping.version': outcome.mappingVersion });
    if (!outcome.ok) return quarantineMapping(c, att, fetched, outcome);
    const mapped = await recordMapped(c, att, fetched, outcome, customers?.reviews ?? []);
    return { kind: 'mapped' as const, row: mapped, outcome, accountNumber: n };
  });
}

type MapOutcome = Awaited<ReturnType<Mapper['map']>>;

async function quarantineMapping(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  outcome: Extract<MapOutcome, { ok: false }>,
): Promise<BoardOutcome> {
  const reason = quarantineReasonFor(outcome.issues);
  const message = redactForStorage(outcome.issues.map(formatIssue).join('; ')).slice(0, 4000);
  await transition(c, att, row.id, {
    to: 'quarantined',
    row,
    reason,
    detail: { mappingVersion: outcome.mappingVersion, issues: outcome.issues.slice(0, 20) },
    patch: {
      quarantineReason: reason,
      lastErrorCode: `mapping.${reason}`,
      lastErrorMessage: message,
      mappingVersion: outcome.mappingVersion,
      nextAttemptAt: null,
    },
  });
  c.deps.logger.warn(
    { loanId: row.id, reason, issues: outcome.issues.length, mappingVersion: outcome.mappingVersion },
    'loan quarantined: mapping failed',
  );
  return { kind: 'quarantined', loanId: row.id, reason, message };
}

/** `mapped`, with the review items (board with warnings) in the same transaction (issue 37). */
async function recordMapped(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  outcome: Extract<MapOutcome, { ok: true }>,
  customerReviews: CustomerResolution['reviews'],
): Promise<LoanRow> {
  const { deps, clock, loans } = c;
  const warnings = outcome.warnings ?? [];
  const reviewCount = warnings.length + customerReviews.length;
  if (reviewCount > 0) {
    // Boarded with review items: each kept in the loan's history (loans show, loans list
    // --warnings, /metrics, the reconciliation report's review section).
    const items = [
      ...warnings.slice(0, 50).map((w) => ({
        code: w.code,
        field: `${w.target}.${w.field}`,
        message: redactForStorage(w.message),
        at: `${w.file}:${w.line}:${w.column}`,
      })),
      ...customerReviews.slice(0, 50).map((r) => ({
        code: 'customer_name',
        field: `customer.${r.entityId}`,
        message: redactForStorage(r.message),
        at: 'customer match',
      })),
    ];
    await loans.recordEvent(
      row.id,
      {
        kind: 'warning',
        reason: `${reviewCount} review item(s)`,
        detail: { mappingVersion: outcome.mappingVersion, warnings: items },
      },
      clock.now(),
    );
    deps.logger.info(
      { loanId: row.id, warnings: reviewCount, mappingVersion: outcome.mappingVersion },
      'loan maps with review items',
    );
  }
  return transition(c, att, row.id, {
    to: 'mapped',
    row,
    detail: {
      mappingVersion: outcome.mappingVersion,
      records: outcome.records.length,
      ...(reviewCount > 0 ? { warnings: reviewCount } : {}),
    },
    patch: {
      mappingVersion: outcome.mappingVersion,
      coreWriteStartedAt: clock.now(),
      reviewItems: reviewCount,
    },
  });
}

/**
 * Before the core write (one transaction), the core write, then `written` with the ack key and the
 * customers' written mark in the transaction the core's own state (the file core's batch row)
 * opened, if any (issue 44 item 5): the write and its record commit together.
 */
async function mapAndWrite(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  item: Awaited<ReturnType<typeof storedItemOrLoan>>,
  input: Awaited<ReturnType<typeof fetchMappingInput>>,
  signal: AbortSignal,
): Promise<LoanRow | BoardOutcome> {
  const { deps, clock, store } = c;
  const before = await beforeCoreWrite(c, att, row, input, signal);
  if (before.kind !== 'mapped') return before;
  const { outcome, accountNumber } = before;
  const mapped = before.row;
  const resolver = deps.customers;
  assertMayCall(c, signal);
  return store.db.unit(async () => {
    const receipt = await coreWrite(
      c,
      boardingPackage({
        loanId: row.id,
        item,
        accountNumber,
        outcome,
        input,
        connectorVersion: deps.connectorVersion,
        fetchDocument: tracedFetch(deps.fetchDocument),
      }),
      signal,
    );
    // The acknowledgement's key is stored with the write it acknowledges: before its first call.
    return transition(c, att, row.id, {
      to: 'written',
      row: mapped,
      // The core's review items (e.g. a document it would refuse, left out) stay in the loan's history.
      detail: {
        coreReference: receipt.coreReference,
        records: receipt.records.length,
        documents: receipt.documents.length,
        ...(receipt.warnings?.length ? { coreWarnings: receipt.warnings } : {}),
      },
      patch: {
        coreReference: receipt.coreReference,
        writtenAt: clock.now(),
        writtenReleaseMarker: row.releaseMarker,
        lastErrorCode: null,
        lastErrorMessage: null,
        boardedRecords: storableRecords(outcome.records, input),
        // The core's own account number when it assigns one (Fineract accountNo, read back).
        ...(receipt.accountNumber ? { accountNumber: receipt.accountNumber } : {}),
      },
      also: async () => {
        await ensureAckKey(c, att, row);
        // The customers this loan claimed exist in the core now: later loans reference them.
        await resolver?.afterWrite(row.id, receipt);
      },
    });
  });
}

/** The mapping in a span of its own: the version and the outcome (board, with warnings, quarantine). */
function mapTraced(mapper: Mapper, input: MappingInput): ReturnType<Mapper['map']> {
  return inSpan('map loan', {}, async (span) => {
    const o = await mapper.map(input);
    setSpanAttributes(span, {
      'mapping.version': o.mappingVersion,
      'mapping.outcome': !o.ok
        ? 'quarantine'
        : (o.warnings?.length ?? 0) > 0
          ? 'board_with_warnings'
          : 'board',
      ...(o.ok ? { 'mapping.records': o.records.length } : { 'mapping.issues': o.issues.length }),
    });
    return o;
  });
}

/** The core port's call in a span (every adapter, the file core too); an HTTP core's requests are its children. */
function coreWrite(c: BoarderCtx, pkg: BoardingPackage, signal: AbortSignal): Promise<CoreReceipt> {
  return inSpan(
    'core write',
    { attributes: { 'core.records': pkg.records.length, 'core.documents': pkg.documents.length } },
    async (span) => {
      const r = await c.core.board(pkg, { signal });
      setSpanAttributes(span, { 'core.documents_written': r.documents.length });
      return r;
    },
  );
}

async function ensureAckKey(c: BoarderCtx, att: Attempt, row: LoanRow): Promise<void> {
  const { store, clock } = c;
  await store.keys.store(ackKey(row.id, row.releaseMarker ?? 'release'), 'ack', row.id, clock.now());
  att.ackKeyStored = true;
}

async function acknowledge(c: BoarderCtx, att: Attempt, row: LoanRow, signal: AbortSignal): Promise<LoanRow> {
  const { deps, store, clock } = c;
  const key = ackKey(row.id, row.releaseMarker ?? 'release');
  // Normally stored with the core write (this attempt's: nothing to read); a loan written by an
  // older version gets it here. Either way it exists before the first call and every retry,
  // across restarts, reuses it.
  if (!att.ackKeyStored) await keyBeforeCall(c, key, row.id);
  const body = ackBody(row);
  let sent: { response: unknown; alreadyBoarded: boolean; key: string; refused?: unknown };
  try {
    sent = { ...(await sendAck(c, row, body, key, signal)), key };
  } catch (err) {
    if (!isPlatformError(err) || !err.refusedUnderKey) throw err;
    // 422 under our ack key: the body is refused, or the key carried another body before (an ack
    // sent by a connector before issue 43, whose notes carried its version, or before a failover
    // lost its commit, with another mapping version in its notes). Once more under a key of this body's own: a boarded
    // loan answers 409 already boarded (accepted below), an unboarded one is boarded now, and a body
    // the platform really refuses is refused again and quarantines as before. Never two boards: the
    // platform boards a loan once whatever the key.
    const retryKey = ackKeyForBody(key, body);
    deps.logger.warn(
      { loanId: row.id, serverCode: err.serverCode },
      'acknowledgement refused under its key; sending it once under a key of its own body',
    );
    await keyBeforeCall(c, retryKey, row.id);
    sent = { ...(await sendAck(c, row, body, retryKey, signal)), key: retryKey, refused: err.toJSON() };
  }
  const { response, alreadyBoarded } = sent;
  const now = clock.now();
  return transition(c, att, row.id, {
    to: 'acknowledged',
    row,
    detail: { idempotencyKey: sent.key, ...(alreadyBoarded ? { alreadyBoarded: true } : {}) },
    patch: {
      acknowledgedAt: now,
      boardedAtIso: new Date(now).toISOString(),
      nextAttemptAt: null,
      lastErrorCode: null,
      lastErrorMessage: null,
      quarantineReason: null,
    },
    also: async () => {
      // The first key ends with the answer it got, so no key is left looking unfinished.
      if (sent.key !== key) await store.keys.complete(key, 422, sent.refused ?? null, now);
      await store.keys.complete(sent.key, alreadyBoarded ? 409 : 200, response ?? null, now);
    },
  });
}

/** Stores an ack key before its first call (read first: the common case, already stored, costs no commit). */
async function keyBeforeCall(c: BoarderCtx, key: string, loanId: string): Promise<void> {
  if ((await c.store.keys.get(key)) === null) await c.store.keys.ensure(key, 'ack', loanId, c.clock.now());
}

/** One acknowledgement call; a 409 "already boarded" is success (the loan is boarded, the core holds it). */
async function sendAck(
  c: BoarderCtx,
  row: LoanRow,
  body: Record<string, unknown>,
  key: string,
  signal: AbortSignal,
): Promise<{ response: unknown; alreadyBoarded: boolean }> {
  try {
    assertMayCall(c, signal);
    const response = await c.platform.acknowledgeBoarding(row.id, body, { idempotencyKey: key, signal });
    return { response, alreadyBoarded: false };
  } catch (err) {
    // (A platform that forgets idempotency keys answers a late replay of our own ack this way.)
    if (!isPlatformError(err) || !err.alreadyBoarded) throw err;
    c.deps.logger.warn(
      { loanId: row.id, serverCode: err.serverCode },
      'platform reports the loan already boarded; recording it as acknowledged',
    );
    return { response: err.toJSON(), alreadyBoarded: true };
  }
}

async function fail(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  f: Failure & { disposition: RetryDisposition },
  detail: unknown,
): Promise<BoardOutcome> {
  const { clock, settings, loans, random } = c;
  const { code, message, exhaustedReason, disposition } = f;
  const cur = await loans.require(row.id);
  const attempts = att.counted ? cur.attempts : att.n;
  const now = clock.now();
  const msg = redactForStorage(message).slice(0, 4000);
  if (attempts >= settings.maxAttempts) {
    await transition(c, att, row.id, {
      to: 'quarantined',
      reason: exhaustedReason,
      detail: { ...(detail as object), attempts, code },
      patch: {
        quarantineReason: exhaustedReason,
        lastErrorCode: code,
        lastErrorMessage: msg,
        nextAttemptAt: null,
      },
    });
    return { kind: 'quarantined', loanId: row.id, reason: exhaustedReason, message: msg };
  }
  const nextAttemptAt = now + retryDelayMs(attempts, settings, random);
  await transition(c, att, row.id, {
    to: 'retry_wait',
    reason: code,
    detail: {
      ...(detail as object),
      nextAttemptAt: new Date(nextAttemptAt).toISOString(),
      written: cur.writtenAt !== null,
    },
    patch: { nextAttemptAt, lastErrorCode: code, lastErrorMessage: msg },
  });
  return { kind: 'retry_wait', loanId: row.id, code, disposition, nextAttemptAt, message: msg };
}

async function quarantine(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  reason: QuarantineReason,
  code: string,
  message: string,
  detail: unknown,
): Promise<BoardOutcome> {
  const msg = redactForStorage(message).slice(0, 4000);
  await transition(c, att, row.id, {
    to: 'quarantined',
    reason,
    detail,
    patch: { quarantineReason: reason, lastErrorCode: code, lastErrorMessage: msg, nextAttemptAt: null },
  });
  return { kind: 'quarantined', loanId: row.id, reason, message: msg };
}

/** Each document's download (from the platform's presigned URL, never shown) in a span of its own. */
function tracedFetch(fetch: DocumentFetcher): DocumentFetcher {
  return (doc, sink, signal) =>
    inSpan('document download', { attributes: { 'document.id': doc.id } }, async (span) => {
      const r = await fetch(doc, sink, signal);
      setSpanAttributes(span, { 'document.bytes': r.bytes });
      return r;
    });
}

/** The loan span's outcome: what happened (kind) and why (disposition, reason or code). */
function noteOutcome(span: Span, o: BoardOutcome): void {
  const disposition =
    o.kind === 'retry_wait'
      ? o.disposition
      : o.kind === 'quarantined'
        ? o.reason
        : o.kind === 'fatal'
          ? o.error.code
          : o.kind === 'acknowledged'
            ? o.ackOnly
              ? 'ack-only'
              : 'boarded'
            : o.kind;
  setSpanAttributes(span, {
    'board.outcome': o.kind,
    'board.disposition': disposition,
    ...(o.kind === 'retry_wait' ? { 'board.error_code': o.code } : {}),
  });
}

/**
 * Boards one loan: one trace per board, linked to the cycle's (the span active when it is called).
 * `signal` aborts in-flight steps (shutdown); the persisted state is the checkpoint the next run
 * resumes from.
 */
function board(c: BoarderCtx, loanId: string, signal: AbortSignal): Promise<BoardOutcome> {
  return inSpan('board loan', { linkToActive: true, attributes: { 'loan.id': loanId } }, async (span) => {
    const outcome = await boardAttempt(c, loanId, signal);
    noteOutcome(span, outcome);
    return outcome;
  });
}

async function boardAttempt(c: BoarderCtx, loanId: string, signal: AbortSignal): Promise<BoardOutcome> {
  const { loans } = c;
  let row = await loans.get(loanId);
  if (!row || !WORKING.has(row.state))
    return { kind: 'not_eligible', loanId, state: row?.state ?? 'unknown' };
  // Ack-only only when the core write was made for this very release: a loan re-released since
  // (e.g. while skipped) must have its new release written, never just acknowledged.
  const att: Attempt = { n: row.attempts + 1, counted: false, ackOnly: writtenForCurrentRelease(row) };
  // The version last mapped with; a mapping in this attempt replaces it.
  if (row.mappingVersion !== null) annotateActiveSpan({ 'mapping.version': row.mappingVersion });
  if (att.ackOnly) annotateActiveSpan({ 'board.ack_only': true });
  let phase: 'core' | 'ack' = att.ackOnly ? 'ack' : 'core';
  try {
    if (!att.ackOnly) {
      const written = await writeToCore(c, att, row, signal);
      if ('kind' in written) return written;
      row = written;
    }
    const written = row;
    const imaging = c.deps.imaging;
    if (imaging) await inSpan('imaging export', {}, () => imaging.exportLoan(written, att.input, signal));
    phase = 'ack';
    await inSpan('acknowledge', {}, () => acknowledge(c, att, written, signal));
    return { kind: 'acknowledged', loanId, ackOnly: att.ackOnly };
  } catch (err) {
    return settleFailure(c, att, await loans.require(loanId), err, phase, signal);
  }
}

async function settleFailure(
  c: BoarderCtx,
  att: Attempt,
  row: LoanRow,
  err: unknown,
  phase: FailurePhase,
  signal: AbortSignal,
): Promise<BoardOutcome> {
  const { deps, clock, loans } = c;
  const log = deps.logger.child({ loanId: row.id, state: row.state, phase });
  const f = classifyFailure(err, phase);
  // This process no longer leads: nothing more may be written; the next leader resumes the loan.
  if (f.disposition === 'stepped-down') throw err;
  if (f.disposition === 'stale' || !WORKING.has(row.state)) {
    // An operator skipped or retried it meanwhile (or another process finished it): theirs now.
    log.info(
      { actual: row.state },
      'loan changed state while being boarded (operator or another process); leaving it',
    );
    return { kind: 'stale', loanId: row.id };
  }
  if (signal.aborted && !f.answerDespiteAbort) {
    await loans.recordEvent(
      row.id,
      { kind: 'attempt', reason: 'interrupted by shutdown', detail: { state: row.state, phase } },
      clock.now(),
    );
    return { kind: 'interrupted', loanId: row.id };
  }
  if (f.log !== null) log[f.log.level](f.log.fields, f.log.msg);
  if (f.event !== null)
    await loans.recordEvent(
      row.id,
      { kind: 'attempt', reason: f.event.reason, detail: f.event.detail },
      clock.now(),
    );
  switch (f.disposition) {
    case 'quarantine':
      return quarantine(c, att, row, f.reason ?? 'validation', f.code, f.message, f.detail);
    case 'fatal':
      return { kind: 'fatal', loanId: row.id, error: { code: f.code, message: f.message } };
    case 'stop-cycle':
      return { kind: 'traffic_stopped', loanId: row.id, message: f.message };
    case 'retry-later':
    case 'core-unavailable':
    case 'core-ambiguous':
      return fail(c, att, row, { ...f, disposition: f.disposition }, f.detail);
  }
}

/** Which side refused the connector in a fatal outcome (its code is `core.*` or a platform code). */
export function refusedBy(code: string): 'core' | 'platform' {
  return code.startsWith('core.') ? 'core' : 'platform';
}

/** The sentence for a fatal stop: who refused the connector, or (identity.*) which of our own limits stopped it. */
export function fatalSentence(code: string, message: string): string {
  if (code.startsWith('identity.')) return `boarding stopped (${code}): ${message}`;
  return `the ${refusedBy(code)} refused the connector (${code}): ${message}`;
}

/** The name the ops console searches by: the borrowing business, else the first person (null when none has a name). */
export function borrowerNameOf(entities: {
  businesses: ReadonlyArray<{ name?: string | null | undefined; role?: string | null | undefined }>;
  people: ReadonlyArray<{ firstName?: string | null | undefined; lastName?: string | null | undefined }>;
}): string | null {
  const business =
    entities.businesses.find((b) => b.role?.toLowerCase() === 'borrower' && b.name) ??
    entities.businesses.find((b) => b.name);
  if (business?.name) return business.name.trim().slice(0, 200) || null;
  const person = entities.people.find((p) => p.firstName || p.lastName);
  const name = person ? [person.firstName, person.lastName].filter(Boolean).join(' ').trim() : '';
  return name === '' ? null : name.slice(0, 200);
}
