import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, parseDocument } from 'yaml';
import { runCliSplit, startCliInBackground, type BackgroundCli } from '../../support/cli-run.js';
import { yamlBlocks } from '../../support/doc-references.js';

/**
 * docs/core.md "Try a core locally", run as written for each core: the documented `sandbox --core`
 * command, a copy of config/example.yaml in a directory outside the repository with the docs'
 * platform edits and the core: and mappings: sections the command printed, `config check
 * --connect`, `sync --once`, then the simulator's own API (the docs' curl) lists one loan per
 * acknowledged platform loan. What the docs show as "looks like this" must have the printed keys.
 *
 * One change to "as written": a 2 s rate window (sandbox and config), so the run takes seconds.
 */
const repo = resolve(import.meta.dirname, '../../..');
const WINDOW_MS = 2000;
const doc = readFileSync(join(repo, 'docs/core.md'), 'utf8');

function section(heading: string, from = 0): string {
  const start = doc.indexOf(heading, from);
  if (start < 0) throw new Error(`docs/core.md: no "${heading}"`);
  const next = doc.slice(start + heading.length).search(/\n#{2,3} /);
  return next < 0 ? doc.slice(start) : doc.slice(start, start + heading.length + next);
}

const TRY = doc.indexOf('## Try a core locally');
const platformEdits = { environment: 'development' };

/** The arguments after `dist/main.js` of the documented command that starts with `command`. */
function documented(text: string, command: string): string[] {
  const m = new RegExp(`dist/main\\.js"? (${command} [^#\\n]*)`).exec(text);
  if (!m?.[1]) throw new Error(`docs/core.md: no \`${command}\` command in the section`);
  return m[1].trim().split(/\s+/);
}

interface Printed {
  baseUrl: string;
  apiKey: string;
  core: Record<string, unknown>;
  mappings: { dir: string };
}

function readPrinted(stdout: string): Printed {
  const [first, ...rest] = stdout.split('\n');
  const platform = JSON.parse(first as string) as { baseUrl: string; apiKey: string };
  const snippet = parse(rest.join('\n')) as { core: Record<string, unknown>; mappings: { dir: string } };
  return { ...platform, ...snippet };
}

/** The nested key paths of a YAML value (`core.http.baseUrl`, …). */
function keyPaths(v: unknown, prefix = ''): string[] {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return [prefix];
  return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) =>
    keyPaths(x, prefix === '' ? k : `${prefix}.${k}`),
  );
}

describe.each([
  { name: 'fineract', heading: '### Fineract' },
  { name: 'mambu', heading: '### Mambu' },
])('docs/core.md "Try a core locally": $name', ({ name, heading }) => {
  const text = section(heading, TRY);
  const dirs: string[] = [];
  let sandbox: BackgroundCli | null = null;
  afterAll(async () => {
    await sandbox?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('boards every released loan into the simulator, which lists one loan per board on its own API', async () => {
    const args = documented(text, 'sandbox');
    expect(args).toContain(`--core`);
    expect(args[args.indexOf('--core') + 1]).toBe(name);
    sandbox = startCliInBackground([...args, '--window-ms', String(WINDOW_MS)]);
    const printed = readPrinted(await sandbox.waitFor(/\nmappings:\n {2}dir: .+\n/));

    // What the docs show the printed sections to look like has the same keys as what was printed.
    const shown = yamlBlocks(text)
      .map((b) => parse(b.yaml) as Record<string, unknown> | null)
      .find((v) => v?.['core'] !== undefined);
    expect(shown, 'a core: block in the section').toBeDefined();
    expect(keyPaths({ core: shown!['core'], mappings: shown!['mappings'] }).sort()).toEqual(
      keyPaths({ core: printed.core, mappings: printed.mappings }).sort(),
    );

    const dir = mkdtempSync(join(tmpdir(), `try-${name}-`));
    dirs.push(dir);
    const config = parseDocument(readFileSync(join(repo, 'config/example.yaml'), 'utf8'));
    config.setIn(['platform', 'baseUrl'], printed.baseUrl);
    config.setIn(['platform', 'apiKey'], printed.apiKey);
    for (const [k, v] of Object.entries(platformEdits)) config.setIn(['platform', k], v);
    config.setIn(['platform', 'rateLimit', 'windowMs'], WINDOW_MS);
    config.set('core', config.createNode(printed.core));
    config.set('mappings', config.createNode(printed.mappings));
    writeFileSync(join(dir, 'config.yaml'), config.toString());

    const env = { LOG_LEVEL: 'silent' };
    const check = await runCliSplit(documented(text, 'config check'), { cwd: dir, env });
    expect(check.stdout, check.stderr).not.toMatch(/^FAIL/m);
    expect(check.stdout).toMatch(/^ok\s+core\s/m);
    expect(check.code, check.stdout).toBe(0);

    const syncArgs = documented(text, 'sync');
    const sync = await runCliSplit([...syncArgs, '--json'], { cwd: dir, env });
    expect(sync.error, sync.stderr).toBeNull();
    const summary = JSON.parse(sync.stdout) as {
      fatal: unknown;
      states: Record<string, number>;
      problems: Array<{ loanId: string; state: string; code: string; message: string }>;
    };
    expect(summary.fatal).toBeNull();
    expect(summary.problems).toEqual([]);
    const acknowledged = summary.states['acknowledged'] ?? 0;
    expect(acknowledged).toBeGreaterThan(10);

    // The docs' curl: the simulator's own API, with the printed credentials.
    const curl = /curl -s ((?:[^\n]*\\\n)*[^\n]*)/.exec(text)?.[1]?.replace(/\\\n\s*/g, ' ');
    expect(curl, 'a curl line in the section').toBeDefined();
    const path = /https?:\/\/[^\s/]+(\/\S+)/.exec(curl!)?.[1] as string;
    const headers: Record<string, string> = {};
    for (const m of curl!.matchAll(/-H '([^:]+): ([^']+)'/g)) headers[m[1] as string] = m[2] as string;
    const block = (printed.core['http'] ?? printed.core['mambu']) as {
      baseUrl: string;
      username?: string;
      password?: string;
      auth?: { username: string; password: string };
    };
    const auth = block.auth ?? { username: block.username as string, password: block.password as string };
    headers['authorization'] = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
    const coreUrl = new URL(block.baseUrl);
    const res = await fetch(`${coreUrl.origin}${path}`, { headers });
    expect(res.status).toBe(200);
    const body: unknown = await res.json();
    const loans = Array.isArray(body) ? body : ((body as { pageItems: unknown[] }).pageItems ?? []);
    expect(loans.length).toBe(acknowledged);
  });
});
