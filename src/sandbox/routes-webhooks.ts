import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { fromZod, notFound, validationFailed } from './api-error.js';
import { WEBHOOK_EVENT_TYPES } from './model.js';
import { ok, type RouteContext, type RouteDef, type RouteResult } from './route-table.js';
import { publicEndpoint } from './serialize.js';
import type { WebhookEndpointRecord } from './state.js';
import { webhookUrlProblem } from './webhook-url.js';

const events = z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1);
const createSchema = z.strictObject({
  name: z.string().min(1).max(100),
  url: z.string(),
  subscribedEvents: events,
});
const patchSchema = z.strictObject({
  name: z.string().min(1).max(100).optional(),
  url: z.string().optional(),
  subscribedEvents: events.optional(),
  status: z.enum(['active', 'disabled']).optional(),
});

function checkUrl(c: RouteContext, url: string | undefined): void {
  if (url === undefined) return;
  const problem = webhookUrlProblem(url, c.options.allowLoopbackWebhooks);
  if (problem)
    throw validationFailed([{ path: ['url'], code: 'invalid_url', message: `url ${problem}` }], c.body);
}

function create(c: RouteContext): RouteResult {
  const parsed = createSchema.safeParse(c.body);
  if (!parsed.success) throw fromZod(parsed.error, c.body ?? null);
  checkUrl(c, parsed.data.url);
  const record: WebhookEndpointRecord = {
    id: c.state.newId('whe'),
    orgId: c.key.orgId,
    name: parsed.data.name,
    url: parsed.data.url,
    environment: c.state.environment,
    status: 'active',
    subscribedEvents: [...new Set(parsed.data.subscribedEvents)],
    consecutiveFailures: 0,
    lastSuccessAt: null,
    lastFailureAt: null,
    lastFailureReason: null,
    autoDisabledAt: null,
    createdAt: c.state.nowIso(),
    secret: `whsec_${randomBytes(24).toString('base64')}`,
  };
  c.state.endpoints.set(record.id, record);
  return ok({ data: publicEndpoint(record, true) }, 201);
}

function list(c: RouteContext): RouteResult {
  const mine = [...c.state.endpoints.values()].filter((e) => e.orgId === c.key.orgId);
  const meta: Record<string, unknown> = { mode: 'offset', limit: 100, offset: 0, hasMore: false };
  if (c.legacy) meta['total'] = mine.length;
  return ok({ data: mine.map((e) => publicEndpoint(e)), meta });
}

function patch(c: RouteContext): RouteResult {
  const e = c.state.endpoints.get(c.params['id'] ?? '');
  if (!e || e.orgId !== c.key.orgId) throw notFound('webhook_endpoint.not_found', 'webhook endpoint');
  const parsed = patchSchema.safeParse(c.body);
  if (!parsed.success) throw fromZod(parsed.error, c.body ?? null);
  const p = parsed.data;
  checkUrl(c, p.url);
  if (p.name !== undefined) e.name = p.name;
  if (p.url !== undefined) e.url = p.url;
  if (p.subscribedEvents !== undefined) e.subscribedEvents = [...new Set(p.subscribedEvents)];
  if (p.status !== undefined && p.status !== e.status) {
    e.status = p.status;
    if (p.status === 'active') {
      // Re-enabling starts a fresh failure count, as an operator would expect.
      e.consecutiveFailures = 0;
      e.autoDisabledAt = null;
    }
  }
  return ok({ data: publicEndpoint(e) });
}

export const webhookRoutes: RouteDef[] = [
  { method: 'POST', pattern: '/webhook-endpoints', permission: 'write:webhooks', handler: create },
  { method: 'GET', pattern: '/webhook-endpoints', permission: 'read:webhooks', handler: list },
  { method: 'PATCH', pattern: '/webhook-endpoints/:id', permission: 'write:webhooks', handler: patch },
];
