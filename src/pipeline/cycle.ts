import { errorMessage } from '../lib/errors.js';
import { linkSignals } from '../lib/signals.js';
import { inSpan, setSpanAttributes } from '../lib/tracing.js';
import { isPlatformError, type PlatformError } from '../platform/errors.js';
import { QUEUE_CHECKPOINT } from '../store/checkpoints.js';
import { holderParts, type Leadership } from '../store/leadership/leadership.js';
import { LOAN_STATES, type LoanState, type QuarantineReason } from '../store/loan-states.js';
import type { DueCursor } from '../store/loans.js';
import { createLoanBoarder, type BoardOutcome, type LoanBoarderDeps } from './board-loan.js';
import { classifyFailure, dispositionOf } from './failures.js';
import { recordInvalidItem, recordQueueItem, type IntakeObserver, type StillListedKind } from './intake.js';

export interface CycleDeps extends LoanBoarderDeps {
  pageSize: number;
  concurrency: number;
  /**
   * Who boards: only the leader (store/leadership/leadership.ts). A cycle runs only while this process leads,
   * every write it makes is fenced by the term it started in, and the term's end aborts its calls.
   */
  leadership: Leadership;
  /**
   * This many core writes in a row that found the core unavailable (timeouts, 5xx, refused
   * connections), with no successful board between them, stop the pass: the core is down, and
   * every further loan would spend platform reads only to wait for a retry. Default 3.
   */
  coreOutageAfter?: number;
}

export const BOARDING_LEASE = 'boarding';

export interface CycleOptions {
  /** Why this cycle runs (schedule, startup, webhook, sync): logged with its summary. */
  reason: string;
  /** Aborted: stop walking and stop taking loans; steps in flight continue. */
  stop?: AbortSignal;
  /** Aborted: steps in flight are aborted too (their persisted state is where they resume). */
  abort?: AbortSignal;
  /**
   * After a pass, loans this cycle put in retry_wait whose next attempt falls within this many ms
   * are waited for and retried in the same cycle (`sync --once`, so a short blip does not leave
   * loans for a run that may never come). 0: leave them to the next cycle (the daemon).
   */
  settleMs?: number;
  /** Where the cycle is: for a progress line (`sync --once` on a terminal). */
  onProgress?: (p: CycleProgress) => void;
}

export type CycleProgress =
  /** The queue walk: pages and items read so far. */
  | { phase: 'walk'; pages: number; items: number }
  /** A boarding pass: loans finished of those due (pass 2 and later retry loans a short failure put in retry_wait). */
  | { phase: 'board'; done: number; total: number; pass: number }
  /** Waiting until `until` to retry `loans` loans in retry_wait within the same cycle (settleMs). */
  | { phase: 'settle'; until: number; loans: number };

export interface CycleSummary {
  reason: string;
  startedAt: string;
  durationMs: number;
  walk: {
    pages: number;
    items: number;
    newLoans: number;
    reReleased: number;
    invalid: number;
    /**
     * Acknowledged loans the queue still lists (never boarded again). A platform lagging behind
     * clears within a cycle or two; a loan that stays listed needs ops (docs/operations.md).
     */
    stillListedAfterAck: number;
    /** Of those: the listed loan's fields differ from what was boarded, or its item is malformed. */
    stillListedChanged: number;
    resumed: boolean;
    complete: boolean;
    error: string | null;
  };
  attempted: number;
  acknowledged: number;
  /** Of those acknowledged: the core already held them, only the acknowledgement was (re)sent. */
  ackOnly: number;
  retryWait: number;
  quarantined: Partial<Record<QuarantineReason, number>>;
  interrupted: number;
  stale: number;
  passes: number;
  /** Set when writes were stopped after rate-limit strikes (an alert was logged). */
  trafficStopped: boolean;
  /** A fatal platform error (auth): the cycle stopped; `sync --once` exits 1. */
  fatal: { code: string; message: string } | null;
  /**
   * The core was unavailable for `boarding` writes in a row (coreOutageAfter): the pass stopped and
   * the loans not yet tried wait for the next cycle; `sync --once` exits 5.
   */
  coreOutage: { failures: number; message: string } | null;
  /** Another process leads (holds the boarding lease): this cycle did nothing. */
  busy: { pid: number | null; host: string | null; holder: string; epoch: number } | null;
  /** This process stopped leading mid-cycle (it stalled, or lost the database): the cycle stopped early. */
  leaseLost: boolean;
  /** Loans per state after the cycle. */
  states: Record<LoanState, number>;
  /** Loans this cycle quarantined or put in retry_wait, with why (first 100). */
  problems: Array<{ loanId: string; state: 'quarantined' | 'retry_wait'; code: string; message: string }>;
}

