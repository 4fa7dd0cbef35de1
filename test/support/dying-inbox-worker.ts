/**
 * Stands in for src/webhooks/inbox-worker.ts in tests: the checkpointer role is the real one; the
 * writer commits the first insert group it is given, then dies (exit 1) without answering: a
 * writer thread that crashed after its commit, before its reply.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from '../../src/store/db.js';
import { INBOX_INSERT_SQL, type InboxInsertParams } from '../../src/webhooks/inbox.js';
import type { InboxWorkerData, ToWriter } from '../../src/webhooks/inbox-worker.js';

const data = workerData as InboxWorkerData;
if (data.role === 'checkpointer') {
  await import('../../src/webhooks/inbox-worker.js');
} else {
  const db = openDatabase(data.dbPath);
  const insert = db.prepare<InboxInsertParams>(INBOX_INSERT_SQL);
  parentPort?.on('message', (m: ToWriter) => {
    // Dies with the group in hand, committed: the answer is what is lost.
    if (m.type === 'insert') db.transaction(() => m.rows.forEach((r) => insert.run(...r)))();
    process.exit(1);
  });
}
