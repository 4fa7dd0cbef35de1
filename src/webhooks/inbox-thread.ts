import type { Logger } from '../lib/logger.js';
import { startModuleWorker } from '../lib/module-worker.js';
import type { WebhookEvent } from './event.js';
import type { InboxPass } from './inbox-apply.js';
import { inboxInsertParams, type InboxInsertParams } from './inbox.js';
import type { InboxWriter } from './inbox-writer.js';
import type { FromWriter, InboxWorkerData, ToWriter } from './inbox-worker.js';

/**
 * The webhook inbox's writes on a thread of their own (the `writer` of inbox-worker.ts).
 *
 * With synchronous=FULL every commit waits for the disk, and a WAL checkpoint copies pages back
 * into the database file; done on the main thread, both stall the event loop and every request in
 * flight waits (most of the receiver's CPU profile and all of its latency tail). And when the main
 * thread also processes the inbox, its transactions and the receiver's inserts queue on SQLite's
 * write lock. So while the receiver runs, the inbox has one writer, a worker thread with its own
 * connection to the state database: the main thread verifies and parses a delivery, posts its row,
 * and answers 2xx when the worker says the row is committed. Groups posted while a commit runs
 * go into the next one (one fsync for all of them). Processing passes (inbox-apply.ts) run on the
 * same thread between commits; the processor on the main thread reports their outcomes.
 *
 * A second worker checkpoints the WAL every `checkpointEveryMs` (PASSIVE). Connections that commit
 * (the writer's, and the main one while this runs) have automatic checkpoints off, so no commit
 * pays for one; `close()` turns the main connection's back on.
 *
 * Guarantees are those of the in-thread writer: a row is committed before its delivery is
 * answered; a failed commit rejects every delivery of its group (the receiver answers 503 and the
 * platform redelivers). If the writer thread dies, everything it had not answered is written again
 * on the main thread (`fallback`; INSERT OR IGNORE makes that safe whether or not the thread had
 * committed it) and so is everything after: slower, never lost.
 */
export interface ThreadedInbox extends InboxWriter {
  /** One processing pass on the writer thread (after its failure: `fallbackPass`, here). */
  runPass(limit: number, now: number): Promise<InboxPass>;
  /** Waits for what was posted, then stops both threads. */
  close(): Promise<void>;
}

export interface ThreadedInboxOptions {
  /** The state database file (not :memory:: a worker cannot share an in-memory database). */
  dbPath: string;
  busyTimeoutMs?: number;
  /** Used from the moment the writer thread fails. */
  fallback: InboxWriter;
  fallbackPass: (limit: number, now: number) => InboxPass;
  /** The main connection: its automatic checkpoints are off while the threads run. */
  mainDb?: { pragma(source: string, options?: { simple?: boolean }): unknown };
  logger: Logger;
  checkpointEveryMs?: number;
  /** The worker module (tests substitute one that fails); default inbox-worker. */
  workerUrl?: URL;
  /**
   * Called once the writer thread has failed and its work was taken over. Rows it committed
   * before dying are answered as duplicates when written again (so nothing kicks processing for
   * them), and a pass it committed without answering reported no outcomes: the caller processes
   * the inbox again and asks for an early cycle, which covers both.
   */
  onFallback?: () => void;
}

interface Pending {
  event: WebhookEvent;
  receivedAt: number;
  resolve: (inserted: boolean) => void;
  reject: (err: unknown) => void;
}

interface PendingPass {
  limit: number;
  now: number;
  resolve: (pass: InboxPass) => void;
  reject: (err: unknown) => void;
}

export class InboxWriteError extends Error {
  override readonly name = 'InboxWriteError';
  readonly code: string | undefined;
  constructor(message: string, code?: string) {
    super(message);
    this.code = code;
  }
}

const CLOSE_GRACE_MS = 5000;
const MAX_GROUPS_IN_FLIGHT = 2;

