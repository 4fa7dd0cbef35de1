import { EventEmitter } from 'node:events';
import type { Clock } from '../lib/clock.js';
import { systemClock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { Db } from '../store/db.js';
import { debounceTrigger, type DebouncedTrigger } from './debounce.js';
import { extractFundedAt } from './event.js';
import type { InboxRow, WebhookInbox } from './inbox.js';
import { WEBHOOK_EVENTS } from '../platform/schemas.js';

export interface WebhookProcessorDeps {
  db: Db;
  inbox: WebhookInbox;
  logger: Logger;
  clock?: Clock;
  /** Called after a loan.funded row is committed (the daemon may look at that loan first). */
  onFunded?: (loanId: string, fundedAt: number) => void;
  /** Asks the daemon for an early queue cycle (e.g. `daemon.triggerCycle`); debounced here. */
  requestCycle?: (reason: string) => void;
  /** `webhooks.debounceMs`: bursts of loan.funded collapse into one early cycle. */
  debounceMs: number;
  /** Rows per transaction (default 200). */
  batchSize?: number;
  /**
   * How long after a kick() the inbox is worked (default 20 ms): deliveries arriving meanwhile are
   * processed together, in a few transactions instead of one per delivery (fewer commits, so the
   * receiver keeps the CPU under load). Far below any early-cycle debounce.
   */
  kickDelayMs?: number;
}

export interface ProcessedEvent {
  webhookId: string;
  eventType: string;
  loanId: string | null;
  outcome: 'processed' | 'failed';
}

export interface WebhookProcessor {
  /** Processes rows left pending by a previous run, then keeps going as kick() is called. */
  start(): Promise<void>;
  /** A row was inserted: process soon (never inline with the HTTP answer). */
  kick(): void;
  /** Processes until nothing is pending; resolves with how many rows it handled. */
  drain(): Promise<number>;
  /** Stops accepting kicks and waits for the current batch; cancels a pending early cycle. */
  stop(): Promise<void>;
  /** 'processed' (ProcessedEvent) after each row; 'idle' when the inbox has nothing pending. */
  readonly events: EventEmitter;
}

const DOCUMENTED = new Set<string>(WEBHOOK_EVENTS);

/**
 * Works the webhook inbox in event-time order. Each row's effects and its "processed" mark commit
 * in one transaction, so a crash mid-way leaves the row pending and it is redone on start; the
 * effects are idempotent (the funded time keeps the earliest value).
 */
export function createWebhookProcessor(deps: WebhookProcessorDeps): WebhookProcessor {
  const clock = deps.clock ?? systemClock;
  const log = deps.logger;
  // Each batch is one synchronous transaction and the HTTP server waits while it runs: 200 rows
  // take a few milliseconds, well inside the receiver's latency budget.
  const batchSize = deps.batchSize ?? 200;
  const kickDelayMs = deps.kickDelayMs ?? 20;
  const events = new EventEmitter();
  const { db, inbox } = deps;

  // The loans row may not exist yet (a loan is funded before a banker releases it; the pipeline
  // creates rows from the queue): only fill in an existing row here, keeping the earliest time.
  // Loans without a row get their funded time from the inbox (inbox.fundedAt / fundedLoans).
  const setFundedAt = db.prepare(
    `UPDATE loans SET funded_at_iso = ?, updated_at = ?
     WHERE id = ? AND (funded_at_iso IS NULL OR funded_at_iso > ?)`,
  );
  const addLoanEvent = db.prepare(
    "INSERT INTO loan_events (loan_id, at, kind, actor, reason, detail) VALUES (?, ?, 'webhook', 'platform', ?, ?)",
  );

  const requestCycle: DebouncedTrigger | undefined = deps.requestCycle
    ? debounceTrigger((reasons) => {
        log.info({ reasons }, 'webhook: requesting an early queue cycle');
        try {
          deps.requestCycle?.(reasons.join(','));
        } catch (err) {
          log.error({ err }, 'webhook: early cycle request failed');
        }
      }, deps.debounceMs)
    : undefined;

  const applyRowEffects = (row: InboxRow, now: number): { fundedAt: number | null } => {
    let fundedAt: number | null = null;
    if (row.eventType === 'loan.funded' && row.loanId !== null) {
      fundedAt = extractFundedAt({ payload: row.payload, occurredAt: row.occurredAt ?? row.receivedAt });
      const iso = new Date(fundedAt).toISOString();
      setFundedAt.run(iso, now, row.loanId, iso);
    }
    if (row.loanId !== null && DOCUMENTED.has(row.eventType)) {
      const detail: Record<string, unknown> = { webhookId: row.webhookId, occurredAt: row.occurredAt };
      if (fundedAt !== null) detail['fundedAt'] = new Date(fundedAt).toISOString();
      const data = row.payload['data'];
      if (row.eventType === 'loan.status_changed' && data !== null && typeof data === 'object') {
        const d = data as Record<string, unknown>;
        for (const k of ['status', 'previousStatus', 'from', 'to']) if (typeof d[k] === 'string') detail[k] = d[k];
      }
      addLoanEvent.run(row.loanId, row.occurredAt ?? row.receivedAt, row.eventType, JSON.stringify(detail));
    }
    inbox.markProcessed(row.webhookId, now);
    return { fundedAt };
  };
  const applyRow = db.transaction(applyRowEffects);

  /** Logs what the payload lacks (the real platform's payload is not documented). */
  function inspect(row: InboxRow): void {
    if (!DOCUMENTED.has(row.eventType)) {
      log.warn({ webhookId: row.webhookId, eventType: row.eventType, keys: Object.keys(row.payload).slice(0, 20) }, 'webhook: unknown event type, recorded and ignored');
    } else if (row.loanId === null) {
      const data = row.payload['data'];
      log.warn(
        { webhookId: row.webhookId, eventType: row.eventType, dataKeys: data && typeof data === 'object' ? Object.keys(data).slice(0, 20) : typeof data },
        'webhook: no loan id found in the payload (unknown shape), recorded only',
      );
    }
  }

  type RowOutcome = { row: InboxRow; fundedAt: number | null; error: string | null };
  const isTransient = (message: string): boolean => /SQLITE_BUSY|SQLITE_LOCKED|database is locked/i.test(message);

  // One transaction per batch. First without savepoints (the common case: every row applies);
  // if a row fails for a reason other than contention the whole attempt rolls back and the batch
  // is redone with each row in its own savepoint, so one bad row cannot sink the rest.
  const applyAll = db.transaction((rows: InboxRow[], now: number): RowOutcome[] =>
    rows.map((row) => ({ row, fundedAt: applyRowEffects(row, now).fundedAt, error: null })),
  );
  const applyEach = db.transaction((rows: InboxRow[], now: number): RowOutcome[] =>
    rows.map((row) => {
      try {
        return { row, fundedAt: applyRow(row, now).fundedAt, error: null };
      } catch (err) {
        const message = errorMessage(err);
        // Transient: roll the whole batch back; its rows stay pending for the next pass.
        if (isTransient(message)) throw err;
        inbox.markFailed(row.webhookId, now, message);
        return { row, fundedAt: null, error: message };
      }
    }),
  );
  const applyBatch = (rows: InboxRow[], now: number): RowOutcome[] => {
    try {
      return applyAll(rows, now);
    } catch (err) {
      if (isTransient(errorMessage(err))) throw err;
      return applyEach(rows, now);
    }
  };

  /**
   * Processing commits skip the fsync (synchronous=NORMAL for that transaction only): if power is
   * lost before the next durable commit, the rows are simply pending again and redone (effects are
   * idempotent). The 2xx-critical inbox inserts keep the database's own setting (FULL).
   */
  function withoutFsync<T>(fn: () => T): T {
    if (db.inTransaction) return fn();
    const previous = db.pragma('synchronous', { simple: true }) as number;
    db.pragma('synchronous = NORMAL');
    try {
      return fn();
    } finally {
      db.pragma(`synchronous = ${previous}`);
    }
  }

  function processBatch(rows: InboxRow[]): void {
    for (const row of rows) inspect(row);
    const outcomes = withoutFsync(() => applyBatch(rows, clock.now()));
    let funded = false;
    for (const { row, fundedAt, error } of outcomes) {
      if (error !== null) {
        log.error({ err: error, webhookId: row.webhookId, eventType: row.eventType }, 'webhook: processing failed; row marked failed');
        events.emit('processed', { webhookId: row.webhookId, eventType: row.eventType, loanId: row.loanId, outcome: 'failed' } satisfies ProcessedEvent);
        continue;
      }
      log.debug({ webhookId: row.webhookId, eventType: row.eventType, loanId: row.loanId }, 'webhook processed');
      if (row.eventType === 'loan.funded' && row.loanId !== null && fundedAt !== null) {
        funded = true;
        try {
          deps.onFunded?.(row.loanId, fundedAt);
        } catch (err) {
          log.error({ err, loanId: row.loanId }, 'webhook: onFunded callback failed');
        }
      }
      events.emit('processed', { webhookId: row.webhookId, eventType: row.eventType, loanId: row.loanId, outcome: 'processed' } satisfies ProcessedEvent);
    }
    if (funded) requestCycle?.('webhook:loan.funded');
  }

  let running: Promise<number> | null = null;
  let again = false;
  let stopped = false;
  let started = false;
  let kickTimer: NodeJS.Timeout | null = null;

  async function loop(): Promise<number> {
    let total = 0;
    do {
      again = false;
      for (;;) {
        if (stopped) return total;
        const rows = inbox.pending(batchSize);
        if (rows.length === 0) break;
        processBatch(rows);
        total += rows.length;
        // Caught up: what arrives from now on comes with its own kick (and its own batch).
        if (rows.length < batchSize) break;
        // Yield between batches so a backlog never starves the HTTP server.
        await new Promise<void>((r) => setImmediate(r));
      }
    } while (again && !stopped);
    events.emit('idle');
    return total;
  }

  function drain(): Promise<number> {
    if (running) {
      again = true;
      return running;
    }
    running = loop()
      .catch((err: unknown) => {
        log.warn({ err }, 'webhook: inbox pass interrupted; will retry');
        setTimeout(() => processor.kick(), 1000).unref();
        return 0;
      })
      .finally(() => {
        running = null;
      });
    return running;
  }

  const processor: WebhookProcessor = {
    events,
    async start() {
      started = true;
      stopped = false;
      const backlog = inbox.stats().pending;
      if (backlog > 0) log.info({ pending: backlog }, 'webhook: processing deliveries left pending by a previous run');
      await drain();
    },
    kick() {
      // Deferred, not per delivery: rows stored within kickDelayMs are worked in one pass.
      if (stopped || !started || kickTimer !== null) return;
      kickTimer = setTimeout(() => {
        kickTimer = null;
        void drain();
      }, kickDelayMs);
    },
    drain,
    async stop() {
      stopped = true;
      if (kickTimer !== null) clearTimeout(kickTimer);
      kickTimer = null;
      requestCycle?.cancel();
      if (running) await running;
    },
  };
  return processor;
}
