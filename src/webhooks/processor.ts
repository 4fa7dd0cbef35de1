import { EventEmitter } from 'node:events';
import type { Clock, Timer } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { StoreDb } from '../store/sql.js';
import { debounceTrigger, type DebouncedTrigger } from './debounce.js';
import type { WebhookInbox } from '../store/inbox.js';
import { createInboxApplier, type RowOutcome } from '../store/inbox-apply.js';

export interface WebhookProcessorDeps {
  db: StoreDb;
  inbox: WebhookInbox;
  logger: Logger;
  clock: Clock;
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
  /**
   * Runs a pass only where it may (with several replicas: on the leader, fenced: every replica
   * stores deliveries, the leader works them). Without it, every pass runs.
   */
  gate?: (pass: () => Promise<number>) => Promise<number>;
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

/**
 * Works the webhook inbox in event-time order, a pass at a time (the database work: inbox-apply.ts),
 * then reports each row: logs, `onFunded`, the debounced early cycle, the 'processed' event.
 */
export function createWebhookProcessor(deps: WebhookProcessorDeps): WebhookProcessor {
  const clock = deps.clock;
  const log = deps.logger;
  // Each pass is one synchronous transaction: 200 rows take a few milliseconds.
  const batchSize = deps.batchSize ?? 200;
  const kickDelayMs = deps.kickDelayMs ?? 20;
  const events = new EventEmitter();
  const applier = createInboxApplier(deps.db, deps.inbox);

  const requestCycle = earlyCycleTrigger(deps, log);
  const report = (outcomes: RowOutcome[]): void => {
    if (reportOutcomes(outcomes, { log, events, onFunded: deps.onFunded }))
      requestCycle?.('webhook:loan.funded');
  };

  let running: Promise<number> | null = null;
  let again = false;
  let stopped = false;
  let started = false;
  let kickTimer: Timer | null = null;

  async function loop(): Promise<number> {
    let total = 0;
    do {
      again = false;
      for (;;) {
        if (stopped) return total;
        const { rows, outcomes } = await applier.pass(batchSize, clock.now());
        if (rows === 0) break;
        report(outcomes);
        total += rows;
        // Caught up: what arrives from now on comes with its own kick (and its own batch).
        if (rows < batchSize) break;
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
    running = (deps.gate ? deps.gate(loop) : loop())
      .catch((err: unknown) => {
        log.warn({ err }, 'webhook: inbox pass interrupted; will retry');
        clock.timeout(1000, () => processor.kick());
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
      const backlog = (await deps.inbox.stats()).pending;
      if (backlog > 0)
        log.info({ pending: backlog }, 'webhook: processing deliveries left pending by a previous run');
      await drain();
    },
    kick() {
      // Deferred, not per delivery: rows stored within kickDelayMs are worked in one pass.
      if (stopped || !started || kickTimer !== null) return;
      kickTimer = clock.timeout(kickDelayMs, () => {
        kickTimer = null;
        void drain();
      });
    },
    drain,
    async stop() {
      stopped = true;
      kickTimer?.cancel();
      kickTimer = null;
      requestCycle?.cancel();
      if (running) await running;
    },
  };
  return processor;
}

/** A loan.funded asks for an early queue cycle, debounced: a burst of deliveries asks once. */
function earlyCycleTrigger(deps: WebhookProcessorDeps, log: Logger): DebouncedTrigger | undefined {
  if (!deps.requestCycle) return undefined;
  return debounceTrigger(
    deps.clock,
    (reasons) => {
      log.info({ reasons }, 'webhook: requesting an early queue cycle');
      try {
        deps.requestCycle?.(reasons.join(','));
      } catch (err) {
        log.error({ err }, 'webhook: early cycle request failed');
      }
    },
    deps.debounceMs,
  );
}

/** Logs each row's outcome, tells onFunded, emits 'processed'; true when a loan was funded. */
function reportOutcomes(
  outcomes: RowOutcome[],
  ctx: { log: Logger; events: EventEmitter; onFunded: WebhookProcessorDeps['onFunded'] },
): boolean {
  const { log, events } = ctx;
  let funded = false;
  for (const o of outcomes) {
    if (o.note?.kind === 'unknown_type') {
      log.warn(
        { webhookId: o.webhookId, eventType: o.eventType, keys: o.note.keys },
        'webhook: unknown event type, recorded and ignored',
      );
    } else if (o.note?.kind === 'no_loan_id') {
      log.warn(
        { webhookId: o.webhookId, eventType: o.eventType, dataKeys: o.note.keys },
        'webhook: no loan id found in the payload (unknown shape), recorded only',
      );
    }
    const event: ProcessedEvent = {
      webhookId: o.webhookId,
      eventType: o.eventType,
      loanId: o.loanId,
      outcome: o.outcome,
    };
    if (o.outcome === 'failed') {
      log.error(
        { err: o.error, webhookId: o.webhookId, eventType: o.eventType },
        'webhook: processing failed; row marked failed',
      );
      events.emit('processed', event);
      continue;
    }
    log.debug({ webhookId: o.webhookId, eventType: o.eventType, loanId: o.loanId }, 'webhook processed');
    if (o.eventType === 'loan.funded' && o.loanId !== null && o.fundedAt !== null) {
      funded = true;
      try {
        ctx.onFunded?.(o.loanId, o.fundedAt);
      } catch (err) {
        log.error({ err, loanId: o.loanId }, 'webhook: onFunded callback failed');
      }
    }
    events.emit('processed', event);
  }
  return funded;
}
