/**
 * Run as its own process by a test: starts the webhook service on a file database, takes one
 * delivery, stops, and prints "stopped" only if stop() resolved. Nothing else holds the event
 * loop here (vitest's own process would), so a stop that leaves the loop empty before it is done
 * shows as a missing "stopped".
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { openDatabase } from '../../src/store/sqlite/db.js';
import { startWebhookService } from './webhook-service.js';

const dir = mkdtempSync(join(tmpdir(), 'service-stop-'));
const db = openDatabase(join(dir, 'state.sqlite'));
const secret = `whsec_${Buffer.from('service-stop-secret-32-bytes-xx!').toString('base64')}`;
const svc = await startWebhookService({ db, dir, secret });
const body = JSON.stringify({
  id: 'evt_1',
  type: 'loan.funded',
  createdAt: '2026-11-01T10:00:00Z',
  data: { loanId: 'L1' },
});
const at = new Date();
const res = await fetch(`${svc.url()}/webhooks/platform`, {
  method: 'POST',
  headers: {
    'content-type': 'application/json',
    'webhook-id': 'msg_1',
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign('msg_1', at, body),
  },
  body,
});
process.stdout.write(`delivery ${res.status}\n`);
await svc.stop();
const rows = (db.prepare('SELECT COUNT(*) AS n FROM webhook_inbox').get() as { n: number }).n;
db.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(`stopped rows=${rows}\n`);