const WORKER = new URL(import.meta.url.endsWith('.ts') ? './inbox-worker.ts' : './inbox-worker.js', import.meta.url);

export function createThreadedInbox(opts: ThreadedInboxOptions): ThreadedInbox {
  const log = opts.logger;
  const common = { dbPath: opts.dbPath, busyTimeoutMs: opts.busyTimeoutMs ?? 5000 };

  let queue: Pending[] = [];
  let scheduled = false;
  const inFlight = new Map<number, Pending[]>();
  const passes = new Map<number, PendingPass>();
  let seq = 0;
  let failed = false;
  let closing = false;
  let drained: (() => void) | null = null;

  const start = (data: InboxWorkerData) => {
    const w = startModuleWorker(opts.workerUrl ?? WORKER, { workerData: data });
    // Neither thread keeps the process alive on its own: the HTTP server does while it listens.
    w.unref();
    return w;
  };
  const writer = start({ role: 'writer', ...common });
  const checkpointer = start({ role: 'checkpointer', ...common, everyMs: opts.checkpointEveryMs ?? 50 });
  const exited = [writer, checkpointer].map((w) => new Promise<void>((r) => w.once('exit', () => r())));

  // The main connection's commits must not checkpoint either (the checkpointer does it).
  const mainAutocheckpoint = opts.mainDb ? (opts.mainDb.pragma('wal_autocheckpoint', { simple: true }) as number) : null;
  opts.mainDb?.pragma('wal_autocheckpoint = 0');
  let mainRestored = false;
  const restoreMain = (): void => {
    if (mainRestored || mainAutocheckpoint === null || !opts.mainDb) return;
    mainRestored = true;
    try {
      opts.mainDb.pragma(`wal_autocheckpoint = ${mainAutocheckpoint}`);
    } catch {
      // The main connection is already closed: nothing to restore.
    }
  };

  const settleIfDrained = (): void => {
    if (drained && inFlight.size === 0 && passes.size === 0 && queue.length === 0) drained();
  };

  const runPassHere = (p: PendingPass): void => {
    try {
      p.resolve(opts.fallbackPass(p.limit, p.now));
    } catch (err) {
      p.reject(err);
    }
  };

  /** From now on everything is done on the main thread, including what the thread had not answered. */
  const fallBack = (why: string, err?: unknown): void => {
    if (failed) return;
    failed = true;
    restoreMain();
    if (!closing) log.error({ err, reason: why }, 'webhook inbox thread failed; writing and processing deliveries on the main thread from now on');
    const orphans = [...[...inFlight.values()].flat(), ...queue];
    const orphanPasses = [...passes.values()];
    inFlight.clear();
    passes.clear();
    queue = [];
    const rewrites = orphans.map((p) => opts.fallback.write(p.event, p.receivedAt).then(p.resolve, p.reject));
    for (const p of orphanPasses) runPassHere(p);
    void checkpointer.terminate();
    settleIfDrained();
    if (opts.onFallback && (orphans.length > 0 || orphanPasses.length > 0)) {
      const notify = opts.onFallback;
      void Promise.allSettled(rewrites).then(() => {
        try {
          notify();
        } catch (e) {
          log.error({ err: e }, 'webhook inbox thread: onFallback failed');
        }
      });
    }
  };

  const post = (m: ToWriter): void => writer.postMessage(m);

  // At most MAX_GROUPS_IN_FLIGHT groups posted and not yet answered: one being committed, the
  // next waiting, so the thread always has its next transaction at hand. What arrives meanwhile
  // stays here and goes as one group when an answer comes back: one message per commit instead
  // of one per turn of the event loop (each costs a copy and a wake-up on both threads).
  const send = (): void => {
    scheduled = false;
    if (failed || queue.length === 0 || inFlight.size >= MAX_GROUPS_IN_FLIGHT) return;
    const group = queue;
    queue = [];
    seq += 1;
    inFlight.set(seq, group);
    post({ type: 'insert', seq, rows: group.map((p): InboxInsertParams => inboxInsertParams(p.event, p.receivedAt)) });
  };

  writer.on('message', (m: FromWriter) => {
    if (m.type === 'passed') {
      const p = passes.get(m.id);
      if (!p) return;
      passes.delete(m.id);
      if (m.ok) p.resolve(m.pass);
      else p.reject(new InboxWriteError(m.error, m.code));
    } else {
      m.seqs.forEach((s, gi) => {
        const group = inFlight.get(s);
        if (!group) return;
        inFlight.delete(s);
        if (m.ok) {
          const results = m.results[gi] ?? [];
          group.forEach((p, i) => p.resolve(results[i] ?? false));
        } else {
          const err = new InboxWriteError(m.error, m.code);
          for (const p of group) p.reject(err);
        }
      });
      if (!scheduled) send();
    }
    settleIfDrained();
  });
  writer.on('error', (err) => fallBack('error', err));
  // A reply that cannot be read leaves its deliveries unanswered: treat it as a failed thread.
  writer.on('messageerror', (err) => {
    fallBack('unreadable reply', err);
    void writer.terminate();
  });
  writer.on('exit', (code) => {
    if (!closing || inFlight.size > 0 || passes.size > 0 || queue.length > 0) fallBack(`exited with code ${code}`);
  });
  checkpointer.on('message', (m: { type: string; error?: string }) => {
    if (m.type === 'error') log.warn({ error: m.error }, 'WAL checkpoint failed; will try again');
  });
  // Without the checkpointer the WAL would only grow: both connections checkpoint on their own again.
  let checkpointerGone = false;
  const checkpointerFailed = (why: string, err?: unknown): void => {
    if (checkpointerGone || closing || failed) return;
    checkpointerGone = true;
    log.warn({ err, reason: why }, 'WAL checkpoint thread failed; automatic checkpoints are back on');
    restoreMain();
    post({ type: 'autocheckpoint', pages: mainAutocheckpoint ?? 1000 });
  };
  checkpointer.on('error', (err) => checkpointerFailed('error', err));
  checkpointer.on('exit', (code) => checkpointerFailed(`exited with code ${code}`));

  return {
    write(event, receivedAt) {
      if (failed || closing) return opts.fallback.write(event, receivedAt);
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ event, receivedAt, resolve, reject });
        // Next turn of the event loop, so deliveries parsed in this turn go in one message.
        if (!scheduled) {
          scheduled = true;
          setImmediate(send);
        }
      });
    },
    runPass(limit, now) {
      return new Promise<InboxPass>((resolve, reject) => {
        const p: PendingPass = { limit, now, resolve, reject };
        if (failed || closing) {
          runPassHere(p);
          return;
        }
        seq += 1;
        passes.set(seq, p);
        post({ type: 'pass', id: seq, limit, now });
      });
    },
    async close() {
      if (closing) return;
      closing = true;
      // Held while closing: the threads are unref'd, and once the HTTP server is closed nothing
      // else may keep the process alive until the last answers are in and the threads have exited.
      writer.ref();
      checkpointer.ref();
      if (!failed && (inFlight.size > 0 || passes.size > 0 || queue.length > 0)) {
        await new Promise<void>((resolve) => {
          drained = resolve;
          if (!scheduled) send();
        });
      }
      drained = null;
      if (!failed) post({ type: 'close' });
      else void writer.terminate();
      checkpointer.postMessage({ type: 'close' });
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = await Promise.race([
        Promise.all(exited).then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), CLOSE_GRACE_MS))),
      ]);
      clearTimeout(timer);
      if (gaveUp) {
        log.warn({ graceMs: CLOSE_GRACE_MS }, 'webhook inbox threads did not stop in time; terminating them');
        await Promise.all([writer.terminate(), checkpointer.terminate()]);
      }
      restoreMain();
    },
  };
}
