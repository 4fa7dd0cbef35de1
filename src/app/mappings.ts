import { accountNumbersFromConfig } from '../identity/account-numbers.js';
import { bankSchema, mappingsSchema } from '../config/schema.js';
import type { MapperOptions } from '../mapping/compile.js';
import { loadMapper } from '../mapping-sets/loader.js';
import type { PlatformClient } from '../platform/client.js';
import type { PreviewDeps } from '../ops/mapping-preview.js';
import { mapperOptionsFromConfig } from './runtime.js';
import { openPlatformSession, type CommandScope } from './session.js';

/**
 * The bank's mapping options from config (lint and preview use them; fixtures use their own).
 * Without a config (`mappings lint --dir D` on a bank engineer's machine) the defaults of the
 * config keys apply (bank.timeZone, mappings.*), exactly as a config that leaves them out.
 */
export function mappingOptions(
  scope: Pick<CommandScope, 'config'> & { configPath(): string | undefined },
): MapperOptions {
  if (scope.configPath() === undefined)
    return mapperOptionsFromConfig({ bank: bankSchema.parse({}), mappings: mappingsSchema.parse({}) });
  return mapperOptionsFromConfig(scope.config());
}

/**
 * `mappings preview`: the set in `dir` and, through the state database, a platform client (the
 * preview spends from the daemon's rate budget and maps the queue item the pipeline stored).
 */
export async function openMappingPreview(
  scope: CommandScope & { configPath(): string | undefined; readonly shutdown: AbortSignal },
  dir: string,
): Promise<Omit<PreviewDeps, 'platform'> & { platform: PlatformClient }> {
  const mapper = await loadMapper(dir, mappingOptions(scope));
  const { store, platform } = await openPlatformSession(scope);
  const accountNumbers = {
    preview: (id: string) => accountNumbersFromConfig(scope.config(), store, scope.logger()).preview(id),
  };
  return { store, platform, mapper, accountNumbers, signal: scope.shutdown };
}
