import { createHmac, randomBytes } from 'node:crypto';
import { systemClock } from '../../../src/lib/clock.js';
import { connect } from 'node:net';
import fc from 'fast-check';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from '../../../src/lib/logger.js';
import { openDatabase, type Db } from '../../../src/store/sqlite/db.js';
import { createApp, WEBHOOK_PATH } from '../../../src/http/app.js';
import { createWebhookInbox, type WebhookInbox } from '../../../src/store/inbox.js';
import { createConnectorMetrics } from '../../../src/observability/metrics.js';
import { createWebhookProcessor, type WebhookProcessor } from '../../../src/webhooks/processor.js';
import { dbWritableCheck, type ReadinessCheck } from '../../../src/observability/readiness.js';
import { startHttpServer, type RunningServer } from '../../../src/http/server.js';
import { sqliteStore } from '../../../src/store/sqlite/store.js';

const secretOld = `whsec_${randomBytes(24).toString('base64')}`;
const secretNew = `whsec_${randomBytes(24).toString('base64')}`;

interface Receiver {
  url: string;
  db: Db;
  inbox: WebhookInbox;
  processor: WebhookProcessor;
  metricsText(): Promise<string>;
  logs: string[];
  dir: string;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startReceiver(
  opts: {
    secrets?: string[];
    readiness?: Record<string, ReadinessCheck>;
    maxBodyBytes?: number;
    scheme?: 'standard' | 'stripe' | 'hmac-sha256-hex';
    expressOnly?: boolean;
  } = {},
): Promise<Receiver> {
  const dir = mkdtempSync(join(tmpdir(), 'webhooks-'));
  const db = openDatabase(join(dir, 'state.sqlite'));
  const inbox = createWebhookInbox(sqliteStore(db));
  const logs: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (s: string) => void logs.push(s) } });
  const processor = createWebhookProcessor({
    clock: systemClock,
    db: sqliteStore(db),
    inbox,
    logger: silentLogger(),
    debounceMs: 0,
  });
  await processor.start();
  const metrics = createConnectorMetrics({
    clock: systemClock,
    db: sqliteStore(db),
    inbox,
    processMetrics: false,
  });
  const app = createApp({
    clock: systemClock,
    config: {
      scheme: opts.scheme ?? 'standard',
      secrets: opts.secrets ?? [secretNew],
      toleranceSeconds: 300,
      maxBodyBytes: opts.maxBodyBytes ?? 262_144,
    },
    inbox,
    logger,
    metrics,
    processor,
    readiness: opts.readiness ?? { database: dbWritableCheck(sqliteStore(db)) },
    reportsDir: join(dir, 'reports'),
  });
  // expressOnly: the app served by a bare node:http server, without startHttpServer's limits.
  const server: RunningServer = opts.expressOnly
    ? await serveBare(app)
    : await startHttpServer(app, '127.0.0.1', 0);
  cleanups.push(async () => {
    await server.close(100);
    await processor.stop();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { url: server.url, db, inbox, processor, metricsText: () => metrics.render(), logs, dir };
}

async function serveBare(app: RequestListener): Promise<RunningServer> {
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function signed(
  payload: unknown,
  opts: { id?: string; secret?: string; at?: Date } = {},
): { headers: Record<string, string>; body: string } {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const id = opts.id ?? `msg_${randomBytes(8).toString('hex')}`;
  const at = opts.at ?? new Date();
  const signature = new Webhook(opts.secret ?? secretNew).sign(id, at, body);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signature,
    },
  };
}

