/**
 * Entry of the inbox threads started by inbox-thread.ts (read that first). `workerData.role`:
 *
 * - `writer`: the inbox's only writer while the receiver runs. Commits groups of verified
 *   deliveries (synchronous=FULL: on disk before the main thread answers 2xx), gathering every
 *   group posted while the previous commit ran into one transaction; and runs processing passes
 *   (inbox-apply.ts) asked for by the processor, between commits, so the two never wait on each
 *   other's lock.
 * - `checkpointer`: copies the WAL back into the database every `everyMs` (PASSIVE: never waits
 *   for, never blocks, a writer), so no commit on any connection pays for a checkpoint.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { errorMessage } from '../lib/errors.js';
import { openDatabase } from '../store/db.js';
import { createInboxApplier, isTransientDbError, type InboxPass } from './inbox-apply.js';
import { createWebhookInbox, INBOX_INSERT_SQL, type InboxInsertParams } from './inbox.js';

export interface InboxWorkerData {
  role: 'writer' | 'checkpointer';
  dbPath: string;
  /** How long a lock held by another connection is waited for before a write fails. */
  busyTimeoutMs: number;
  /** checkpointer: the period. */
  everyMs?: number;
}

export type ToWriter =
  | { type: 'insert'; seq: number; rows: InboxInsertParams[] }
  | { type: 'pass'; id: number; limit: number; now: number }
  /** The checkpointer is gone: this connection checkpoints on its own again. */
  | { type: 'autocheckpoint'; pages: number }
  | { type: 'close' };

export type FromWriter =
  | { type: 'inserted'; seqs: number[]; ok: true; results: boolean[][] }
  | { type: 'inserted'; seqs: number[]; ok: false; error: string; code: string | undefined }
  | { type: 'passed'; id: number; ok: true; pass: InboxPass }
  | { type: 'passed'; id: number; ok: false; error: string; code: string | undefined };

const port = parentPort;
const WAL_RESTART_FRAMES = 2048;
const data = workerData as InboxWorkerData;

// SQLite's own busy handler sleeps 1, 2, 5, 10 ms… between tries; a lock held by another
// connection for a fraction of a millisecond is waited for here in 0.2 ms steps instead.
const nap = new Int32Array(new SharedArrayBuffer(4));
function withLockWait<T>(fn: () => T): T {
  const deadline = Date.now() + data.busyTimeoutMs;
  for (;;) {
    try {
      return fn();
    } catch (err) {
      if (!isTransientDbError(err) || Date.now() >= deadline) throw err;
      Atomics.wait(nap, 0, 0, 0.2);
    }
  }
}

const codeOf = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

/** Opened waiting for locks like any connection (migrations, journal mode), then without. */
function open(): ReturnType<typeof openDatabase> {
  const db = openDatabase(data.dbPath, { busyTimeoutMs: data.busyTimeoutMs });
  db.pragma('busy_timeout = 0');
  db.pragma('wal_autocheckpoint = 0');
  return db;
}

function runWriter(): void {
  const db = open();
  const insert = db.prepare<InboxInsertParams>(INBOX_INSERT_SQL);
  const commitGroups = db.transaction((groups: Array<{ rows: InboxInsertParams[] }>) =>
    groups.map((g) => g.rows.map((r) => insert.run(...r).changes === 1)),
  );
  const applier = createInboxApplier(db, createWebhookInbox(db));
  let closing = false;

  port?.on('message', (first: ToWriter) => {
    // Everything posted while the last commit ran: inserts first (in one transaction, one
    // fsync), then the passes asked for (they then see those rows too).
    const inserts: Array<Extract<ToWriter, { type: 'insert' }>> = [];
    const passes: Array<Extract<ToWriter, { type: 'pass' }>> = [];
    for (let m: ToWriter | undefined = first; m !== undefined; m = (receiveMessageOnPort(port) as { message: ToWriter } | undefined)?.message) {
      if (m.type === 'insert') inserts.push(m);
      else if (m.type === 'pass') passes.push(m);
      else if (m.type === 'autocheckpoint') db.pragma(`wal_autocheckpoint = ${m.pages}`);
      else closing = true;
    }
    if (inserts.length > 0) {
      const seqs = inserts.map((m) => m.seq);
      let reply: FromWriter;
      try {
        reply = { type: 'inserted', seqs, ok: true, results: withLockWait(() => commitGroups.immediate(inserts)) };
      } catch (err) {
        reply = { type: 'inserted', seqs, ok: false, error: errorMessage(err), code: codeOf(err) };
      }
      port.postMessage(reply);
    }
    for (const m of passes) {
      let reply: FromWriter;
      try {
        reply = { type: 'passed', id: m.id, ok: true, pass: withLockWait(() => applier.pass(m.limit, m.now)) };
      } catch (err) {
        reply = { type: 'passed', id: m.id, ok: false, error: errorMessage(err), code: codeOf(err) };
      }
      port?.postMessage(reply);
    }
    if (closing) {
      db.close();
      port?.close();
    }
  });
}

function runCheckpointer(): void {
  const db = open();
  // A PASSIVE pass copies what it can without taking any lock. Under a light stream of commits
  // that backfills the whole WAL and the next commit starts it from the beginning again. Under a
  // heavy one the WAL is never fully backfilled, so it only grows and every commit appends to an
  // ever longer file: past WAL_RESTART_FRAMES a RESTART, tried without waiting (busy_timeout 0),
  // finishes the few frames left while briefly holding the write lock, so the WAL restarts.
  const checkpoint = (): void => {
    try {
      const [passive] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
      if (passive && passive.log >= WAL_RESTART_FRAMES) db.pragma('wal_checkpoint(RESTART)');
    } catch (err) {
      if (!isTransientDbError(err)) port?.postMessage({ type: 'error', error: errorMessage(err) });
    }
  };
  const timer = setInterval(checkpoint, data.everyMs ?? 200);
  port?.on('message', (m: { type: string }) => {
    if (m.type !== 'close') return;
    clearInterval(timer);
    checkpoint();
    db.close();
    port.close();
  });
}

if (data.role === 'writer') runWriter();
else runCheckpointer();
