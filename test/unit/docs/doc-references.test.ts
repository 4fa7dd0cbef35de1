import { readdirSync, readFileSync } from 'node:fs';
import { systemClock } from '../../../src/lib/clock.js';
import { join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createCliContext } from '../../../src/cli/context.js';
import { buildProgram } from '../../../src/cli/program.js';
import { parse } from 'yaml';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/lib/errors.js';
import { checkCommandPrefix, checkCommands, checkPaths, CONFIG_SECTIONS, createdPaths, yamlBlocks, type DocProblem } from '../../support/doc-references.js';

const repo = resolve(import.meta.dirname, '../../..');

function program() {
  return buildProgram(() => createCliContext({ clock: systemClock, env: {}, stdout: new PassThrough(), stderr: new PassThrough(), getConfigOption: () => undefined, shutdown: new AbortController().signal })).program;
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

  it('every command line uses the name that works after the README install (node dist/main.js), and that entry exists', () => {
    const p = program();
    expect(show(docs().flatMap(({ file, text }) => checkCommandPrefix(file, text, p)))).toEqual([]);
    expect(JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')).bin).toEqual({ 'boarding-connector': 'dist/main.js' });
    expect(readFileSync(join(repo, 'tsconfig.build.json'), 'utf8')).toMatch(/src/);
    // The check sees a bare name in a fence and inline, and leaves the product's name in prose alone.
    expect(checkCommandPrefix('x.md', '```sh\nboarding-connector console passwd < pw\n```', p)).toHaveLength(1);
    expect(checkCommandPrefix('x.md', 'run `boarding-connector run` on the host', p)).toHaveLength(1);
    expect(checkCommandPrefix('x.md', '`node dist/main.js console passwd`, boarding-connector runs, `boarding-connector:0.1.0 run`', p)).toEqual([]);
  });

  it('they do name commands and paths (the check sees them)', () => {
    const all = docs().map((d) => d.text).join('\n');
    expect(all).toMatch(/node dist\/main\.js mappings lint/);
    expect(all).toMatch(/src\/store\/loan-states\.ts/);
  });
});

/** A value the docs elide (`pk_test_…`, `"scrypt$…"`, `"…"`) stands for a real one of its key's shape. */
const PLACEHOLDER_VALUE = /…|\.\.\.$/;
const HASH = `scrypt$ln=17,r=8,p=1$${'A'.repeat(22)}$${'B'.repeat(43)}`;

/** A docs config block made loadable: elided secrets filled in, and a platform section when it shows none. */
function filledConfig(block: Record<string, unknown>): Record<string, unknown> {
  const c = structuredClone(block);
  const platform = (c['platform'] ??= { baseUrl: 'https://lender.example.com/api', environment: 'staging' }) as Record<string, unknown>;
  const live = platform['environment'] === 'production';
  if (platform['apiKey'] === undefined || (typeof platform['apiKey'] === 'string' && PLACEHOLDER_VALUE.test(platform['apiKey']))) platform['apiKey'] = live ? 'pk_live_docs' : 'pk_test_docs';
  const users = (c['console'] as { users?: Array<Record<string, unknown>> } | undefined)?.users;
  for (const u of users ?? []) if (typeof u['passwordHash'] === 'string' && PLACEHOLDER_VALUE.test(u['passwordHash'])) u['passwordHash'] = HASH;
  const customers = c['customers'] as Record<string, unknown> | undefined;
  if (typeof customers?.['tinHashKey'] === 'string' && PLACEHOLDER_VALUE.test(customers['tinHashKey'])) customers['tinHashKey'] = 'docs-example-key-0123456789';
  return c;
}

/** Every fenced YAML block made of config sections, loaded by the real loader; a problem per block that does not load. */
function checkConfigBlocks(file: string, text: string): DocProblem[] {
  const problems: DocProblem[] = [];
  for (const b of yamlBlocks(text)) {
    let value: unknown;
    try {
      value = parse(b.yaml);
    } catch (err) {
      const first = b.yaml.split('\n').find((l) => l.trim() !== '' && !l.trim().startsWith('#')) ?? '';
      if (CONFIG_SECTIONS.has(first.split(':')[0]?.trim() ?? '')) problems.push({ file, line: b.line, message: `config block is not YAML: ${(err as Error).message.split('\n')[0]}` });
      continue;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) continue;
    const keys = Object.keys(value);
    if (keys.length === 0 || !keys.every((k) => CONFIG_SECTIONS.has(k))) continue;
    try {
      // The tax-id hash key is a secret the docs give through BOARDING_TIN_HASH_KEY, like the API key.
      loadConfig({ env: { BOARDING_TIN_HASH_KEY: 'docs-check-tin-hash-key-0123456789' }, fileText: JSON.stringify(filledConfig(value as Record<string, unknown>)), cwd: repo });
    } catch (err) {
      const detail = err instanceof ConfigError ? err.problems.join('; ') : (err as Error).message;
      problems.push({ file, line: b.line, message: `config block does not parse with the config schema: ${detail}` });
    }
  }
  return problems;
}

describe('every config block in README.md and docs/*.md parses with the config schema', () => {
  it('each one loads (elided secrets filled in, a platform section added where the block shows none)', () => {
    const all = docs();
    const checked = all.flatMap(({ text }) => yamlBlocks(text)).length;
    expect(checked).toBeGreaterThan(10);
    expect(show(all.flatMap(({ file, text }) => checkConfigBlocks(file, text)))).toEqual([]);
    // config/example.yaml too, as shipped.
    expect(checkConfigBlocks('config/example.yaml', `\`\`\`yaml\n${readFileSync(join(repo, 'config/example.yaml'), 'utf8')}\n\`\`\``)).toEqual([]);
  });

  it('the check fails on a block the schema refuses, and leaves mapping-set YAML alone', () => {
    expect(checkConfigBlocks('x.md', '```yaml\nstore: { engine: postgress }\n```')[0]?.message).toMatch(/store\.engine: expected one of sqlite, postgres/);
    expect(checkConfigBlocks('x.md', '   ```yaml\n   webhooks:\n     prot: 8080\n   ```')[0]?.message).toMatch(/webhooks\.prot: unknown key/);
    expect(checkConfigBlocks('x.md', '```yaml\nlookups:\n  x: { values: { a: b } }\n```')).toEqual([]);
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
    expect(checkPaths('x.md', 'see `src/cli/wiring.ts` and ./bench/none.ts and src/pipeline/nothing/<x>.ts', repo).map((x) => x.message)).toEqual([
      'path src/cli/wiring.ts does not exist',
      'path ./bench/none.ts does not exist (checked bench/none.ts)',
      'path src/pipeline/nothing/<x>.ts does not exist (checked src/pipeline/nothing)',
    ]);
    expect(checkPaths('x.md', 'src/cli/run.ts, mappings/generic/fixtures/<case>/input.json, https://x.example/docs/none', repo)).toEqual([]);
    // A set the docs tell the reader to make may be named; one they do not is an error.
    const made = createdPaths(['```sh\ncp -r mappings/generic mappings/mybank\n```']);
    expect(checkPaths('x.md', 'lint mappings/mybank/mapping.yaml:61:25, then mappings/other', repo, made).map((x) => x.message)).toEqual(['path mappings/other does not exist']);
  });
});
