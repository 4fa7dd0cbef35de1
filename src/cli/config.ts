import type { Command } from 'commander';
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
        platform: { ...c.platform, apiKey: `${c.platform.apiKey.slice(0, 8)}…` },
        webhooks: { ...c.webhooks, secrets: c.webhooks.secrets.map(() => '(hidden)') },
        core: c.core.http ? { ...c.core, http: { ...c.core.http, password: '(hidden)' } } : c.core,
      };
      out(ctx, JSON.stringify({ ok: true, source: ctx.configPath() ?? 'built-in defaults', config: shown }, null, 2));
    });
}
