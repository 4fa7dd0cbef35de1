/**
 * The organization's webhook endpoints on the platform: `webhooks register|list|enable`. The
 * platform's refusals become one-line operator messages (FatalError) naming what was wrong.
 */
import { FatalError, UsageError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import { isPlatformError } from '../platform/errors.js';
import type { PlatformClient } from '../platform/client.js';
import { WEBHOOK_EVENTS, type WebhookEndpoint, type WebhookEndpointWithSecret } from '../contract/schemas.js';
import { isEndpointDisabled, sameEndpointUrl } from '../platform/endpoint/endpoint-check.js';
import { enableEndpoint, registerEndpoint } from '../platform/endpoint/registration.js';
import { webhookTargetProblem } from '../platform/endpoint/public-url.js';
import type { BoardingStore } from '../store/index.js';
import { redactUrlsIn, urlSecretParts } from '../lib/redact.js';
import { commandHint } from '../lib/shell.js';

export { WEBHOOK_EVENTS, isEndpointDisabled, type WebhookEndpoint };

export interface WebhookOpsDeps {
  platform: PlatformClient;
  store: Pick<BoardingStore, 'keys'>;
  clock: Clock;
  signal: AbortSignal;
}

/** Platform refusals become a one-line operator message (exit 1) naming what was wrong. */
function explain(err: unknown, what: string): never {
  if (isPlatformError(err)) {
    const details = err.validationErrors
      .slice(0, 5)
      .map((v) => (typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)))
      .join('; ');
    throw new FatalError(`${what}: ${err.describe()}${details ? `: ${details}` : ''}`);
  }
  throw err;
}

/** The endpoint URL, checked by the connector itself (public-url.ts), after DNS resolution. */
export async function checkWebhookUrl(raw: string, environment: string): Promise<string> {
  const problem = await webhookTargetProblem(raw, {
    allowLocal: environment === 'development',
  });
  if (problem !== null) throw new UsageError(`--url: ${problem} (got "${redactUrlsIn(raw)}")`);
  // A secret on the command line stays in the shell history and the process list (issue 43 F5).
  const secrets = urlSecretParts(raw);
  if (secrets.length > 0)
    throw new UsageError(
      `--url: the URL carries ${secrets.join(' and ')}: a secret on the command line stays in the shell ` +
        "history and the process list, and the platform would keep it; give the receiver's URL without it",
    );
  return new URL(raw).toString();
}

export function checkWebhookEvents(events: string[] | undefined): string[] {
  if (!events || events.length === 0) return [...WEBHOOK_EVENTS];
  const list = [
    ...new Set(
      events
        .flatMap((e) => e.split(','))
        .map((e) => e.trim())
        .filter(Boolean),
    ),
  ];
  const unknown = list.filter((e) => !(WEBHOOK_EVENTS as readonly string[]).includes(e));
  if (unknown.length > 0)
    throw new UsageError(
      `--events: unknown event(s) ${unknown.join(', ')}; allowed: ${WEBHOOK_EVENTS.join(', ')}`,
    );
  return list;
}

export function endpointView(e: WebhookEndpoint, ours: boolean): Record<string, unknown> {
  return {
    id: e.id,
    name: e.name ?? null,
    url: e.url ?? null,
    status: e.status ?? null,
    disabled: isEndpointDisabled(e),
    consecutiveFailures: e.consecutiveFailures ?? null,
    lastSuccessAt: e.lastSuccessAt ?? null,
    lastFailureAt: e.lastFailureAt ?? null,
    lastFailureReason: e.lastFailureReason ?? null,
    autoDisabledAt: e.autoDisabledAt ?? null,
    subscribedEvents: e.subscribedEvents ?? [],
    thisConnector: ours,
  };
}

/** The endpoint as the platform returns it at registration: its secret is shown once. */
export type { WebhookEndpointWithSecret };

export async function registerWebhook(
  deps: WebhookOpsDeps,
  input: { url: string; name: string; events: string[]; force: boolean },
) {
  try {
    return await registerEndpoint(deps.platform, deps.store.keys, input, {
      clock: deps.clock,
      signal: deps.signal,
    });
  } catch (err) {
    explain(err, 'webhooks register');
  }
}

/** The endpoints with their delivery health; thisConnector: its URL is webhooks.publicUrl. */
export async function listWebhooks(deps: WebhookOpsDeps, publicUrl: string | undefined) {
  let endpoints: WebhookEndpoint[];
  try {
    endpoints = await deps.platform.listWebhookEndpoints({ signal: deps.signal });
  } catch (err) {
    explain(err, 'webhooks list');
  }
  return endpoints.map((e) =>
    endpointView(
      e,
      publicUrl !== undefined && typeof e.url === 'string' && sameEndpointUrl(e.url, publicUrl),
    ),
  );
}

export async function enableWebhook(deps: WebhookOpsDeps, id: string): Promise<WebhookEndpoint> {
  if (id.trim() === '') throw new UsageError('ID: expected an endpoint id (see `webhooks list`)');
  try {
    return await enableEndpoint(deps.platform, deps.store.keys, id.trim(), {
      clock: deps.clock,
      signal: deps.signal,
    });
  } catch (err) {
    explain(err, commandHint('webhooks enable', [id]));
  }
}
