import type { Command } from 'commander';
import { UsageError } from '../lib/errors.js';
import type { SandboxOptions } from '../sandbox/index.js';
import { SANDBOX_DEFAULTS } from '../sandbox/defaults.js';
import { ID_SHAPES, isIdShapes } from '../sandbox/ids.js';
import { PERMISSIONS } from '../sandbox/keys.js';
import { AMOUNT_PROFILES, type AmountProfile } from '../sandbox/generator.js';
import { out, type CliContext } from './context.js';

function intOption(name: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (raw: string): number => {
    const n = Number(raw);
    if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new UsageError(`--${name}: expected an integer from ${min} to ${max}, got "${raw}"`);
    }
    return n;
  };
}

function ratio(name: string) {
  return (raw: string): number => {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1)
      throw new UsageError(`--${name}: expected a number from 0 to 1, got "${raw}"`);
    return n;
  };
}
const ratioOption = ratio('release-ratio');

interface SandboxFlags {
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

function amountsOption(raw: string): AmountProfile {
  if (!(AMOUNT_PROFILES as readonly string[]).includes(raw))
    throw new UsageError(`--amounts: expected one of ${AMOUNT_PROFILES.join(', ')}, got "${raw}"`);
  return raw as AmountProfile;
}

export function registerSandboxCommands(program: Command, ctx: CliContext): void {
  program
    .command('sandbox')
    .description(
      'run the Loan Platform simulator; prints {"baseUrl","apiKey","adminUrl"} as its first stdout line',
    )
    .option('--host <host>', 'address to listen on', SANDBOX_DEFAULTS.host)
    .option('--port <n>', 'port (0 = any free port)', intOption('port', 0, 65535), 0)
    .option(
      '--loans <n>',
      'number of generated loans',
      intOption('loans', 0, 100_000),
      SANDBOX_DEFAULTS.loans,
    )
    .option(
      '--seed <n>',
      'seed of the deterministic data generator',
      intOption('seed', 0, 2 ** 32 - 1),
      SANDBOX_DEFAULTS.seed,
    )
    .option(
      '--release-ratio <r>',
      'fraction of loans released to the boarding queue at start (0..1)',
      ratioOption,
    )
    .option('--window-ms <n>', 'rate-limit window in ms (default 60000)', intOption('window-ms', 100))
    .option(
      '--reads-per-window <n>',
      'read (GET) budget per key and window (default 100)',
      intOption('reads-per-window', 0),
    )
    .option(
      '--writes-per-window <n>',
      'write (POST/PATCH/DELETE) budget per key and window (default 30)',
      intOption('writes-per-window', 0),
    )
    .option(
      '--amounts <profile>',
      'generated amounts, rates and terms: realistic (small-business and personal lending) or extreme (amounts up to $900B with odd cents, odd terms)',
      amountsOption,
      SANDBOX_DEFAULTS.amounts,
    )
    .option(
      '--unmasked-key',
      'give the printed key read:businesses:ein and read:people:ssn too (full tax ids)',
    )
    .option(
      '--repeat-borrowers <share>',
      "share of loans (0..1) whose borrower is an earlier loan's (same EIN/SSN, name written differently, half under a new entity id)",
      ratio('repeat-borrowers'),
    )
    .option(
      '--customer-extract <file>',
      'write a bank customer extract (CSV cif,tin,name,birth_or_formation_date) of the borrowers, some already customers',
    )
    .option(
      '--existing-share <share>',
      'share (0..1) of distinct borrowers already in the customer extract (default 0.3)',
      ratio('existing-share'),
    )
    .option(
      '--allow-loopback-webhooks',
      'accept http://127.0.0.1 / localhost webhook endpoint URLs (local testing)',
    )
    .option(
      '--id-shapes <shapes>',
      `shapes of generated ids: ${ID_SHAPES.join(' | ')} (mixed: short prefixed ids, UUIDs, opaque ids up to 64 characters, and one in five of 101–160 characters or with / % ? # spaces and non-ASCII)`,
      SANDBOX_DEFAULTS.idShapes,
    )
    .action(async (flags: SandboxFlags) => {
      if (!isIdShapes(flags.idShapes))
        throw new UsageError(
          `--id-shapes: expected one of ${ID_SHAPES.join(', ')}, got ${JSON.stringify(flags.idShapes)}`,
        );
      const opts: SandboxOptions = {
        host: flags.host,
        port: flags.port,
        loans: flags.loans,
        seed: flags.seed,
        idShapes: flags.idShapes,
        amounts: flags.amounts,
        logger: ctx.logger(),
      };
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
      // Loaded here: other commands (sync --once…) never load the sandbox's HTTP stack.
      const { startSandbox } = await import('../sandbox/index.js');
      const sandbox = await startSandbox(opts);
      ctx.onClose(() => sandbox.close());
      out(
        ctx,
        JSON.stringify({ baseUrl: sandbox.baseUrl, apiKey: sandbox.apiKey, adminUrl: sandbox.adminUrl }),
      );
      if (ctx.shutdown.aborted) return;
      await new Promise<void>((resolve) =>
        ctx.shutdown.addEventListener('abort', () => resolve(), { once: true }),
      );
    });
}