const MAX_PROBLEMS = 100;
const OUTAGE_ALERT_EVERY_MS = 60_000;
/** A loan still listed after its acknowledgement is warned about at most once per this long (per process). */
const STILL_LISTED_WARN_EVERY_MS = 6 * 60 * 60 * 1000;
const STILL_LISTED_LOG_IDS = 10;

export class CycleAlreadyRunningError extends Error {
  override readonly name = 'CycleAlreadyRunningError';
}

/** A checkpointed cursor the platform refuses (a 4xx no retry changes): classified by the error, once. */
function isRefusedCursor(err: unknown): err is PlatformError {
  return isPlatformError(err) && dispositionOf(err) === 'quarantine';
}

/** A cycle's summary before it has done anything. */
function emptySummary(
  reason: string,
  started: number,
  states: CycleSummary['states'],
  busy: CycleSummary['busy'],
): CycleSummary {
  return {
    reason,
    startedAt: new Date(started).toISOString(),
    durationMs: 0,
    walk: {
      pages: 0,
      items: 0,
      newLoans: 0,
      reReleased: 0,
      invalid: 0,
      stillListedAfterAck: 0,
      stillListedChanged: 0,
      resumed: false,
      complete: false,
      error: null,
    },
    attempted: 0,
    acknowledged: 0,
    ackOnly: 0,
    retryWait: 0,
    quarantined: {},
    interrupted: 0,
    stale: 0,
    passes: 0,
    trafficStopped: false,
    fatal: null,
    coreOutage: null,
    busy,
    leaseLost: false,
    states,
    problems: [],
  };
}

/** What a runner's steps work with, and what it remembers between cycles. */
function cycleContext(deps: CycleDeps) {
  const boarder = createLoanBoarder({ ...deps, mayCall: () => deps.leadership.checkTrust() });
  const { store, platform, clock, logger } = deps;
  const inFlight = new Set<string>();
  /** What the runner remembers between cycles (mutable; one per runner). */
  const state = {
    running: false,
    /** Core writes in a row (across cycles) that found the core unavailable; a board resets it. */
    coreFailuresInARow: 0,
    /**
     * When the outage ALERT was last logged: once a minute while it lasts (a pass per drain tick would log
     * one each).
     */
    outageAlertAt: null as number | null,
    /**
     * The loan counts taken at the end of the last cycle (issue 37: counting is an index scan that
     * grows with the state, 36 ms at 100,000 loans; each cycle counts once, at its end, and a cycle
     * that does nothing carries the last counts along). null before the first count of this runner.
     */
    lastStates: null as CycleSummary['states'] | null,
    /** The leadership term whose first cycle finished the loans left in flight (see `lead`). */
    resumedEpoch: null as number | null,
  };
  const { leadership } = deps;
  const stillListedWarnedAt = new Map<string, number>();
  const coreOutageAfter = deps.coreOutageAfter ?? 3;

  /** Due loans are read in pages of this many ids (memory flat in the size of the backlog). */
  const DUE_PAGE = 200;
  return {
    deps,
    boarder,
    store,
    platform,
    clock,
    logger,
    inFlight,
    state,
    leadership,
    stillListedWarnedAt,
    coreOutageAfter,
    DUE_PAGE,
  };
}
type CycleCtx = ReturnType<typeof cycleContext>;

async function countStates(c: CycleCtx): Promise<CycleSummary['states']> {
  c.state.lastStates = await c.store.loans.countByState();
  return c.state.lastStates;
}

