import { UsageError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import type { SandboxOptions } from '../sandbox/index.js';
import { SANDBOX_DEFAULTS } from '../sandbox/defaults.js';
import { ID_SHAPES, isIdShapes } from '../sandbox/ids.js';
import { PERMISSIONS } from '../sandbox/keys.js';
import { AMOUNT_PROFILES, type AmountProfile } from '../sandbox/generator.js';

export { SANDBOX_DEFAULTS, ID_SHAPES, AMOUNT_PROFILES, type AmountProfile };

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

/** Starts the Loan Platform simulator; its URLs and key. Loaded on demand: other commands never load its HTTP stack. */
export async function startSandboxFromFlags(
  flags: SandboxFlags,
  logger: Logger,
): Promise<{ baseUrl: string; apiKey: string; adminUrl: string; close(): Promise<void> }> {
  const opts = sandboxOptions(flags, logger);
  const { startSandbox } = await import('../sandbox/index.js');
  return startSandbox(opts);
}
