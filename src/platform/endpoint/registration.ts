import { createHash, randomUUID } from 'node:crypto';
import type { Clock } from '../../lib/clock.js';
import type { PlatformApi } from '../api.js';
import type { WebhookEndpoint, WebhookEndpointWithSecret } from '../../contract/schemas.js';
import { sameEndpointUrl } from './endpoint-check.js';

/**
 * Where a registration's Idempotency-Key is kept before the call and reused on every retry, across
 * restarts (the port this module owns; the store's idempotency keys implement it).
 */
export interface EndpointKeyStore {
  /** Stores the key if new (first use). */
  ensure(key: string, operation: string, loanId: string | null, now: number): Promise<unknown>;
  complete(key: string, status: number | null, response: unknown, now: number): Promise<void>;
  /** The newest key of this operation starting with prefix that never completed, or null. */
  unfinished(operation: string, prefix: string): Promise<string | null>;
}

export const CREATE_OPERATION = 'webhook-endpoint:create';
export const ENABLE_OPERATION = 'webhook-endpoint:enable';

export interface RegisterInput {
  url: string;
  name: string;
  events: string[];
  /** Register even when an endpoint with this URL already exists. */
  force?: boolean;
}

export type RegisterResult =
  | { kind: 'created'; endpoint: WebhookEndpointWithSecret; idempotencyKey: string }
  | { kind: 'exists'; endpoints: WebhookEndpoint[] };

/**
 * What the key of a registration is derived from; a run that died after the platform committed is
 * redone with the same key (the platform answers the original creation, not a second endpoint).
 */
function fingerprint(input: RegisterInput): string {
  const events = [...new Set(input.events)].sort().join(',');
  return createHash('sha256').update(`${input.url}\n${input.name}\n${events}`).digest('hex').slice(0, 32);
}

/**
 * Creates a webhook endpoint exactly once. The Idempotency-Key is stored before the call; an
 * unfinished key for the same URL/name/events (a previous run that crashed or timed out) is reused.
 * The secret is returned to the caller only: it is never stored or logged (the stored response
 * keeps the endpoint id and status).
 */
export async function registerEndpoint(
  platform: Pick<PlatformApi, 'listWebhookEndpoints' | 'createWebhookEndpoint'>,
  keys: EndpointKeyStore,
  input: RegisterInput,
  opts: { clock: Clock; signal?: AbortSignal },
): Promise<RegisterResult> {
  const clock = opts.clock;
  const prefix = `${CREATE_OPERATION}:${fingerprint(input)}:`;
  const unfinished = await keys.unfinished(CREATE_OPERATION, prefix);

  if (!unfinished && !input.force) {
    const existing = (await platform.listWebhookEndpoints(opts.signal ? { signal: opts.signal } : {})).filter(
      (e) => typeof e.url === 'string' && sameEndpointUrl(e.url, input.url),
    );
    if (existing.length > 0) return { kind: 'exists', endpoints: existing };
  }
  const key = unfinished ?? `${prefix}${randomUUID()}`;
  await keys.ensure(key, CREATE_OPERATION, null, clock.now());
  const endpoint = await platform.createWebhookEndpoint(
    { name: input.name, url: input.url, subscribedEvents: input.events },
    { idempotencyKey: key, ...(opts.signal ? { signal: opts.signal } : {}) },
  );
  await keys.complete(key, 200, { endpointId: endpoint.id, status: endpoint.status ?? null }, clock.now());
  return { kind: 'created', endpoint, idempotencyKey: key };
}

/** PATCH status active; the key is stored first like every write. */
export async function enableEndpoint(
  platform: Pick<PlatformApi, 'updateWebhookEndpoint'>,
  keys: EndpointKeyStore,
  id: string,
  opts: { clock: Clock; signal?: AbortSignal },
): Promise<WebhookEndpoint> {
  const clock = opts.clock;
  const key = `${ENABLE_OPERATION}:${id.slice(0, 150)}:${randomUUID()}`;
  await keys.ensure(key, ENABLE_OPERATION, null, clock.now());
  const endpoint = await platform.updateWebhookEndpoint(
    id,
    { status: 'active' },
    { idempotencyKey: key, ...(opts.signal ? { signal: opts.signal } : {}) },
  );
  await keys.complete(key, 200, { endpointId: endpoint.id, status: endpoint.status ?? null }, clock.now());
  return endpoint;
}