/**
 * One drain of the boarding queue: walk it in cursor mode to its end (checkpointing after each
 * page, resuming an interrupted walk), then board every loan that is due — new, interrupted by a
 * crash, written but not acknowledged, or in retry_wait whose time has come — with bounded
 * concurrency. The platform client's rate budget paces the calls; concurrency only bounds how many
 * loans are open at once.
 */
export function createCycleRunner(deps: CycleDeps) {
  const c = cycleContext(deps);
  return {
    run: (opts: CycleOptions) => run(c, opts),
    inFlight: c.inFlight,
    isRunning: () => c.state.running,
    nextDueAt: () => c.store.loans.nextDueAt(),
  };
}

/** Counts acknowledged loans still listed; collects them for one warning per cycle. */
function stillListedObserver(
  c: CycleCtx,
  summary: CycleSummary,
  seen: Map<string, StillListedKind>,
): IntakeObserver {
  return {
    stillListedAfterAck(loanId, kind) {
      if (seen.has(loanId)) return;
      seen.set(loanId, kind);
      summary.walk.stillListedAfterAck += 1;
      if (kind !== 'same') summary.walk.stillListedChanged += 1;
    },
  };
}

/** One warning per cycle, naming only loans not warned about within STILL_LISTED_WARN_EVERY_MS. */
function warnStillListed(
  c: CycleCtx,
  summary: CycleSummary,
  seen: ReadonlyMap<string, StillListedKind>,
): void {
  const { clock, logger, stillListedWarnedAt } = c;
  const now = clock.now();
  // A loan no longer listed (after a complete walk) is forgotten: if it comes back, it is news.
  for (const [id, at] of stillListedWarnedAt) {
    if (at <= now - STILL_LISTED_WARN_EVERY_MS || (summary.walk.complete && !seen.has(id)))
      stillListedWarnedAt.delete(id);
  }
  const fresh = [...seen].filter(([id]) => !stillListedWarnedAt.has(id));
  if (fresh.length === 0) return;
  for (const [id] of fresh) stillListedWarnedAt.set(id, now);
  const pick = (k: StillListedKind): string[] =>
    fresh
      .filter(([, kind]) => kind === k)
      .map(([id]) => id)
      .slice(0, STILL_LISTED_LOG_IDS);
  logger.warn(
    {
      stillListedAfterAck: summary.walk.stillListedAfterAck,
      stillListedChanged: summary.walk.stillListedChanged,
      newlyListed: fresh.length,
      sameItem: pick('same'),
      changedItem: pick('changed'),
      invalidItem: pick('invalid'),
    },
    'acknowledged loans still listed in the boarding queue; not boarded again (a changed or ' +
      'malformed item may be a re-release the connector cannot tell apart: ' +
      'see docs/operations.md, "Still listed after acknowledgement")',
  );
}

