import { UsageError } from '../lib/errors.js';
import { CORE_SIMULATORS, isCoreSimulatorName, type RunningCoreSimulator } from '../sandbox/cores/index.js';
import type { Logger } from '../lib/logger.js';
import type { SandboxOptions } from '../sandbox/index.js';
import { SANDBOX_DEFAULTS } from '../sandbox/defaults.js';
import { ID_SHAPES, isIdShapes } from '../sandbox/ids.js';
import { PERMISSIONS } from '../sandbox/keys.js';
import { AMOUNT_PROFILES, type AmountProfile } from '../sandbox/generator.js';

export { SANDBOX_DEFAULTS, ID_SHAPES, AMOUNT_PROFILES, CORE_SIMULATORS, type AmountProfile };

/** The `sandbox` command's flags, as parsed. */
export interface SandboxFlags {
  host: string;
  port: number;
  loans: number;
  seed: number;
  releaseRatio?: number;
  windowMs?: number;
  readsPerWindow?: number;
  writesPerWindow?: number;
  allowLoopbackWebhooks?: boolean;
  unmaskedKey?: boolean;
  idShapes: string;
  repeatBorrowers?: number;
  customerExtract?: string;
  existingShare?: number;
  amounts: AmountProfile;
  /** A core simulator to start beside the platform (`--core fineract|mambu`). */
  core?: string;
  corePort?: number;
}

/** The simulator's options from the command's flags; a UsageError naming the flag that does not fit. */
export function sandboxOptions(flags: SandboxFlags, logger: Logger): SandboxOptions {
  if (!isIdShapes(flags.idShapes))
    throw new UsageError(
      `--id-shapes: expected one of ${ID_SHAPES.join(', ')}, got ${JSON.stringify(flags.idShapes)}`,
    );
  const { host, port, loans, seed, amounts } = flags;
  const opts: SandboxOptions = { host, port, loans, seed, idShapes: flags.idShapes, amounts, logger };
  if (flags.releaseRatio !== undefined) opts.releaseRatio = flags.releaseRatio;
  if (flags.windowMs !== undefined) opts.windowMs = flags.windowMs;
  if (flags.readsPerWindow !== undefined) opts.readsPerWindow = flags.readsPerWindow;
  if (flags.writesPerWindow !== undefined) opts.writesPerWindow = flags.writesPerWindow;
  if (flags.allowLoopbackWebhooks) opts.allowLoopbackWebhooks = true;
  if (flags.unmaskedKey) opts.apiKeyPermissions = [...PERMISSIONS];
  if (flags.repeatBorrowers !== undefined) opts.repeatBorrowers = flags.repeatBorrowers;
  if (flags.existingShare !== undefined && flags.customerExtract === undefined)
    throw new UsageError('--existing-share: needs --customer-extract FILE');
  if (flags.customerExtract !== undefined)
    opts.customerExtract = { path: flags.customerExtract, existingShare: flags.existingShare ?? 0.3 };
  return opts;
}

export interface RunningSandbox {
  baseUrl: string;
  apiKey: string;
  adminUrl: string;
  /** The core simulator started with `--core`, if any. */
  core: RunningCoreSimulator | null;
  close(): Promise<void>;
}

/**
 * Starts the Loan Platform simulator (and the core simulator `--core` names); its URLs and key.
 * Loaded on demand: other commands never load its HTTP stack.
 */
export async function startSandboxFromFlags(flags: SandboxFlags, logger: Logger): Promise<RunningSandbox> {
  const opts = sandboxOptions(flags, logger);
  if (flags.core !== undefined && !isCoreSimulatorName(flags.core))
    throw new UsageError(
      `--core: expected one of ${CORE_SIMULATORS.join(', ')}, got ${JSON.stringify(flags.core)}`,
    );
  if (flags.corePort !== undefined && flags.core === undefined)
    throw new UsageError('--core-port: needs --core fineract|mambu');
  const [{ startSandbox }, cores] = await Promise.all([
    import('../sandbox/index.js'),
    import('../sandbox/cores/index.js'),
  ]);
  const sandbox = await startSandbox(opts);
  let core: RunningCoreSimulator | null = null;
  try {
    if (flags.core !== undefined && isCoreSimulatorName(flags.core))
      core = await cores.startCoreSimulator(flags.core, { host: flags.host, port: flags.corePort ?? 0 });
  } catch (err) {
    await sandbox.close();
    throw err;
  }
  return {
    baseUrl: sandbox.baseUrl,
    apiKey: sandbox.apiKey,
    adminUrl: sandbox.adminUrl,
    core,
    close: async () => {
      await core?.close();
      await sandbox.close();
    },
  };
}
