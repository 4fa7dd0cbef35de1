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

/** What `webhooks register` prints: the secret, shown once, and where it goes. */
export function registeredText(
  endpoint: WebhookEndpointWithSecret,
  url: string,
  events: readonly string[],
): string {
  const lines = [
    `Registered webhook endpoint ${endpoint.id} (${endpoint.status ?? 'status not reported'}) → ${endpoint.url ?? url}`,
    `Events: ${(endpoint.subscribedEvents ?? events).join(', ')}`,
    '',
    'Signing secret (shown ONCE by the platform — store it now, it cannot be retrieved again):',
    `  ${endpoint.secret}`,
    '',
    'Give it to the connector, either in the environment (comma-separate old,new while rotating):',
    `  BOARDING_WEBHOOK_SECRETS=${endpoint.secret}`,
    'or in the config file:',
    '  webhooks:',
    `    secrets: ["${endpoint.secret}"]`,
    `    publicUrl: ${url}`,
    '',
    'Then restart `run`. Keep the old secret in the list until deliveries signed with it stop.',
  ];
  if (!events.includes('loan.funded'))
    lines.push(
      '',
      'Note: loan.funded is not subscribed: funded loans will only be picked up by scheduled cycles.',
    );
  return lines.join('\n');
}

/** A table of endpoint views, one column per name. */
export function endpointTable(rows: Array<Record<string, unknown>>, columns: string[]): string {
  const cell = (v: unknown): string => {
    if (v === null || v === undefined) return '-';
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    return JSON.stringify(v);
  };
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]): string =>
    vals
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(columns), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n');
}

/**
 * What `webhooks register` prints: the new endpoint and its secret (shown once), or the endpoints that
 * already have the URL.
 */
export function registerResultText(
  result: Awaited<ReturnType<typeof registerWebhook>>,
  o: { url: string; events: readonly string[]; json: boolean },
): string {
  if (result.kind === 'exists') {
    if (o.json)
      return JSON.stringify(
        { registered: false, existing: result.endpoints.map((e) => endpointView(e, true)) },
        null,
        2,
      );
    const ids = result.endpoints
      .map((e) => `${e.id} (${isEndpointDisabled(e) ? 'disabled' : (e.status ?? 'unknown')})`)
      .join(', ');
    return (
      `An endpoint for ${o.url} already exists: ${ids}.\nIts secret cannot be shown again. Use \`webhooks ` +
      `enable ID\` if it is disabled, or --force to register a new one (then configure its new secret).`
    );
  }
  const { endpoint } = result;
  if (o.json)
    return JSON.stringify(
      { registered: true, endpoint: endpointView(endpoint, true), secret: endpoint.secret },
      null,
      2,
    );
  return registeredText(endpoint, o.url, o.events);
}

/** `webhooks list` as a table; this connector's endpoint marked, the disabled ones counted. */
export function webhookListText(rows: ReadonlyArray<Record<string, unknown>>): string {
  if (rows.length === 0)
    return (
      'No webhook endpoints registered. Register one with ' +
      '`webhooks register --url <public URL>/webhooks/platform`.'
    );
  const shown = rows.map((r) => ({ ...r, id: r['thisConnector'] ? `${String(r['id'])} *` : r['id'] }));
  const columns = ['id', 'status', 'consecutiveFailures', 'lastFailureReason', 'autoDisabledAt', 'url'];
  const lines = [endpointTable(shown, columns)];
  if (rows.some((r) => r['thisConnector'])) lines.push('* this connector (webhooks.publicUrl)');
  const disabled = rows.filter((r) => r['disabled']).length;
  if (disabled > 0)
    lines.push(`\n${disabled} endpoint(s) disabled: fix the cause, then \`webhooks enable ID\`.`);
  return lines.join('\n');
}
