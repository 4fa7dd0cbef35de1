import { hostname } from 'node:os';
import type { Command } from 'commander';
import { UsageError } from '../lib/errors.js';
import {
  WEBHOOK_EVENTS,
  checkWebhookEvents,
  checkWebhookUrl,
  enableWebhook,
  endpointView,
  endpointView as row,
  listWebhooks,
  registerWebhook,
  type WebhookEndpointWithSecret,
} from '../ops/webhooks.js';
import { out, type CliContext } from './context.js';
import { openPlatformSession } from '../app/session.js';
import { zonedForText, zonedJson } from './times.js';

export function registerWebhooksCommands(program: Command, ctx: CliContext): void {
  const group = program
    .command('webhooks')
    .description(
      'manage the platform webhook endpoint that pushes loan.funded and other events to this connector',
    );

  group
    .command('register')
    .description('register a webhook endpoint on the platform and print its signing secret (shown once)')
    .requiredOption(
      '--url <url>',
      'public HTTPS URL of this connector’s receiver, ending in /webhooks/platform',
    )
    .option('--events <event...>', `events to subscribe (default: all of ${WEBHOOK_EVENTS.join(', ')})`)
    .option('--name <name>', 'endpoint name on the platform (1–100 characters)')
    .option('--force', 'register even if an endpoint with this URL already exists')
    .option('--json', 'print the result as JSON (includes the secret)')
    .action(
      async (flags: { url: string; events?: string[]; name?: string; force?: boolean; json?: boolean }) => {
        const url = await checkWebhookUrl(flags.url, ctx.config().platform.environment);
        const events = checkWebhookEvents(flags.events);
        const name = (flags.name ?? `boarding-connector (${hostname()})`).slice(0, 100);
        if (name.trim() === '') throw new UsageError('--name: expected 1 to 100 characters');
        const { store, platform } = await openPlatformSession(ctx);
        const deps = { store, platform, clock: ctx.clock, signal: ctx.shutdown };
        const result = await registerWebhook(deps, { url, name, events, force: flags.force === true });
        out(ctx, registerResultText(result, { url, events, json: flags.json === true }));
      },
    );

  group
    .command('list')
    .description('list the webhook endpoints of the organization with their delivery health')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const config = ctx.config();
      const { store, platform } = await openPlatformSession(ctx);
      const deps = { store, platform, clock: ctx.clock, signal: ctx.shutdown };
      const rows = await listWebhooks(deps, config.webhooks.publicUrl);
      const zone = config.bank.timeZone;
      out(
        ctx,
        flags.json
          ? JSON.stringify(zonedJson(rows, zone), null, 2)
          : webhookListText(zonedForText(rows, zone)),
      );
    });

  group
    .command('enable')
    .description('re-activate an endpoint (e.g. after the platform auto-disabled it): PATCH status active')
    .argument('<id>', 'endpoint id (see `webhooks list`)')
    .option('--json', 'print JSON')
    .action(async (id: string, flags: { json?: boolean }) => {
      if (id.trim() === '') throw new UsageError('ID: expected an endpoint id (see `webhooks list`)');
      const { store, platform } = await openPlatformSession(ctx);
      const endpoint = await enableWebhook({ store, platform, clock: ctx.clock, signal: ctx.shutdown }, id);
      if (flags.json)
        out(ctx, JSON.stringify(zonedJson(row(endpoint, false), ctx.config().bank.timeZone), null, 2));
      else out(ctx, `Endpoint ${endpoint.id} is now ${endpoint.status ?? 'updated (status not reported)'}.`);
    });
}

/** What `webhooks register` prints: the secret, shown once, and where it goes. */
function registeredText(endpoint: WebhookEndpointWithSecret, url: string, events: readonly string[]): string {
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
function endpointTable(rows: Array<Record<string, unknown>>, columns: string[]): string {
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
function registerResultText(
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
      .map((e) => `${e.id} (${endpointView(e, true)['disabled'] ? 'disabled' : (e.status ?? 'unknown')})`)
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
function webhookListText(rows: ReadonlyArray<Record<string, unknown>>): string {
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
