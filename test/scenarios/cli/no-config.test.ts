import { spawnSync } from 'node:child_process';
import { systemClock } from '../../../src/lib/clock.js';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PassThrough } from 'node:stream';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  COMMANDS_WITHOUT_CONFIG,
  SUBCOMMANDS_WITHOUT_CONFIG,
  createCliContext,
} from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { UsageError } from '../../../src/lib/errors.js';

function leaves(cmd: Command, path: string[] = []): Array<{ path: string[]; cmd: Command }> {
  if (cmd.commands.length === 0) return [{ path, cmd }];
  return cmd.commands.flatMap((c) => leaves(c, [...path, c.name()]));
}

/** Arguments and mandatory options with a placeholder value, so only the config can be missing. */
function argsFor(cmd: Command): string[] {
  const args = cmd.registeredArguments.filter((a) => a.required).map(() => 'x');
  for (const o of cmd.options) if (o.mandatory) args.push(o.long as string, '1');
  return args;
}

const repo = resolve(import.meta.dirname, '../../..');

describe('no silent demo defaults', () => {
  it('every command but demo and sandbox refuses to run without --config or BOARDING_CONFIG (exit 2, says how); mappings lint/test only when no --dir names the set', async () => {
    const { program: shape } = buildProgram(() =>
      createCliContext({
        clock: systemClock,
        env: {},
        stdout: new PassThrough(),
        stderr: new PassThrough(),
        getConfigOption: () => undefined,
        shutdown: new AbortController().signal,
      }),
    );
    const all = leaves(shape);
    expect(all.length).toBeGreaterThan(20);
    const checked: string[] = [];
    for (const { path, cmd } of all) {
      if (COMMANDS_WITHOUT_CONFIG.has(path[0] as string)) continue;
      // These read only the files on their command line; lint and test without --dir still need mappings.dir from a config.
      if (SUBCOMMANDS_WITHOUT_CONFIG.has(path.join(' ')) && path[0] !== 'mappings') continue;
      if (path.join(' ') === 'mappings schema') continue;
      const { program, ctx } = buildProgram((p) =>
        createCliContext({
          clock: systemClock,
          env: {},
          stdout: new PassThrough(),
          stderr: new PassThrough(),
          getConfigOption: () => p.opts<{ config?: string }>().config,
          shutdown: new AbortController().signal,
        }),
      );
      program.exitOverride();
      program.configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
      const err = await program.parseAsync(['node', 'boarding-connector', ...path, ...argsFor(cmd)]).then(
        () => null,
        (e: unknown) => e,
      );
      await ctx.close();
      expect(err, path.join(' ')).toBeInstanceOf(UsageError);
      expect((err as Error).message).toContain('--config FILE');
      expect((err as Error).message).toContain('BOARDING_CONFIG');
      expect((err as Error).message).toContain('config/example.yaml');
      checked.push(path.join(' '));
    }
    expect(checked).toEqual(
      expect.arrayContaining([
        'sync',
        'run',
        'loans list',
        'config check',
        'mappings lint',
        'mappings test',
        'platform status',
      ]),
    );
  });

  it('mappings lint and test --dir work without a config (a bank engineer editing a set; CI lints the shipped sets so)', async () => {
    for (const sub of ['lint', 'test']) {
      const stdout = new PassThrough();
      let text = '';
      stdout.on('data', (c: Buffer) => (text += c.toString()));
      const { program, ctx } = buildProgram((p) =>
        createCliContext({
          clock: systemClock,
          env: { LOG_LEVEL: 'silent' },
          stdout,
          stderr: new PassThrough(),
          getConfigOption: () => p.opts<{ config?: string }>().config,
          shutdown: new AbortController().signal,
        }),
      );
      program.exitOverride();
      await program.parseAsync([
        'node',
        'boarding-connector',
        'mappings',
        sub,
        '--dir',
        join(repo, 'mappings/generic'),
      ]);
      await ctx.close();
      expect(text, sub).toMatch(/generic/);
    }
  });

  it('regression: `loans list` created ./var/state.sqlite and `sync --once` went to 127.0.0.1:4010 and exited 0', () => {
    const cwd = mkdtempSync(join(tmpdir(), 'no-config-'));
    for (const args of [
      ['loans', 'list'],
      ['sync', '--once'],
    ]) {
      const r = spawnSync(
        process.execPath,
        [
          '--import',
          pathToFileURL(join(repo, 'node_modules/tsx/dist/loader.mjs')).href,
          join(repo, 'src/main.ts'),
          ...args,
        ],
        { cwd, encoding: 'utf8', env: { ...process.env, BOARDING_CONFIG: '' }, timeout: 60_000 },
      );
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/no config given: pass --config FILE or set BOARDING_CONFIG=FILE/);
      expect(r.stderr).toContain('config/example.yaml');
    }
    expect(readdirSync(cwd)).toEqual([]);
    expect(existsSync(join(cwd, 'var'))).toBe(false);
  });
});