async function walk(
  c: CycleCtx,
  summary: CycleSummary,
  stop: AbortSignal,
  progress: (p: CycleProgress) => void,
): Promise<void> {
  const { deps, store, platform, clock, logger, inFlight } = c;
  const checkpoint = await store.checkpoints.get(QUEUE_CHECKPOINT);
  let cursor = checkpoint?.cursor ?? null;
  summary.walk.resumed = cursor !== null;
  if (!checkpoint) await store.checkpoints.save(QUEUE_CHECKPOINT, null, clock.now());
  else if (cursor !== null)
    logger.info(
      { startedAt: new Date(checkpoint.startedAt).toISOString() },
      'resuming an interrupted queue walk from its checkpoint',
    );
  let restarted = false;
  const stillListed = new Map<string, StillListedKind>();
  const observer = stillListedObserver(c, summary, stillListed);
  try {
    await walkPages();
  } finally {
    warnStillListed(c, summary, stillListed);
  }

  async function walkPages(): Promise<void> {
    for (;;) {
      try {
        for await (const page of platform.boardingQueue({ cursor, limit: deps.pageSize, signal: stop })) {
          const now = clock.now();
          // The page's loans and the cursor after it are saved together: a crash re-reads at most one page.
          await store.write(async () => {
            for (const item of page.items) {
              const r = await recordQueueItem(store.loans, item, now, logger, inFlight, observer);
              if (r === 'new') summary.walk.newLoans += 1;
              if (r === 're-released') summary.walk.reReleased += 1;
            }
            for (const bad of page.invalid) {
              await recordInvalidItem(store.loans, bad, now, logger, observer);
            }
            if (page.nextCursor !== null)
              await store.checkpoints.save(QUEUE_CHECKPOINT, page.nextCursor, now);
          });
          summary.walk.pages += 1;
          summary.walk.items += page.items.length;
          summary.walk.invalid += page.invalid.length;
          progress({ phase: 'walk', pages: summary.walk.pages, items: summary.walk.items });
          if (stop.aborted) return;
        }
        await store.checkpoints.clear(QUEUE_CHECKPOINT);
        summary.walk.complete = true;
        return;
      } catch (err) {
        // Only the platform can fail a walk fatally (its auth): that stops the cycle.
        if (isPlatformError(err) && dispositionOf(err) === 'fatal') throw err;
        if (stop.aborted) return;
        if (cursor !== null && !restarted && isRefusedCursor(err)) {
          // A checkpointed cursor can expire (days of downtime): start the walk over; nothing is lost
          // because every loan seen is in SQLite and the queue lists only unacknowledged loans.
          logger.warn(
            { code: err.code, status: err.status },
            'checkpointed queue cursor refused; walking the queue from the start',
          );
          cursor = null;
          restarted = true;
          await store.checkpoints.save(QUEUE_CHECKPOINT, null, clock.now());
          continue;
        }
        summary.walk.error = errorMessage(err);
        logger.warn(
          { err: summary.walk.error, pages: summary.walk.pages },
          'queue walk failed; boarding the loans already known, the walk resumes next cycle',
        );
        return;
      }
    }
  }
}

function noteCoreFailure(c: CycleCtx, summary: CycleSummary, message: string): void {
  const { clock, logger, state, coreOutageAfter } = c;
  state.coreFailuresInARow += 1;
  if (state.coreFailuresInARow < coreOutageAfter || summary.coreOutage !== null) return;
  summary.coreOutage = { failures: state.coreFailuresInARow, message: message.slice(0, 500) };
  const now = clock.now();
  if (state.outageAlertAt !== null && now - state.outageAlertAt < OUTAGE_ALERT_EVERY_MS) {
    logger.warn(
      { failures: state.coreFailuresInARow, err: summary.coreOutage.message },
      'core still unavailable; this pass stopped',
    );
    return;
  }
  state.outageAlertAt = now;
  logger.error(
    { alert: 'core.outage', failures: state.coreFailuresInARow, err: summary.coreOutage.message },
    `ALERT: the core was unavailable for ${state.coreFailuresInARow} ` +
      `loans in a row; this pass stopped, the loans wait for the next cycle`,
  );
}

function tally(c: CycleCtx, summary: CycleSummary, o: BoardOutcome): void {
  const { logger, state } = c;
  switch (o.kind) {
    case 'acknowledged':
      if (state.outageAlertAt !== null)
        logger.info(
          { alert: 'core.outage', resolved: true },
          'the core takes writes again: boarding resumed',
        );
      state.coreFailuresInARow = 0;
      state.outageAlertAt = null;
      summary.acknowledged += 1;
      if (o.ackOnly) summary.ackOnly += 1;
      break;
    case 'retry_wait': {
      summary.retryWait += 1;
      // The message the loan's row got (the outcome carries it: no read back per loan).
      // A loan that found the core unreachable (its write, or the customer search before it).
      if (o.disposition === 'core-unavailable' || o.disposition === 'core-ambiguous')
        noteCoreFailure(c, summary, o.message || o.code);
      if (summary.problems.length < MAX_PROBLEMS) {
        summary.problems.push({ loanId: o.loanId, state: 'retry_wait', code: o.code, message: o.message });
      }
      break;
    }
    case 'quarantined':
      summary.quarantined[o.reason] = (summary.quarantined[o.reason] ?? 0) + 1;
      if (summary.problems.length < MAX_PROBLEMS) {
        summary.problems.push({
          loanId: o.loanId,
          state: 'quarantined',
          code: o.reason,
          message: o.message,
        });
      }
      break;
    case 'interrupted':
      summary.interrupted += 1;
      break;
    case 'stale':
      summary.stale += 1;
      break;
    case 'traffic_stopped':
      summary.trafficStopped = true;
      break;
    case 'fatal':
      summary.fatal = { code: o.error.code, message: o.error.message };
      break;
    case 'not_eligible':
      break;
  }
}

