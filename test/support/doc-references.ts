import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Command, Option } from 'commander';

/**
 * What README.md and docs/*.md name must exist: repository paths (src/…, test/…, mappings/…,
 * config/…, scripts/…, bench/…, docs/…, docker/…) and CLI commands and flags
 * (`boarding-connector X Y --flag`, `node dist/main.js …`, `npx tsx src/main.ts …`, and inline
 * code that starts with a command name, like `loans retry --all`). Commands and flags are looked
 * up in the commander program itself, not in the source text.
 */
export interface DocProblem {
  file: string;
  line: number;
  message: string;
}

const PATH_ROOTS = ['src', 'test', 'mappings', 'config', 'scripts', 'bench', 'docs', 'docker'];
const PATH_RE = new RegExp(
  `(?<![\\w./:~$@-])(?:\\./)?(?:${PATH_ROOTS.join('|')})/[^\\s\`'"()\\[\\],;|]*`,
  'g',
);
/** A segment with one of these is a placeholder or a pattern: only what comes before it is checked. */
const PLACEHOLDER = /[<>{}*…$]|\.\.\./;

/** The part of a path token that must exist: up to the first placeholder segment, trailing punctuation off. */
export function concretePath(token: string): string {
  // `mapping.yaml:61:25` (file:line:column) names the file.
  let t = token
    .replace(/^\.\//, '')
    .replace(/#.*$/, '')
    .replace(/(:\d+)+$/, '')
    .replace(/[.:,;!?]+$/, '');
  const segs = t.split('/');
  const cut = segs.findIndex((s) => PLACEHOLDER.test(s));
  if (cut >= 0) t = segs.slice(0, cut).join('/');
  return t.replace(/\/+$/, '');
}

/**
 * Paths the docs themselves tell the reader to make (`cp -r mappings/generic mappings/mybank`,
 * `mkdir -p X`): they may be named afterwards, in any of the files.
 */
export function createdPaths(texts: readonly string[]): Set<string> {
  const made = new Set<string>();
  for (const text of texts) {
    for (const { code } of codeSnippets(text)) {
      for (const m of code.matchAll(/\b(?:cp\s+-[a-zA-Z]*r[a-zA-Z]*\s+\S+|mkdir\s+(?:-p\s+)?)\s*(\S+)/g))
        made.add(m[1]!.replace(/\/+$/, ''));
    }
  }
  return made;
}

export function checkPaths(
  file: string,
  text: string,
  repo: string,
  made: ReadonlySet<string> = new Set(),
): DocProblem[] {
  const problems: DocProblem[] = [];
  const isMade = (p: string): boolean => [...made].some((m) => p === m || p.startsWith(`${m}/`));
  text.split('\n').forEach((line, i) => {
    for (const m of line.matchAll(PATH_RE)) {
      const path = concretePath(m[0]);
      if (path === '' || !path.includes('/')) {
        // `src/` alone or a root followed by a placeholder: the root must exist.
        if (!existsSync(join(repo, path || m[0].split('/')[0]!)))
          problems.push({ file, line: i + 1, message: `path ${m[0]} does not exist` });
        continue;
      }
      if (!existsSync(join(repo, path)) && !isMade(path))
        problems.push({
          file,
          line: i + 1,
          message: `path ${m[0]} does not exist${path !== m[0] ? ` (checked ${path})` : ''}`,
        });
    }
  });
  return problems;
}

/** Code in a markdown file, line by line: fenced blocks, 4-space indented lines, inline spans. */
export function codeSnippets(text: string): Array<{ line: number; code: string; inline: boolean }> {
  const out: Array<{ line: number; code: string; inline: boolean }> = [];
  let fenced = false;
  text.split('\n').forEach((raw, i) => {
    if (/^\s*(```|~~~)/.test(raw)) {
      fenced = !fenced;
      return;
    }
    if (fenced) {
      out.push({ line: i + 1, code: raw, inline: false });
      return;
    }
    if (/^ {4,}\S/.test(raw)) out.push({ line: i + 1, code: raw, inline: false });
    for (const m of raw.matchAll(/(`+)([^`]+?)\1/g)) out.push({ line: i + 1, code: m[2]!, inline: true });
  });
  return out;
}

const PREFIXES = [
  /(?<![\w=/.-])boarding-connector\s+/g,
  /(?<![\w=/.-])node\s+(?:\S*\/)?dist\/main\.js\s+/g,
  /(?<![\w=/.-])npx\s+tsx\s+(?:\S*\/)?src\/main\.ts\s+/g,
];

/** The words of one invocation: up to a shell operator or comment; markdown escapes and brackets off. */
export function invocationTokens(rest: string, inline: boolean): string[] {
  let s = rest.replace(/\\\|/g, ' ');
  const end = s.search(inline ? /\s#\s|&&|;|\s>\s|\s2>/ : /\s#|&&|\|\||\s\|\s|;|\s>\s|\s2>/);
  if (end >= 0) s = s.slice(0, end);
  return s
    .split(/\s+/)
    .map((t) => t.replace(/^[[(]+|[\])]+$/g, '').replace(/[.,]$/, ''))
    .filter((t) => t !== '' && t !== '|' && t !== '\\');
}

function optionNamed(cmd: Command, flag: string): Option | undefined {
  return cmd.options.find((o) => o.long === flag || o.short === flag);
}

function isPlaceholder(t: string): boolean {
  return PLACEHOLDER.test(t) || /^[A-Z][A-Z0-9_]*$/.test(t) || /^'.*'$|^".*"$/.test(t);
}

/**
 * Walks the tokens through the program: subcommand names must exist while the command has
 * subcommands; every flag must be an option of the command reached (or of the program: --config,
 * --help, --version). Positional values are not checked.
 */
export function checkInvocation(program: Command, tokens: readonly string[]): string | null {
  let cmd = program;
  const path: string[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.startsWith('-') && t.length > 1 && !/^-\d/.test(t)) {
      const flag = t.split('=')[0]!;
      if (flag === '--help' || flag === '-h') continue;
      const own = optionNamed(cmd, flag);
      const opt = own ?? optionNamed(program, flag);
      if (!opt) return `\`${[...path].join(' ') || 'boarding-connector'}\` has no option ${flag}`;
      if ((opt.required || opt.optional) && !t.includes('=')) {
        i += 1;
        if (opt.variadic) while (i + 1 < tokens.length && !tokens[i + 1]!.startsWith('-')) i += 1;
      }
      continue;
    }
    if (cmd.commands.length > 0) {
      if (isPlaceholder(t)) return null;
      const sub = cmd.commands.find((c) => c.name() === t || c.aliases().includes(t));
      if (!sub)
        return `\`${[...path, t].join(' ')}\`: no such command (${path.length === 0 ? 'commands' : `subcommands of ${path.join(' ')}`}: ${cmd.commands.map((c) => c.name()).join(', ')})`;
      cmd = sub;
      path.push(t);
    }
  }
  return null;
}

export function checkCommands(file: string, text: string, program: Command): DocProblem[] {
  const problems: DocProblem[] = [];
  const topLevel = new Set(program.commands.map((c) => c.name()));
  for (const { line, code, inline } of codeSnippets(text)) {
    let found = false;
    for (const re of PREFIXES) {
      for (const m of code.matchAll(re)) {
        found = true;
        const tokens = invocationTokens(code.slice((m.index ?? 0) + m[0].length), inline);
        const problem = checkInvocation(program, tokens);
        if (problem) problems.push({ file, line, message: `${problem} (in: ${code.trim()})` });
      }
    }
    if (found || !inline) continue;
    // Inline code that starts with a command: `loans retry --all`, `sync --once [--json]`.
    const tokens = invocationTokens(code.trim(), true);
    const first = tokens[0];
    if (first === undefined || !topLevel.has(first) || tokens.length < 2) continue;
    const second = tokens[1]!;
    const top = program.commands.find((c) => c.name() === first)!;
    // `state = 'x'` or `run` in prose is not an invocation: the next word must look like one.
    if (!second.startsWith('-') && !(top.commands.length > 0 && /^[a-z][a-z-]*$/.test(second))) continue;
    const problem = checkInvocation(program, tokens);
    if (problem) problems.push({ file, line, message: `${problem} (in: ${code.trim()})` });
  }
  return problems;
}

/**
 * The command name the docs use must work after the README's install (`npm ci && npm run build`):
 * `node dist/main.js …`. A bare `boarding-connector <command>` is `command not found` until the
 * reader runs `npm link` (issue 42: docs/console.md's `boarding-connector console passwd`).
 */
export function checkCommandPrefix(file: string, text: string, program: Command): DocProblem[] {
  const problems: DocProblem[] = [];
  const names = program.commands.map((c) => c.name()).join('|');
  const bare = new RegExp(`(?<![\\w/.=:-])boarding-connector\\s+(?:${names})\\b`);
  for (const { line, code } of codeSnippets(text)) {
    if (bare.test(code))
      problems.push({
        file,
        line,
        message: `\`boarding-connector <command>\` is not on PATH after the README's install: write \`node dist/main.js <command>\` (in: ${code.trim()})`,
      });
  }
  return problems;
}

/** The top-level sections of the connector's config (a fenced YAML block made of these is a config block). */
export const CONFIG_SECTIONS = new Set([
  'platform',
  'store',
  'core',
  'webhooks',
  'admin',
  'mappings',
  'bank',
  'schedule',
  'boarding',
  'reports',
  'customers',
  'log',
  'identity',
  'console',
  'telemetry',
]);

/** Every fenced ```yaml block (indented ones too, as inside a list item), with its first line number. */
export function yamlBlocks(text: string): Array<{ line: number; yaml: string }> {
  const out: Array<{ line: number; yaml: string }> = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```ya?ml\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const indent = (open[1] as string).length;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^\s*```\s*$/.test(lines[j] as string); j++)
      body.push(
        (lines[j] as string).slice(
          Math.min(indent, (lines[j] as string).length - (lines[j] as string).trimStart().length),
        ),
      );
    out.push({ line: i + 2, yaml: body.join('\n') });
    i = j;
  }
  return out;
}
