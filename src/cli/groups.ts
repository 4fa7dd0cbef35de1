import type { Command } from 'commander';
import type { CliContext } from './context.js';
import { registerConfigCommands } from './config.js';
import { registerLoansCommands } from './loans.js';
import { registerRunCommands } from './run.js';
import { registerSyncCommands } from './sync.js';
import { registerSandboxCommands } from './sandbox.js';
import { registerWebhooksCommands } from './webhooks.js';
import { registerReconcileCommands } from './reconcile.js';
import { registerDemoCommands } from './demo.js';
import { registerMappingsCommands } from './mappings.js';
import { registerPlatformCommands } from './platform.js';
import { registerStateCommands } from './state.js';
import { registerBatchesCommands } from './batches.js';
import { registerCustomersCommands } from './customers.js';
import { registerConsoleCommands } from './console.js';
import { registerImagingCommands } from './imaging.js';

/** Every command group; each file registers only commands that work. */
export function registerCommandGroups(program: Command, ctx: CliContext): void {
  registerConfigCommands(program, ctx);
  registerSyncCommands(program, ctx);
  registerRunCommands(program, ctx);
  registerLoansCommands(program, ctx);
  registerSandboxCommands(program, ctx);
  registerWebhooksCommands(program, ctx);
  registerReconcileCommands(program, ctx);
  registerDemoCommands(program, ctx);
  registerMappingsCommands(program, ctx);
  registerPlatformCommands(program, ctx);
  registerStateCommands(program, ctx);
  registerBatchesCommands(program, ctx);
  registerCustomersCommands(program, ctx);
  registerConsoleCommands(program, ctx);
  registerImagingCommands(program, ctx);
}
