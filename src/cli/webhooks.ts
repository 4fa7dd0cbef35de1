import { hostname } from 'node:os';
import type { Command } from 'commander';
import { UsageError } from '../lib/errors.js';
import {
  WEBHOOK_EVENTS,
  checkWebhookEvents,
  checkWebhookUrl,
  enableWebhook,
  endpointView as row,
  listWebhooks,
  registerResultText,
  registerWebhook,
  webhookListText,
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
