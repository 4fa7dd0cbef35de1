import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { systemClock } from '../../src/lib/clock.js';
import { createCliContext } from '../../src/cli/context.js';
import { buildProgram } from '../../src/cli/program.js';

let configPath: string | undefined;

/**
 * A config for the `mappings` commands (every command but demo and sandbox needs one): a sandbox
 * address nothing calls and a state database in a temp dir. The mapping set comes from `--dir`.
 */
function mappingsConfig(): string {
  if (configPath !== undefined) return configPath;
  const dir = mkdtempSync(join(tmpdir(), 'mappings-cli-'));
  configPath = join(dir, 'config.yaml');
  writeFileSync(
    configPath,
    `platform: { baseUrl: "http://127.0.0.1:4010/api", apiKey: pk_test_unused, environment: development }\nstore: { path: ${JSON.stringify(join(dir, 'state.sqlite'))} }\n`,
  );
  return configPath;
}

/** Runs the CLI in-process with a minimal config (the `mappings` commands); stdout and the thrown error. */
export async function cli(args: string[]): Promise<{ out: string; error: unknown }> {
  const stdout = new PassThrough();
  const chunks: Buffer[] = [];
  stdout.on('data', (c: Buffer) => chunks.push(c));
  const { program, ctx } = buildProgram(() =>
    createCliContext({
      clock: systemClock,
      env: { LOG_LEVEL: 'silent' },
      stdout,
      stderr: new PassThrough(),
      getConfigOption: () => mappingsConfig(),
      shutdown: new AbortController().signal,
    }),
  );
  program.exitOverride();
  let error: unknown;
  try {
    await program.parseAsync(['node', 'boarding-connector', ...args]);
  } catch (err) {
    error = err;
  } finally {
    await ctx.close();
  }
  return { out: Buffer.concat(chunks).toString('utf8'), error };
}
