import { CONNECTOR_VERSION } from '../version.js';
import type { ReboardDeps, ReboardPreview, ReboardPreviewDeps, ReboardResult } from '../ops/reboard.js';
import {
  assertReboardMapping,
  countOutcomes,
  previewReboards,
  reboardLoans,
  reboardTargets,
} from '../ops/reboard-run.js';
import type { PlatformClient } from '../platform/client.js';
import type { PlatformApi } from '../platform/api.js';
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

export interface ReboardRunHooks<R> {
  /** Asked before anything changes, with the loans and what will happen: resolves to go on, throws to stop. */
  confirm: (targets: readonly string[], action: string) => Promise<void>;
  /** The platform client, once it exists (e.g. to show its rate-budget waits). */
  platform?: (platform: Pick<PlatformApi, 'onWait'>) => void;
  /** Before loan i of n. */
  before?: (loanId: string, i: number, n: number) => void;
  /** One loan's outcome, as data (the CLI renders it). */
  loan?: (r: R) => void;
  signal: AbortSignal;
}

/** `loans reboard` (not --dry-run): the runtime, the mapping check, confirmation, the re-writes. */
export async function runReboard(
  scope: CommandScope,
  input: {
    ids: readonly string[];
    mappingVersion?: string | undefined;
    actor: string;
    reason: string;
    force: boolean;
  },
  hooks: ReboardRunHooks<ReboardResult>,
) {
  const { rt, deps } = await openReboard(scope);
  const command = 'loans reboard';
  const mappingDir = rt.config.mappings.dir;
  await assertReboardMapping(deps, { command, mappingDir });
  const targets = await reboardTargets(rt.store, {
    ids: [...input.ids],
    mappingVersion: input.mappingVersion,
  });
  const action = `re-write ${targets.length} loans in the core with mapping ${rt.mapper.version}`;
  await hooks.confirm(targets, action);
  hooks.platform?.(rt.platform);
  const results = await reboardLoans(deps, {
    actor: input.actor,
    reason: input.reason,
    force: input.force,
    command,
    mappingDir,
    ids: targets,
    signal: hooks.signal,
    beforeLoan: (id, i) => hooks.before?.(id, i, targets.length),
    onLoan: (r) => hooks.loan?.(r),
  });
  return { results, targets: targets.length, version: rt.mapper.version };
}

/**
 * `loans reboard --dry-run`: reads (state database, platform within the rate budget) and maps
 * only; no core is opened, nothing is written, no state or audit event changes.
 */
export async function runReboardPreview(
  scope: CommandScope,
  input: { ids: readonly string[]; mappingVersion?: string | undefined; force: boolean },
  hooks: Omit<ReboardRunHooks<ReboardPreview>, 'confirm'>,
) {
  const deps = await openReboardPreview(scope);
  const targets = await reboardTargets(deps.store, {
    ids: [...input.ids],
    mappingVersion: input.mappingVersion,
  });
  hooks.platform?.(deps.platform);
  const results = await previewReboards(deps, {
    ids: targets,
    force: input.force,
    signal: hooks.signal,
    beforeLoan: (id, i) => hooks.before?.(id, i, targets.length),
    onLoan: (r) => hooks.loan?.(r),
  });
  return {
    results,
    targets: targets.length,
    version: deps.mapper.version,
    unreadable: countOutcomes(results)['failed'] ?? 0,
  };
}
