/**
 * Stands in for src/webhooks/inbox-worker.ts in tests: the writer role is the real one; the
 * checkpointer exits at once (exit 1), as a checkpointer thread that crashed would.
 */
import { workerData } from 'node:worker_threads';
import type { InboxWorkerData } from '../../src/webhooks/inbox-worker.js';

if ((workerData as InboxWorkerData).role === 'writer') await import('../../src/webhooks/inbox-worker.js');
else process.exit(1);
