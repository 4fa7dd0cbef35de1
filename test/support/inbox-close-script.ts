/**
 * Run as its own process by a test: hands the inbox thread a delivery and closes it at once,
 * without waiting for the answer first. Prints "closed" only if close() waited for the commit
 * (nothing else holds the event loop here, unlike in vitest's own process).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../src/lib/logger.js';
import { openDatabase } from '../../src/store/db.js';
import { toWebhookEvent } from '../../src/webhooks/event.js';
import { createInboxApplier } from '../../src/webhooks/inbox-apply.js';
import { createThreadedInbox } from '../../src/webhooks/inbox-thread.js';
import { createInboxWriter } from '../../src/webhooks/inbox-writer.js';
import { createWebhookInbox } from '../../src/webhooks/inbox.js';

const dir = mkdtempSync(join(tmpdir(), 'inbox-close-'));
const path = join(dir, 'state.sqlite');
const db = openDatabase(path);
const inbox = createWebhookInbox(db);
const applier = createInboxApplier(db, inbox);
const t = createThreadedInbox({ dbPath: path, fallback: createInboxWriter(inbox), fallbackPass: (l, n) => applier.pass(l, n), mainDb: db, logger: silentLogger() });
const payload = { id: 'evt_c1', type: 'loan.funded', createdAt: '2026-11-01T10:00:00Z', data: { loanId: 'L1' } };
const event = toWebhookEvent(payload, { webhookIdHeader: 'msg_c1', signedTimestampMs: null, receivedAt: 1, rawBody: Buffer.from(JSON.stringify(payload)) });
const written = t.write(event, 1);
await t.close();
const inserted = await written;
const rows = (db.prepare('SELECT COUNT(*) AS n FROM webhook_inbox').get() as { n: number }).n;
db.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(`closed inserted=${inserted} rows=${rows}\n`);
