import type { Command } from 'commander';
import { redactUrl } from '../config/security.js';
import { out, type CliContext } from './context.js';

export function registerConfigCommands(program: Command, ctx: CliContext): void {
  const config = program.command('config').description('inspect the configuration');
  config
    .command('check')
    .description('validate the config (file + env) and print it with secrets hidden')
    .action(() => {
      const c = ctx.config();
      const shown = {
        ...c,
        platform: { ...c.platform, baseUrl: redactUrl(c.platform.baseUrl), apiKey: `${c.platform.apiKey.slice(0, 8)}…` },
        webhooks: {
          ...c.webhooks,
          secrets: c.webhooks.secrets.map(() => '(hidden)'),
          ...(c.webhooks.publicUrl !== undefined ? { publicUrl: redactUrl(c.webhooks.publicUrl) } : {}),
        },
        core: c.core.http ? { ...c.core, http: { ...c.core.http, baseUrl: redactUrl(c.core.http.baseUrl), password: '(hidden)' } } : c.core,
        customers: { ...c.customers, ...(c.customers.tinHashKey !== undefined ? { tinHashKey: '(hidden)' } : {}) },
      };
      out(ctx, JSON.stringify({ ok: true, source: ctx.configPath() ?? 'built-in defaults', config: shown }, null, 2));
    });
}
