import type { Command } from 'commander';
import { stringify } from 'yaml';
import { UsageError } from '../lib/errors.js';
import {
  AMOUNT_PROFILES,
  CORE_SIMULATORS,
  ID_SHAPES,
  SANDBOX_DEFAULTS,
  startSandboxFromFlags,
  type AmountProfile,
  type SandboxFlags,
} from '../app/sandbox.js';
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
      'generated amounts, rates and terms: realistic (small-business and personal lending) or extreme (amounts ' +
        'up to $900B with odd cents, odd terms)',
      amountsOption,
      SANDBOX_DEFAULTS.amounts,
    )
    .option(
      '--unmasked-key',
      'give the printed key read:businesses:ein and read:people:ssn too (full tax ids)',
    )
    .option(
      '--repeat-borrowers <share>',
      "share of loans (0..1) whose borrower is an earlier loan's (same EIN/SSN, name written differently, half " +
        'under a new entity id)',
      ratio('repeat-borrowers'),
    )
    .option(
      '--customer-extract <file>',
      'write a bank customer extract (CSV cif,tin,name,birth_or_formation_date) ' +
        'of the borrowers, some already customers',
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
      `shapes of generated ids: ${ID_SHAPES.join(' | ')} (mixed: short prefixed ids, UUIDs, opaque ids up to 64 ` +
        `characters, and one in five of 101–160 characters or with / % ? # spaces and non-ASCII)`,
      SANDBOX_DEFAULTS.idShapes,
    )
    .option(
      '--core <name>',
      `also run a core simulator held to its vendor's published contract: ${CORE_SIMULATORS.join(' | ')}; ` +
        'prints the core: and mappings: sections to paste after the first line',
    )
    .option(
      '--core-port <n>',
      'port of the core simulator (0 = any free port)',
      intOption('core-port', 0, 65535),
    )
    .action(async (flags: SandboxFlags) => {
      const sandbox = await startSandboxFromFlags(flags, ctx.logger());
      ctx.onClose(() => sandbox.close());
      const { baseUrl, apiKey, adminUrl } = sandbox;
      out(ctx, JSON.stringify({ baseUrl, apiKey, adminUrl }));
      if (sandbox.core) out(ctx, coreConfigSnippet(sandbox.core));
      if (ctx.shutdown.aborted) return;
      await new Promise<void>((resolve) =>
        ctx.shutdown.addEventListener('abort', () => resolve(), { once: true }),
      );
    });
}

/**
 * What `sandbox --core` prints after its first line: the `core:` and `mappings:` sections to paste
 * into a config (docs/core.md "Try it locally"), as YAML with a comment saying what runs where.
 */
function coreConfigSnippet(core: {
  name: string;
  url: string;
  mappingsDir: string;
  coreBlock(): unknown;
}): string {
  const vendor = core.name === 'fineract' ? 'Apache Fineract' : 'Mambu (API v2)';
  return [
    `# core simulator: ${vendor} at ${core.url}, held to its published contract`,
    '# paste into your config, in place of its core: and mappings: sections',
    stringify({ core: core.coreBlock(), mappings: { dir: core.mappingsDir } }, { lineWidth: 0 }).trimEnd(),
  ].join('\n');
}