/**
 * The first cycle of a leadership term first finishes the loans a board started and did not
 * finish (a leader killed mid-board, a process that crashed), before it walks the queue: they are
 * known, and a takeover's first acknowledgement need not wait for the walk (issue 44: failover
 * ≤ 10 s). At most a few per process that stopped (boarding.concurrency each); every other loan
 * is boarded after the walk as always.
 */
async function resumeInFlight(
  c: CycleCtx,
  summary: CycleSummary,
  stop: AbortSignal,
  abort: AbortSignal,
  retrying: Set<string>,
  progress: (p: CycleProgress) => void,
): Promise<void> {
  const { state, leadership, store, deps, logger } = c;
  const epoch = leadership.term?.epoch ?? null;
  if (epoch === null || state.resumedEpoch === epoch) return;
  state.resumedEpoch = epoch;
  const ids = await store.loans.inFlightIds(Math.max(1, deps.concurrency) * IN_FLIGHT_PER_WORKER);
  if (ids.length === 0) return;
  logger.info({ loans: ids.length, epoch }, 'finishing the loans left in flight before the queue walk');
  summary.passes += 1;
  await boardPass(c, summary, stop, abort, retrying, progress, ids);
}

/** How many in-flight loans per worker a term's first cycle finishes before its walk. */
const IN_FLIGHT_PER_WORKER = 4;

