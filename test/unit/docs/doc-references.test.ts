import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { checkCommands, checkPaths, createdPaths, type DocProblem } from '../../support/doc-references.js';

const repo = resolve(import.meta.dirname, '../../..');

function program() {
  return buildProgram(() => createCliContext({ env: {}, stdout: new PassThrough(), stderr: new PassThrough(), getConfigOption: () => undefined, shutdown: new AbortController().signal })).program;
}

function docs(): Array<{ file: string; text: string }> {
  const files = ['README.md', ...readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  return files.map((file) => ({ file, text: readFileSync(join(repo, file), 'utf8') }));
}

const show = (ps: DocProblem[]): string[] => ps.map((p) => `${p.file}:${p.line}: ${p.message}`);

describe('README.md and docs/*.md name only what exists', () => {
  it('every repository path they name exists', () => {
    const all = docs();
    const made = createdPaths(all.map((d) => d.text));
    expect(show(all.flatMap(({ file, text }) => checkPaths(file, text, repo, made)))).toEqual([]);
  });

  it('every CLI command and flag they name exists in the commander program', () => {
    const p = program();
    expect(show(docs().flatMap(({ file, text }) => checkCommands(file, text, p)))).toEqual([]);
  });

  it('they do name commands and paths (the check sees them)', () => {
    const all = docs().map((d) => d.text).join('\n');
    expect(all).toMatch(/boarding-connector mappings lint/);
    expect(all).toMatch(/src\/store\/loan-states\.ts/);
  });
});

describe('the check itself fails on what does not exist', () => {
  const p = program();
  const md = (s: string): DocProblem[] => checkCommands('x.md', s, p);

  it('an unknown flag, in every form the docs use', () => {
    expect(md('```sh\nboarding-connector sync --once --no-such-flag\n```')).toHaveLength(1);
    expect(md('run `node dist/main.js loans list --state quarantined --colour`')).toHaveLength(1);
    expect(md('`npx tsx src/main.ts config check --connectt`')).toHaveLength(1);
    expect(md('| `loans retry ID… \\| --all [--reason R] [--sinse T]` | x |')).toHaveLength(1);
    expect(md('then `sync --dry-run --againts old`')).toHaveLength(1);
    expect(md('    boarding-connector mappings test --dir mappings/generic --updat')).toHaveLength(1);
  });

  it('an unknown command or subcommand', () => {
    expect(md('`boarding-connector loans lst`')[0]?.message).toMatch(/loans lst`: no such command/);
    expect(md('`boarding-connector frobnicate`')).toHaveLength(1);
    expect(md('`platform strikes reset --reason x`')).toHaveLength(1);
  });

  it('accepts what exists: options of the command, the global --config, values and placeholders', () => {
    expect(md('```sh\nnode dist/main.js run --config /etc/boarding/config.yaml   # the daemon\nboarding-connector loans retry ln_123 [--by alice]\n```')).toEqual([]);
    expect(md('`node dist/main.js <command> [--config FILE]` and `webhooks register --url URL [--events E...]`')).toEqual([]);
    expect(md('`state = quarantined` and `run` and `sync`')).toEqual([]);
    expect(md('```ini\nDescription=boarding-connector (Loan Platform)\nExecStart=/usr/bin/node /opt/boarding-connector/dist/main.js run\n```')).toEqual([]);
  });

  it('a path that does not exist, also before a placeholder', () => {
    expect(checkPaths('x.md', 'see `src/cli/wiring.ts` and ./bench/none.ts and src/boarding/nothing/<x>.ts', repo).map((x) => x.message)).toEqual([
      'path src/cli/wiring.ts does not exist',
      'path ./bench/none.ts does not exist (checked bench/none.ts)',
      'path src/boarding/nothing/<x>.ts does not exist (checked src/boarding/nothing)',
    ]);
    expect(checkPaths('x.md', 'src/cli/run.ts, mappings/generic/fixtures/<case>/input.json, https://x.example/docs/none', repo)).toEqual([]);
    // A set the docs tell the reader to make may be named; one they do not is an error.
    const made = createdPaths(['```sh\ncp -r mappings/generic mappings/mybank\n```']);
    expect(checkPaths('x.md', 'lint mappings/mybank/mapping.yaml:61:25, then mappings/other', repo, made).map((x) => x.message)).toEqual(['path mappings/other does not exist']);
  });
});
