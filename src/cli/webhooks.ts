import { hostname } from 'node:os';
import type { Command } from 'commander';
import { UsageError } from '../lib/errors.js';
import {
  WEBHOOK_EVENTS,
  checkWebhookEvents,
  checkWebhookUrl,
  enableWebhook,
  endpointTable as table,
  endpointView as row,
  isEndpointDisabled,
  listWebhooks,
  registerWebhook,
  registeredText,
} from '../ops/webhooks.js';
import { out, type CliContext } from './context.js';
import { openPlatformSession } from '../app/session.js';

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
        if (result.kind === 'exists') {
          const ids = result.endpoints
            .map((e) => `${e.id} (${isEndpointDisabled(e) ? 'disabled' : (e.status ?? 'unknown')})`)
            .join(', ');
          if (flags.json)
            out(
              ctx,
              JSON.stringify(
                { registered: false, existing: result.endpoints.map((e) => row(e, true)) },
                null,
                2,
              ),
            );
          else {
            out(
              ctx,
              `An endpoint for ${url} already exists: ${ids}.\nIts secret cannot be shown again. Use \`webhooks enable ID\` if it is disabled, or --force to register a new one (then configure its new secret).`,
            );
          }
          return;
        }
        const { endpoint } = result;
        if (flags.json) {
          out(
            ctx,
            JSON.stringify(
              { registered: true, endpoint: row(endpoint, true), secret: endpoint.secret },
              null,
              2,
            ),
          );
          return;
        }
        out(ctx, registeredText(endpoint, url, events));
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
      if (flags.json) {
        out(ctx, JSON.stringify(rows, null, 2));
        return;
      }
      if (rows.length === 0) {
        out(
          ctx,
          'No webhook endpoints registered. Register one with `webhooks register --url <public URL>/webhooks/platform`.',
        );
        return;
      }
      const shown = rows.map((r) => ({ ...r, id: r['thisConnector'] ? `${String(r['id'])} *` : r['id'] }));
      out(
        ctx,
        table(shown, ['id', 'status', 'consecutiveFailures', 'lastFailureReason', 'autoDisabledAt', 'url']),
      );
      if (rows.some((r) => r['thisConnector'])) out(ctx, '* this connector (webhooks.publicUrl)');
      const disabled = rows.filter((r) => r['disabled']);
      if (disabled.length > 0)
        out(ctx, `\n${disabled.length} endpoint(s) disabled: fix the cause, then \`webhooks enable ID\`.`);
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
      if (flags.json) out(ctx, JSON.stringify(row(endpoint, false), null, 2));
      else out(ctx, `Endpoint ${endpoint.id} is now ${endpoint.status ?? 'updated (status not reported)'}.`);
    });
}
