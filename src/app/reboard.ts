import { CONNECTOR_VERSION } from '../version.js';
import type { ReboardDeps, ReboardPreviewDeps } from '../ops/reboard.js';
import type { PlatformClient } from '../platform/client.js';
import { accountNumbersFromConfig } from '../identity/account-numbers.js';
import { buildRuntime, loadMapperFromConfig, type BoardingRuntime } from './runtime.js';
import { openPlatformSession, type CommandScope } from './session.js';

/**
 * What a re-board and its preview run with, from a runtime: the one wiring of `loans reboard`
 * (the CLI builds a runtime for it) and of the console's re-board requests and checks (the daemon's).
 */
export function reboardDeps(rt: BoardingRuntime): ReboardDeps {
  return {
    store: rt.store,
    platform: rt.platform,
    mapper: rt.mapper,
    core: rt.core,
    fetchDocument: rt.fetchDocument,
    clock: rt.clock,
    logger: rt.logger,
    connectorVersion: CONNECTOR_VERSION,
    accountNumbers: rt.accountNumbers,
  };
}

export function reboardPreviewDeps(
  rt: Pick<BoardingRuntime, 'store' | 'platform' | 'mapper' | 'accountNumbers'>,
): ReboardPreviewDeps {
  return { store: rt.store, platform: rt.platform, mapper: rt.mapper, accountNumbers: rt.accountNumbers };
}

/**
 * `loans reboard --dry-run`: the mapping on disk, the state database and a platform client (the
 * rate budget), and account numbers as the re-board would map them (never allocated here); no core.
 */
export async function openReboardPreview(
  scope: CommandScope,
): Promise<ReboardPreviewDeps & { platform: PlatformClient }> {
  const mapper = await loadMapperFromConfig(scope.config());
  const { store, platform } = await openPlatformSession(scope);
  const accountNumbers = accountNumbersFromConfig(scope.config(), store, scope.logger());
  return { store, platform, mapper, accountNumbers };
}

/** `loans reboard`: the whole runtime (the core is written), closed when the command ends. */
export async function openReboard(scope: CommandScope): Promise<{ rt: BoardingRuntime; deps: ReboardDeps }> {
  const rt = await buildRuntime(scope.config(), scope.logger(), { clock: scope.clock });
  scope.onClose(() => rt.close());
  return { rt, deps: reboardDeps(rt) };
}
