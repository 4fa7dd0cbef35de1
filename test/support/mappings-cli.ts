import { PassThrough } from 'node:stream';
import { systemClock } from '../../src/lib/clock.js';
import { createCliContext } from '../../src/cli/context.js';
import { buildProgram } from '../../src/cli/program.js';

/** Runs the CLI in-process without a config file (the `mappings` commands); stdout and the thrown error. */
export async function cli(args: string[]): Promise<{ out: string; error: unknown }> {
  const stdout = new PassThrough();
  const chunks: Buffer[] = [];
  stdout.on('data', (c: Buffer) => chunks.push(c));
  const { program, ctx } = buildProgram(() =>
    createCliContext({ clock: systemClock, env: { LOG_LEVEL: 'silent' }, stdout, stderr: new PassThrough(), getConfigOption: () => undefined, shutdown: new AbortController().signal }),
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