async function post(
  url: string,
  d: { headers: Record<string, string>; body: string },
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}${WEBHOOK_PATH}`, { method: 'POST', headers: d.headers, body: d.body });
  return { status: res.status, text: await res.text() };
}

function funded(loanId: string): Record<string, unknown> {
  return { id: `evt_${loanId}`, type: 'loan.funded', createdAt: new Date().toISOString(), data: { loanId } };
}

function metricValue(text: string, name: string, labels: string): number {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{${labels}}`) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('webhook receiver (real server, Standard Webhooks signed by the standardwebhooks package)', () => {
  it('accepts a signed delivery, stores it, and processes it asynchronously', async () => {
    const r = await startReceiver();
    const processed = new Promise((resolve) => r.processor.events.once('processed', resolve));
    const d = signed(funded('L1'), { id: 'msg_accept' });
    expect(await post(r.url, d)).toEqual({ status: 200, text: '{"received":true}' });
    expect(await processed).toMatchObject({
      webhookId: 'msg_accept',
      eventType: 'loan.funded',
      loanId: 'L1',
      outcome: 'processed',
    });
    expect(await r.inbox.get('msg_accept')).toMatchObject({
      status: 'processed',
      loanId: 'L1',
      eventType: 'loan.funded',
    });
    expect(
      metricValue(
        await r.metricsText(),
        'boarding_webhooks_received_total',
        'outcome="accepted",event_type="loan.funded"',
      ),
    ).toBe(1);
  });

  it('20 concurrent duplicates of one delivery are all acknowledged and processed once', async () => {
    const r = await startReceiver();
    const processedIds: string[] = [];
    r.processor.events.on('processed', (e: { webhookId: string }) => processedIds.push(e.webhookId));
    // A loan the connector knows, so processing writes to its history (once).
    r.db.prepare("INSERT INTO loans (id, state, created_at, updated_at) VALUES ('L2', 'queued', 1, 1)").run();
    const d = signed(funded('L2'), { id: 'msg_dup' });
    const results = await Promise.all(Array.from({ length: 20 }, () => post(r.url, d)));
    expect(results.map((x) => x.status)).toEqual(Array(20).fill(200));
    await r.processor.drain();
    // A late redelivery after processing is a no-op too.
    expect((await post(r.url, d)).status).toBe(200);
    await r.processor.drain();
    expect(processedIds).toEqual(['msg_dup']);
    expect(
      r.db.prepare("SELECT COUNT(*) AS n FROM webhook_inbox WHERE webhook_id = 'msg_dup'").get(),
    ).toEqual({ n: 1 });
    expect(r.db.prepare("SELECT COUNT(*) AS n FROM loan_events WHERE loan_id = 'L2'").get()).toEqual({
      n: 1,
    });
    const text = await r.metricsText();
    expect(
      metricValue(text, 'boarding_webhooks_received_total', 'outcome="accepted",event_type="loan.funded"'),
    ).toBe(1);
    expect(
      metricValue(text, 'boarding_webhooks_received_total', 'outcome="duplicate",event_type="loan.funded"'),
    ).toBe(20);
  });

  it('rotation: deliveries signed with either configured secret are accepted', async () => {
    const r = await startReceiver({ secrets: [secretOld, secretNew] });
    expect((await post(r.url, signed(funded('L3'), { secret: secretOld }))).status).toBe(200);
    expect((await post(r.url, signed(funded('L4'), { secret: secretNew }))).status).toBe(200);
    expect((await r.inbox.stats()).pending + (await r.inbox.stats()).processed).toBe(2);
  });

  it('stripe preset: deliveries are deduplicated by the payload id', async () => {
    const r = await startReceiver({ scheme: 'stripe', secrets: ['whsec_stripe_like'] });
    const body = JSON.stringify({ id: 'evt_stripe_1', type: 'loan.funded', data: { loan: { id: 'S1' } } });
    const t = Math.floor(Date.now() / 1000);
    const v1 = createHmac('sha256', 'whsec_stripe_like').update(`${t}.${body}`).digest('hex');
    const d = {
      headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${v1}` },
      body,
    };
    expect((await post(r.url, d)).status).toBe(200);
    expect((await post(r.url, d)).status).toBe(200);
    expect(
      (await post(r.url, { ...d, headers: { ...d.headers, 'webhook-signature': 'v1,ignored' } })).status,
    ).toBe(200);
    await r.processor.drain();
    expect(await r.inbox.get('evt:evt_stripe_1')).toMatchObject({ status: 'processed', loanId: 'S1' });
    expect(r.db.prepare('SELECT COUNT(*) AS n FROM webhook_inbox').get()).toEqual({ n: 1 });
    // A Standard Webhooks delivery is not accepted under the stripe scheme (never auto-detected).
    expect((await post(r.url, signed(funded('S2')))).status).toBe(400);
  });

  describe('bad input: status, nothing stored or processed, counted by reason, reason not echoed', () => {
    const cases: Array<{
      name: string;
      reason: string;
      status: number;
      make: () => { headers: Record<string, string>; body: string };
    }> = [
      {
        name: 'missing headers',
        reason: 'missing_headers',
        status: 400,
        make: () => {
          const d = signed(funded('B1'));
          const { 'webhook-signature': _s, ...headers } = d.headers;
          return { headers, body: d.body };
        },
      },
      {
        name: 'bad signature (other secret)',
        reason: 'bad_signature',
        status: 401,
        make: () => signed(funded('B2'), { secret: secretOld }),
      },
      {
        name: 'tampered body',
        reason: 'bad_signature',
        status: 401,
        make: () => {
          const d = signed(funded('B3'));
          return { headers: d.headers, body: d.body.replace('B3', 'B4') };
        },
      },
      {
        name: 'timestamp too old',
        reason: 'timestamp_out_of_tolerance',
        status: 401,
        make: () => signed(funded('B5'), { at: new Date(Date.now() - 10 * 60_000) }),
      },
      {
        name: 'timestamp in the future',
        reason: 'timestamp_out_of_tolerance',
        status: 401,
        make: () => signed(funded('B6'), { at: new Date(Date.now() + 10 * 60_000) }),
      },
      {
        name: 'non-JSON body (validly signed)',
        reason: 'invalid_json',
        status: 400,
        make: () => signed('loan funded: B7'),
      },
      {
        name: 'JSON that is not an object',
        reason: 'invalid_payload',
        status: 400,
        make: () => signed('[1,2,3]'),
      },
      {
        name: 'oversize body (validly signed)',
        reason: 'too_large',
        status: 413,
        make: () => signed({ ...funded('B8'), pad: 'x'.repeat(4096) }),
      },
    ];
    it.each(cases)('$name → $status', async ({ reason, status, make }) => {
      const r = await startReceiver({ maxBodyBytes: 2048 });
      const res = await post(r.url, make());
      expect(res.status).toBe(status);
      expect(res.text).not.toContain(reason);
      await r.processor.drain();
      expect(r.db.prepare('SELECT COUNT(*) AS n FROM webhook_inbox').get()).toEqual({ n: 0 });
      expect(r.db.prepare('SELECT COUNT(*) AS n FROM loan_events').get()).toEqual({ n: 0 });
      expect(
        metricValue(await r.metricsText(), 'boarding_webhooks_rejected_total', `reason="${reason}"`),
      ).toBe(1);
      expect(r.logs.join('')).toContain(`"reason":"${reason}"`);
      // Nothing went wrong inside the server while refusing.
      expect(r.logs.join('')).not.toContain('http handler failed');
    });

    it('a chunked oversize body (no content-length) is cut off at the limit with 413', async () => {
      const r = await startReceiver({ maxBodyBytes: 2048 });
      const d = signed({ ...funded('B9'), pad: 'y'.repeat(8192) });
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(d.body));
          controller.close();
        },
      });
      const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: d.headers,
        body: stream,
        duplex: 'half',
      });
      expect(res.status).toBe(413);
      expect((await r.inbox.stats()).pending).toBe(0);
    });
  });

  describe.each([
    { path: 'startHttpServer', expressOnly: false },
    { path: 'createApp on a bare node:http server', expressOnly: true },
  ])('$path', ({ expressOnly }) => {
    it('stores a signed delivery, refuses oversize and bad signatures, and counts them', async () => {
      const r = await startReceiver({ expressOnly, maxBodyBytes: 2048 });
      const ok = await post(r.url, signed(funded('X1'), { id: 'msg_x1' }));
      expect(ok).toEqual({ status: 200, text: '{"received":true}' });
      expect((await post(r.url, signed({ ...funded('X2'), pad: 'x'.repeat(4096) }))).status).toBe(413);
      expect((await post(r.url, signed(funded('X3'), { secret: secretOld }))).status).toBe(401);
      await r.processor.drain();
      expect(await r.inbox.get('msg_x1')).toMatchObject({ status: 'processed', loanId: 'X1' });
      expect(await r.inbox.stats()).toMatchObject({ processed: 1, pending: 0 });
      const text = await r.metricsText();
      expect(metricValue(text, 'boarding_webhooks_rejected_total', 'reason="too_large"')).toBe(1);
      expect(metricValue(text, 'boarding_webhooks_rejected_total', 'reason="bad_signature"')).toBe(1);
    });

    it('a gzip-encoded body is verified on its decoded bytes; an unknown encoding is a 415', async () => {
      const r = await startReceiver({ expressOnly });
      const d = signed(funded('Z1'), { id: 'msg_z1' });
      const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: { ...d.headers, 'content-encoding': 'gzip' },
        body: gzipSync(d.body),
      });
      expect(res.status).toBe(200);
      expect(await r.inbox.get('msg_z1')).not.toBeNull();
      const e = signed(funded('Z2'), { id: 'msg_z2' });
      const bad = await fetch(`${r.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: { ...e.headers, 'content-encoding': 'x-unknown' },
        body: e.body,
      });
      expect(bad.status).toBe(415);
      expect(await r.inbox.get('msg_z2')).toBeNull();
      expect(
        metricValue(
          await r.metricsText(),
          'boarding_webhooks_rejected_total',
          'reason="unsupported_encoding"',
        ),
      ).toBe(1);
    });
  });

  it('answers 503 only when the inbox write fails, so the platform redelivers', async () => {
    const r = await startReceiver();
    // A real write failure of the inbox table (as a full disk would give).
    r.db.exec(
      "CREATE TRIGGER inbox_full BEFORE INSERT ON webhook_inbox BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END",
    );
    const d = signed(funded('F1'), { id: 'msg_503' });
    expect((await post(r.url, d)).status).toBe(503);
    expect(await r.inbox.get('msg_503')).toBeNull();
    r.db.exec('DROP TRIGGER inbox_full');
    // The platform's redelivery of the same message then succeeds.
    expect((await post(r.url, d)).status).toBe(200);
    expect(await r.inbox.get('msg_503')).not.toBeNull();
  });

  it('healthz, readyz (200/503 by the injected checks) and metrics', async () => {
    let platformOk = true;
    const r = await startReceiver({
      readiness: {
        platform: () => (platformOk ? { ok: true } : { ok: false, detail: 'last success 20 min ago' }),
      },
    });
    expect((await fetch(`${r.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${r.url}/readyz`)).status).toBe(200);
    platformOk = false;
    const notReady = await fetch(`${r.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toEqual({
      ready: false,
      checks: { platform: { ok: false, detail: 'last success 20 min ago' } },
    });

    r.db
      .prepare(
        "INSERT INTO loans (id, state, created_at, updated_at) VALUES ('Q1', 'quarantined', 1, 1), ('A1', 'acknowledged', 1, 1), ('R1', 'retry_wait', 1, 1)",
      )
      .run();
    const m = await fetch(`${r.url}/metrics`);
    expect(m.headers.get('content-type')).toContain('text/plain');
    const text = await m.text();
    expect(metricValue(text, 'boarding_loans', 'state="quarantined"')).toBe(1);
    expect(text).toContain('boarding_loans{state="written"} 0');
    expect(metricValue(text, 'boarding_loans_boarded_total', '')).toBe(1);
    expect(text).toContain('boarding_oldest_unacknowledged_age_seconds');
    expect(text).toContain('boarding_cycle_duration_seconds');
  });

  it('GET /reports/latest serves the newest report.html of the reports directory', async () => {
    const r = await startReceiver();
    expect((await fetch(`${r.url}/reports/latest`)).status).toBe(404);
    mkdirSync(join(r.dir, 'reports', '2026-11-20'), { recursive: true });
    writeFileSync(join(r.dir, 'reports', '2026-11-20', 'report.html'), '<h1>report 20</h1>');
    const res = await fetch(`${r.url}/reports/latest`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('<h1>report 20</h1>');
  });

  it('hmac-sha256-hex: one captured delivery replayed with fresh X-Webhook-Id values is stored once (regression: 3,000 rows)', async () => {
    const secret = 'hex-secret';
    const r = await startReceiver({ scheme: 'hmac-sha256-hex', secrets: [secret] });
    const body = JSON.stringify(funded('L9'));
    const sig = createHmac('sha256', secret).update(body).digest('hex');
    for (let i = 0; i < 50; i++) {
      const res = await post(r.url, {
        body,
        headers: { 'content-type': 'application/json', 'x-signature': sig, 'x-webhook-id': `replay-${i}` },
      });
      expect(res.status).toBe(200);
    }
    expect(r.db.prepare('SELECT webhook_id AS id FROM webhook_inbox').all()).toEqual([{ id: 'evt:evt_L9' }]);
    // Without a payload id, the signed body's hash names the delivery.
    const anon = JSON.stringify({ type: 'loan.funded', data: { loanId: 'L10' } });
    const anonSig = createHmac('sha256', secret).update(anon).digest('hex');
    for (let i = 0; i < 5; i++)
      await post(r.url, {
        body: anon,
        headers: { 'content-type': 'application/json', 'x-signature': anonSig, 'x-webhook-id': `x-${i}` },
      });
    expect(r.db.prepare("SELECT COUNT(*) AS n FROM webhook_inbox WHERE loan_id = 'L10'").get()).toEqual({
      n: 1,
    });
  });

  it('stores a redacted payload: no full tax id, presigned query or key reaches webhook_inbox (regression: stored verbatim)', async () => {
    const r = await startReceiver();
    const payload = {
      id: 'evt_pii',
      type: 'loan.funded',
      createdAt: new Date().toISOString(),
      data: {
        loanId: 'L11',
        business: { ein: '12-3456789', taxId: 123456789 },
        person: { ssn: '123-45-6789' },
        apiKey: 'pk_live_secretvalue',
        url: 'https://blob.example/doc.pdf?X-Amz-Signature=abcdef&X-Amz-Credential=zzz',
      },
    };
    expect((await post(r.url, signed(payload, { id: 'msg_pii' }))).status).toBe(200);
    await r.processor.drain();
    const stored = (
      r.db.prepare("SELECT payload FROM webhook_inbox WHERE webhook_id = 'msg_pii'").get() as {
        payload: string;
      }
    ).payload;
    expect(stored).not.toMatch(/3456789|45-6789|123456789|secretvalue|X-Amz-Signature=abcdef|zzz/);
    expect(JSON.parse(stored)).toMatchObject({ id: 'evt_pii', type: 'loan.funded', data: { loanId: 'L11' } });
    expect(await r.inbox.get('msg_pii')).toMatchObject({ status: 'processed', loanId: 'L11' });
  });

  it('loan.funded rows of loans never released are bounded by age and by count', async () => {
    const r = await startReceiver();
    const day = 24 * 60 * 60 * 1000;
    const now = Date.now();
    const ins = r.db.prepare(
      "INSERT INTO webhook_inbox (webhook_id, event_type, loan_id, occurred_at, received_at, payload, status) VALUES (?, 'loan.funded', ?, ?, ?, '{}', 'processed')",
    );
    ins.run('old-unknown', 'UNKNOWN_1', now - 200 * day, now - 200 * day);
    ins.run('recent-unknown', 'UNKNOWN_2', now - 40 * day, now - 40 * day);
    for (let i = 0; i < 5; i++) ins.run(`flood-${i}`, `FLOOD_${i}`, now - i, now - 1000 + i);
    expect(await r.inbox.prune(now - 30 * day)).toBe(1); // only the one past the unknown-loan retention
    expect(await r.inbox.capUnknownFunded(3)).toBe(3); // 6 left, the oldest 3 beyond the bound go
    const left = (
      r.db.prepare('SELECT webhook_id AS id FROM webhook_inbox ORDER BY rowid').all() as Array<{ id: string }>
    ).map((x) => x.id);
    expect(left).toEqual(['flood-2', 'flood-3', 'flood-4']);
  });

  it('fuzz (bounded, seeded): malformed, oversize, compressed, forged, replayed and aborted deliveries → no 5xx, one row per signed delivery, bounded logs', async () => {
    const r = await startReceiver({ maxBodyBytes: 4096 });
    const port = Number(new URL(r.url).port);
    type Case =
      | { kind: 'signed'; id: number; gzip: boolean; replays: number }
      | { kind: 'forged'; body: string }
      | { kind: 'garbage'; body: string; signed: boolean }
      | { kind: 'oversize'; bytes: number }
      | { kind: 'aborted'; bytes: number }
      | {
          kind: 'compressed';
          encoding: string;
          bytes: number[];
          mode: 'garbage' | 'truncated';
          signed: boolean;
        };
    const arb: fc.Arbitrary<Case> = fc.oneof(
      fc.record({
        kind: fc.constant('signed' as const),
        id: fc.integer({ min: 0, max: 30 }),
        gzip: fc.boolean(),
        replays: fc.integer({ min: 0, max: 2 }),
      }),
      fc.record({ kind: fc.constant('forged' as const), body: fc.json() }),
      fc.record({
        kind: fc.constant('garbage' as const),
        body: fc.string({ maxLength: 200 }),
        signed: fc.boolean(),
      }),
      fc.record({ kind: fc.constant('oversize' as const), bytes: fc.integer({ min: 4097, max: 20_000 }) }),
      fc.record({ kind: fc.constant('aborted' as const), bytes: fc.integer({ min: 1, max: 2000 }) }),
      // Compressed garbage: random bytes, or a valid stream cut short, under every encoding the
      // body reader knows and some it does not.
      fc.record({
        kind: fc.constant('compressed' as const),
        encoding: fc.constantFrom(
          'gzip',
          'x-gzip',
          'deflate',
          'br',
          'GZIP',
          'zstd',
          'compress',
          'gzip, br',
          'identity',
        ),
        bytes: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 300 }),
        mode: fc.constantFrom('garbage' as const, 'truncated' as const),
        signed: fc.boolean(),
      }),
    );
    const cases = fc.sample(arb, { seed: 20261125, numRuns: 240 });
    const statuses: number[] = [];
    const signedIds = new Set<string>();
    let compressedCases = 0;
    for (const c of cases) {
      if (c.kind === 'signed') {
        const id = `msg_fuzz_${c.id}`;
        signedIds.add(id);
        const d = signed(
          {
            id: `evt_fuzz_${c.id}`,
            type: 'loan.funded',
            createdAt: new Date().toISOString(),
            data: { loanId: `LF${c.id}` },
          },
          { id },
        );
        for (let k = 0; k <= c.replays; k++) {
          const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
            method: 'POST',
            headers: c.gzip ? { ...d.headers, 'content-encoding': 'gzip' } : d.headers,
            body: c.gzip ? gzipSync(d.body) : d.body,
          });
          statuses.push(res.status);
          await res.text();
        }
      } else if (c.kind === 'forged') {
        const d = signed(c.body, { secret: secretOld }); // a secret this receiver does not hold
        statuses.push((await post(r.url, d)).status);
      } else if (c.kind === 'garbage') {
        const d = c.signed
          ? signed(c.body)
          : { headers: { 'content-type': 'application/json' }, body: c.body };
        statuses.push((await post(r.url, d)).status);
      } else if (c.kind === 'oversize') {
        statuses.push((await post(r.url, signed('x'.repeat(c.bytes)))).status);
      } else if (c.kind === 'compressed') {
        compressedCases += 1;
        const raw = Buffer.from(c.bytes);
        const body =
          c.mode === 'garbage'
            ? raw
            : compress(c.encoding, Buffer.from(JSON.stringify({ pad: raw.toString('base64') }))).subarray(
                0,
                Math.max(1, c.bytes.length >> 1),
              );
        const d = c.signed
          ? signed(body.toString('latin1'))
          : { headers: { 'content-type': 'application/json' }, body: '' };
        const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
          method: 'POST',
          headers: { ...d.headers, 'content-encoding': c.encoding },
          body,
        });
        statuses.push(res.status);
        await res.text();
      } else {
        // Announce a body, send part of it, and hang up.
        await new Promise<void>((resolve) => {
          const sock = connect(port, '127.0.0.1', () => {
            sock.write(
              `POST ${WEBHOOK_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${c.bytes + 10}\r\n\r\n${'a'.repeat(c.bytes)}`,
            );
            setTimeout(() => sock.destroy(), 5);
          });
          sock.on('error', () => undefined);
          sock.on('close', () => resolve());
        });
      }
    }
    await r.processor.drain();
    expect(compressedCases).toBeGreaterThan(20);
    expect(statuses.filter((x) => x >= 500)).toEqual([]);
    expect(r.logs.filter((l) => l.includes('"level":50'))).toEqual([]);
    expect((await fetch(`${r.url}/healthz`)).status).toBe(200);
    const rows = (r.db.prepare('SELECT webhook_id AS id FROM webhook_inbox').all() as Array<{ id: string }>)
      .map((x) => x.id)
      .sort();
    expect(rows).toEqual([...signedIds].sort());
    // At most 20 lines per reason and minute: the flood does not reach the log line by line.
    const warnLines = r.logs.filter((l) => l.includes('"level":40'));
    const byReason = new Map<string, number>();
    for (const l of warnLines) {
      const reason = (JSON.parse(l) as { reason?: string }).reason ?? 'other';
      byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
    }
    for (const [reason, n] of byReason) expect(n, reason).toBeLessThanOrEqual(20);
  });

  it('a corrupt compressed body is a throttled 400 (415 for an encoding the receiver does not take), never a 500 or an error line', async () => {
    const r = await startReceiver();
    const garbage = Buffer.from('this is not a compressed stream at all, just bytes \x00\xff');
    for (const encoding of ['gzip', 'deflate', 'br']) {
      for (let i = 0; i < 50; i++) {
        const d = signed('{}');
        const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
          method: 'POST',
          headers: { ...d.headers, 'content-encoding': encoding },
          body: garbage,
        });
        expect(res.status, encoding).toBe(400);
        expect(await res.json()).toEqual({ error: 'bad request' });
      }
    }
    for (const encoding of ['zstd-unknown', 'compress']) {
      const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
        body: garbage,
      });
      expect(res.status, encoding).toBe(415);
      await res.text();
    }
    expect(r.logs.filter((l) => l.includes('"level":50'))).toEqual([]);
    expect(r.logs.join('')).not.toContain('http handler failed');
    const rejected = r.logs
      .filter((l) => l.includes('webhook delivery rejected'))
      .map((l) => JSON.parse(l) as { reason: string; detail: string; status: number });
    // 150 requests, at most 20 lines a minute for the reason.
    expect(rejected.filter((l) => l.reason === 'bad_request').length).toBeLessThanOrEqual(20);
    expect(rejected.find((l) => l.reason === 'bad_request')?.detail).toMatch(
      /could not be decoded \(content-encoding gzip/,
    );
    expect(rejected.filter((l) => l.reason === 'unsupported_encoding').map((l) => l.status)).toEqual([
      415, 415,
    ]);
    expect(
      metricValue(await r.metricsText(), 'boarding_webhooks_rejected_total', 'reason="bad_request"'),
    ).toBe(150);
    expect(r.db.prepare('SELECT count(*) AS n FROM webhook_inbox').get()).toEqual({ n: 0 });
  });
});

function compress(encoding: string, data: Buffer): Buffer {
  const e = encoding.toLowerCase();
  if (e.includes('br')) return brotliCompressSync(data);
  if (e === 'deflate') return deflateSync(data);
  return gzipSync(data);
}
