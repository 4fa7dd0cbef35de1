import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness, type J } from './harness.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver that answers with the next status from `statuses` (then 204). */
async function receiver(
  statuses: number[] = [],
): Promise<{ url: string; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(statuses.shift() ?? 204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    got,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('webhook endpoints and deliveries', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      loans: 5,
      allowLoopbackWebhooks: true,
      webhookRetry: { attempts: 3, baseMs: 10 },
      webhookAutoDisableAfter: 4,
    });
  });
  afterAll(() => h.close());

  it('create validates name, https URL, hosts and events; the secret is returned once', async () => {
    const strict = await startHarness({ loans: 1 });
    try {
      const bad: Array<[J, string]> = [
        [{ name: '', url: 'https://hooks.example.com/x', subscribedEvents: ['loan.funded'] }, 'name'],
        [
          { name: 'x'.repeat(101), url: 'https://hooks.example.com/x', subscribedEvents: ['loan.funded'] },
          'name',
        ],
        [{ name: 'a', url: 'http://hooks.example.com/x', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://127.0.0.1/x', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://localhost/x', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://10.1.2.3/x', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://192.168.0.1/x', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://169.254.169.254/latest', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://metadata.google.internal/x', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://[::1]/x', subscribedEvents: ['loan.funded'] }, 'url'],
        [{ name: 'a', url: 'https://hooks.example.com/x', subscribedEvents: [] }, 'subscribedEvents'],
        [
          { name: 'a', url: 'https://hooks.example.com/x', subscribedEvents: ['loan.deleted'] },
          'subscribedEvents',
        ],
      ];
      for (const [body, field] of bad) {
        const r = await strict.api('/public/v1/webhook-endpoints', { method: 'POST', body });
        expect(r.status, JSON.stringify(body)).toBe(400);
        expect(r.body.success).toBe(false);
        expect(r.body.error[0].path[0], JSON.stringify(body)).toBe(field);
      }
      const created = await strict.api('/public/v1/webhook-endpoints', {
        method: 'POST',
        body: { name: 'bank', url: 'https://hooks.example.com/x', subscribedEvents: ['loan.funded'] },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      expect(created.body.data).toMatchObject({
        status: 'active',
        environment: 'staging',
        consecutiveFailures: 0,
        subscribedEvents: ['loan.funded'],
      });
      const list = await strict.api('/public/v1/webhook-endpoints');
      expect(list.body.data).toHaveLength(1);
      expect(list.body.data[0].secret).toBeUndefined();
      const patched = await strict.api(
        `/public/v1/webhook-endpoints/${encodeURIComponent(created.body.data.id)}`,
        { method: 'PATCH', body: { name: 'renamed' } },
      );
      expect(patched.body.data).toMatchObject({ name: 'renamed', url: 'https://hooks.example.com/x' });
      expect(patched.body.data.secret).toBeUndefined();
      expect(
        (await strict.api('/public/v1/webhook-endpoints/whe_nope', { method: 'PATCH', body: {} })).status,
      ).toBe(404);
    } finally {
      await strict.close();
    }
  });

  it('lifecycle actions deliver Standard Webhooks signed events that verify with the secret', async () => {
    const rx = await receiver();
    try {
      const created = await h.api('/public/v1/webhook-endpoints', {
        method: 'POST',
        body: {
          name: 'local',
          url: rx.url,
          subscribedEvents: [
            'loan.created',
            'loan.status_changed',
            'loan.funded',
            'document.uploaded',
            'document.signed',
          ],
        },
      });
      expect(created.status).toBe(201);
      const secret = created.body.data.secret as string;
      const [loanId] = (await h.admin('/loans', 'POST', { count: 1, status: 'active' })).ids;
      await h.admin(`/loans/${encodeURIComponent(loanId)}/fund`, 'POST');
      const pending = await h.admin(`/loans/${encodeURIComponent(loanId)}/documents`, 'POST', {});
      await h.api(`/public/v1/documents/${encodeURIComponent(pending.documentId)}/confirm`, {
        method: 'POST',
        body: {},
      });
      await h.admin(`/documents/${encodeURIComponent(pending.documentId)}/sign`, 'POST');
      await h.admin('/webhooks/deliveries?wait=true');
      const wh = new Webhook(secret);
      const events = rx.got.map(
        (g) =>
          wh.verify(g.body, {
            'webhook-id': String(g.headers['webhook-id']),
            'webhook-timestamp': String(g.headers['webhook-timestamp']),
            'webhook-signature': String(g.headers['webhook-signature']),
          }) as J,
      );
      expect(events.map((e) => e.type)).toEqual([
        'loan.created',
        'loan.status_changed',
        'loan.funded',
        'document.uploaded',
        'document.signed',
      ]);
      expect(events[1].data).toMatchObject({ loanId, previousStatus: 'active', status: 'funded' });
      expect(events[0]).toMatchObject({
        id: rx.got[0]?.headers['webhook-id'],
        createdAt: expect.any(String),
        data: { loanId },
      });
      // A tampered body does not verify.
      expect(() =>
        wh.verify(`${rx.got[0]?.body} `, {
          'webhook-id': String(rx.got[0]?.headers['webhook-id']),
          'webhook-timestamp': String(rx.got[0]?.headers['webhook-timestamp']),
          'webhook-signature': String(rx.got[0]?.headers['webhook-signature']),
        }),
      ).toThrow();
      const list = await h.api('/public/v1/webhook-endpoints');
      const ep = list.body.data.find((e: J) => e.id === created.body.data.id);
      expect(ep.lastSuccessAt).toEqual(expect.any(String));
      await h.api(`/public/v1/webhook-endpoints/${encodeURIComponent(ep.id)}`, {
        method: 'PATCH',
        body: { status: 'disabled' },
      });
    } finally {
      await rx.close();
    }
  });

  it('retries failed deliveries with the same webhook-id, tracks failures and auto-disables', async () => {
    const rx = await receiver([500, 503, 204, 500, 500, 500, 500]);
    try {
      const created = await h.api('/public/v1/webhook-endpoints', {
        method: 'POST',
        body: { name: 'flaky', url: rx.url, subscribedEvents: ['loan.funded'] },
      });
      const id = created.body.data.id as string;
      const [a, b] = (await h.admin('/loans', 'POST', { count: 2, status: 'active' })).ids;
      await h.admin(`/loans/${encodeURIComponent(a)}/fund`, 'POST');
      await h.admin('/webhooks/deliveries?wait=true');
      // 500, 503, then 204 on the third attempt: one event, three tries, same id.
      expect(rx.got).toHaveLength(3);
      expect(new Set(rx.got.map((g) => g.headers['webhook-id'])).size).toBe(1);
      let ep = (await h.api('/public/v1/webhook-endpoints')).body.data.find((e: J) => e.id === id);
      expect(ep).toMatchObject({ consecutiveFailures: 0, status: 'active', lastFailureReason: 'HTTP 503' });
      expect(ep.lastSuccessAt).toEqual(expect.any(String));
      await h.admin(`/loans/${encodeURIComponent(b)}/fund`, 'POST');
      await h.admin('/webhooks/deliveries?wait=true');
      ep = (await h.api('/public/v1/webhook-endpoints')).body.data.find((e: J) => e.id === id);
      expect(ep.consecutiveFailures).toBe(3);
      expect(ep.status).toBe('active');
      const [c] = (await h.admin('/loans', 'POST', { count: 1, status: 'active' })).ids;
      await h.admin(`/loans/${encodeURIComponent(c)}/fund`, 'POST');
      await h.admin('/webhooks/deliveries?wait=true');
      ep = (await h.api('/public/v1/webhook-endpoints')).body.data.find((e: J) => e.id === id);
      expect(ep).toMatchObject({
        status: 'disabled',
        consecutiveFailures: 4,
        autoDisabledAt: expect.any(String),
        lastFailureAt: expect.any(String),
      });
      const counters = await h.admin('/counters');
      expect(counters.webhookDeliveries.byEndpoint[id]).toEqual({ attempts: 7, succeeded: 1, failed: 6 });
      const reenabled = await h.api(`/public/v1/webhook-endpoints/${encodeURIComponent(id)}`, {
        method: 'PATCH',
        body: { status: 'active' },
      });
      expect(reenabled.body.data).toMatchObject({
        status: 'active',
        consecutiveFailures: 0,
        autoDisabledAt: null,
      });
    } finally {
      await rx.close();
    }
  });

  it('admin can emit an arbitrary event to subscribed endpoints', async () => {
    const rx = await receiver();
    try {
      const created = await h.api('/public/v1/webhook-endpoints', {
        method: 'POST',
        body: { name: 'any', url: rx.url, subscribedEvents: ['loan.funded'] },
      });
      const e = await h.admin('/events', 'POST', {
        type: 'loan.funded',
        data: { loanId: 'ln_unknown', extra: [1, 2] },
      });
      await h.admin('/events', 'POST', { type: 'document.signed', data: {} }); // not subscribed
      await h.admin('/webhooks/deliveries?wait=true');
      expect(rx.got).toHaveLength(1);
      const body = JSON.parse(rx.got[0]!.body);
      expect(body).toMatchObject({
        id: e.id,
        type: 'loan.funded',
        data: { loanId: 'ln_unknown', extra: [1, 2] },
      });
      await h.api(`/public/v1/webhook-endpoints/${encodeURIComponent(created.body.data.id)}`, {
        method: 'PATCH',
        body: { status: 'disabled' },
      });
    } finally {
      await rx.close();
    }
  });
});