async function boardPass(
  c: CycleCtx,
  summary: CycleSummary,
  stop: AbortSignal,
  abort: AbortSignal,
  retrying: Set<string>,
  progress: (p: CycleProgress) => void,
  /** Board these loans only (the ones left in flight), not the due queue. */
  only?: readonly string[],
): Promise<void> {
  const { deps, boarder, store, clock, inFlight, DUE_PAGE } = c;
  // Due as of the start of the pass (a loan this pass puts in retry_wait waits for the next one),
  // walked in keyset pages; one page is read at a time (the other workers wait for it), so
  // workers never read a page twice.
  const passNow = clock.now();
  let page: string[] = only === undefined ? [] : [...only];
  let at = 0;
  let cursor: DueCursor | null = null;
  let exhausted = only !== undefined;
  let loading: Promise<void> | null = null;
  const loadPage = async (): Promise<void> => {
    const next = await store.loans.duePage(passNow, cursor, DUE_PAGE);
    page = next.ids;
    at = 0;
    cursor = next.next;
    if (next.ids.length < DUE_PAGE) exhausted = true;
  };
  const nextDue = async (): Promise<string | undefined> => {
    for (;;) {
      while (at < page.length) {
        const id = page[at++] as string;
        if (!inFlight.has(id)) return id;
      }
      if (exhausted) return undefined;
      loading ??= loadPage().finally(() => {
        loading = null;
      });
      await loading;
    }
  };
  // The progress line's total: counted, not read (a count stays flat in the backlog's size).
  const total = only?.length ?? (await store.loans.dueCount(passNow));
  let done = 0;
  if (total > 0) progress({ phase: 'board', done, total, pass: summary.passes });
  const halted = (): boolean =>
    stop.aborted || summary.fatal !== null || summary.trafficStopped || summary.coreOutage !== null;
  const worker = async (): Promise<void> => {
    while (!halted()) {
      const id = await nextDue();
      if (id === undefined) return;
      inFlight.add(id);
      summary.attempted += 1;
      // A signal per loan: the HTTP and file layers hang listeners on it, and they go away with
      // the loan instead of piling up on one process-long signal.
      const loanAbort = new AbortController();
      const relay = (): void => loanAbort.abort(abort.reason);
      if (abort.aborted) relay();
      else abort.addEventListener('abort', relay, { once: true });
      try {
        const outcome = await boarder.board(id, loanAbort.signal);
        tally(c, summary, outcome);
        // Settled loans (boarded, quarantined) are never retried within the cycle: not remembered.
        if (outcome.kind !== 'acknowledged' && outcome.kind !== 'quarantined') retrying.add(id);
      } finally {
        abort.removeEventListener('abort', relay);
        inFlight.delete(id);
        done += 1;
        progress({ phase: 'board', done, total: Math.max(total, done), pass: summary.passes });
      }
    }
  };
  const results = await Promise.allSettled(Array.from({ length: Math.max(1, deps.concurrency) }, worker));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

/**
 * Earliest retry of a loan this cycle attempted and left unsettled (retry_wait…), if it falls
 * within the settle horizon, and how many are waiting. Boarded and quarantined loans are not
 * remembered: the cycle's memory stays flat in the size of the backlog.
 */
async function settleTarget(
  c: CycleCtx,
  retrying: ReadonlySet<string>,
  horizon: number,
): Promise<{ at: number; loans: number } | null> {
  const { store } = c;
  let best: number | null = null;
  let loans = 0;
  for (const id of retrying) {
    const row = await store.loans.get(id);
    if (row?.state !== 'retry_wait' || row.nextAttemptAt === null) continue;
    if (row.nextAttemptAt > horizon) continue;
    loans += 1;
    if (best === null || row.nextAttemptAt < best) best = row.nextAttemptAt;
  }
  return best === null ? null : { at: best, loans };
}

async function run(c: CycleCtx, opts: CycleOptions): Promise<CycleSummary> {
  const { clock, logger, state, leadership } = c;
  if (state.running) throw new CycleAlreadyRunningError('a boarding cycle is already running');
  state.running = true;
  const started = clock.now();
  // Everything before the cycle starts resets `running` if the database fails (it went away
  // mid-run): otherwise every later cycle would refuse as "already running" until a restart.
  let states: CycleSummary['states'];
  let busy: CycleSummary['busy'] = null;
  try {
    // One try when not leading (`sync --once`, a standby whose poll has not come yet); the
    // daemon's leadership loop renews and takes over on its own.
    if (leadership.term === null) await leadership.tick();
    if (leadership.term === null) {
      const row = await leadership.read();
      const holder = row?.holder ?? 'unknown';
      const { host, pid } = holderParts(holder);
      busy = { host, pid, holder, epoch: row?.epoch ?? 0 };
    }
    // Counted once per cycle: here when this cycle does nothing (another process leads), otherwise
    // once the cycle is over (finally, below); meanwhile the summary carries the last cycle's counts.
    states =
      busy !== null || leadership.signal === null
        ? await countStates(c)
        : (state.lastStates ??
          (Object.fromEntries(LOAN_STATES.map((st) => [st, 0])) as CycleSummary['states']));
  } catch (err) {
    state.running = false;
    throw err;
  }
  const summary = emptySummary(opts.reason, started, states, busy);
  const termSignal = leadership.signal;
  if (busy !== null || termSignal === null) {
    state.running = false;
    logger.debug(
      { leader: busy },
      'another connector process leads (holds the boarding lease); this cycle does nothing',
    );
    return summary;
  }
  // A trace per cycle that boards (a standby's empty ticks make none); each loan's board is a trace
  // of its own, linked to this one.
  return inSpan(
    'boarding cycle',
    {
      root: true,
      attributes: { 'cycle.reason': opts.reason, 'leadership.epoch': leadership.term?.epoch ?? 0 },
    },
    async (span) => {
      const s = await lead(c, opts, summary, termSignal, started);
      setSpanAttributes(span, {
        'cycle.walk.items': s.walk.items,
        'cycle.walk.complete': s.walk.complete,
        'cycle.attempted': s.attempted,
        'cycle.acknowledged': s.acknowledged,
        'cycle.retry_wait': s.retryWait,
        'cycle.quarantined': Object.values(s.quarantined).reduce((a, n) => a + n, 0),
        'cycle.lease_lost': s.leaseLost,
        ...(s.fatal ? { 'cycle.fatal': s.fatal.code } : {}),
        ...(s.coreOutage ? { 'cycle.core_outage': true } : {}),
        ...(s.trafficStopped ? { 'cycle.traffic_stopped': true } : {}),
      });
      return s;
    },
  );
}

/** The cycle of a process that leads: walk, board passes, settle; fenced by the term it started in. */
async function lead(
  c: CycleCtx,
  opts: CycleOptions,
  summary: CycleSummary,
  termSignal: AbortSignal,
  started: number,
): Promise<CycleSummary> {
  const { store, platform, clock, logger, state, leadership } = c;
  // The term's end (trust deadline, a takeover seen at renew, a fenced-out write) stops this
  // cycle: no new loans, and steps in flight are aborted, so two processes never board side by
  // side; whatever a stale step still tries to write is fenced out (0 rows).
  const onLost = (): void => {
    summary.leaseLost = true;
    logger.error(
      { epoch: leadership.acquisitions },
      'this process stopped leading mid-cycle (stalled past its lease, or lost the database): stopping this cycle',
    );
  };
  termSignal.addEventListener('abort', onLost, { once: true });
  const stopLink = linkSignals([opts.stop, termSignal]);
  const abortLink = linkSignals([opts.abort, termSignal]);
  const stop = stopLink.signal;
  const abort = abortLink.signal;
  try {
    return await leadership.guard(store.db, async () => {
      const retrying = new Set<string>();
      const progress = (p: CycleProgress): void => {
        try {
          opts.onProgress?.(p);
        } catch (err) {
          logger.debug({ err: errorMessage(err) }, 'cycle progress listener failed');
        }
      };
      await resumeInFlight(c, summary, stop, abort, retrying, progress);
      try {
        await walk(c, summary, stop, progress);
      } catch (err) {
        const f = classifyFailure(err);
        if (!isPlatformError(err) || f.disposition !== 'fatal') {
          if (termSignal.aborted) return summary;
          throw err;
        }
        summary.fatal = { code: f.code, message: f.message };
      }
      if (summary.fatal === null && platform.health().trafficStopped) {
        summary.trafficStopped = true;
      }
      while (
        summary.fatal === null &&
        !summary.trafficStopped &&
        summary.coreOutage === null &&
        !stop.aborted
      ) {
        summary.passes += 1;
        await boardPass(c, summary, stop, abort, retrying, progress);
        const settleMs = opts.settleMs ?? 0;
        if (
          settleMs <= 0 ||
          summary.fatal !== null ||
          summary.trafficStopped ||
          summary.coreOutage !== null ||
          stop.aborted
        )
          break;
        const target = await settleTarget(c, retrying, clock.now() + settleMs);
        if (target === null) break;
        progress({ phase: 'settle', until: target.at, loans: target.loans });
        try {
          await clock.sleep(Math.max(0, target.at - clock.now()), stop);
        } catch {
          break;
        }
      }
      if (summary.trafficStopped) {
        logger.error(
          { alert: 'rate_limit.traffic_stopped', health: { strikes24h: platform.health().strikes24h } },
          'ALERT: all platform requests are stopped after 2 rate-limit strikes in 24 h (a third ' +
            'revokes the key); boarding waits until the strike ledger ' +
            'ages out or an operator clears it (platform strikes clear)',
        );
      }
      return summary;
    });
  } catch (err) {
    // A write refused by the fence (the lease moved on) ends the cycle as a lost lease: nothing
    // was written, every loan resumes from its persisted state under the next leader.
    if (dispositionOf(err) === 'stepped-down' || termSignal.aborted) {
      summary.leaseLost = true;
      return summary;
    }
    throw err;
  } finally {
    termSignal.removeEventListener('abort', onLost);
    stopLink.done();
    abortLink.done();
    state.running = false;
    summary.durationMs = clock.now() - started;
    try {
      summary.states = await countStates(c);
      // Keep the latest word on each loan, and only if it still stands (a settled retry succeeded).
      const latest = new Map(summary.problems.map((p) => [p.loanId, p]));
      const standing: CycleSummary['problems'] = [];
      for (const p of latest.values())
        if ((await store.loans.get(p.loanId))?.state === p.state) standing.push(p);
      summary.problems = standing;
    } catch (err) {
      logger.warn({ err: errorMessage(err) }, 'could not read the loan counts after the cycle');
    }
  }
}

export type CycleRunner = ReturnType<typeof createCycleRunner>;
