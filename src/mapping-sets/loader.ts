import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, normalize, relative, resolve, sep } from 'node:path';
import { ConfigError } from '../lib/errors.js';
import {
  compileMapping,
  formatProblem,
  DEFAULT_MAPPER_OPTIONS,
  type CompiledMapping,
  type CompileResult,
  type LintProblem,
  type MapperOptions,
} from '../mapping/compile.js';
import { createMapper } from '../mapping/engine.js';
import { expectedFromOutcome, fixtureTimeZone, type FixtureCase } from '../mapping/fixtures.js';
import { renderExpectedLines } from '../core/file/layout/expected-lines.js';
import { compileLayout, LAYOUT_FILE, type Layout } from '../core/file/layout/layout.js';
import { idIntoLimitedFields } from '../mapping/id-flow.js';
import { layoutCatalogue } from './layout-catalogue.js';
import { compileImagingLayout } from '../imaging/layout.js';

/** Where a set keeps its imaging index layouts (docs/imaging.md). */
const IMAGING_DIR = 'imaging';
import type { Mapper, MappingOutcome } from '../mapping/types.js';

/**
 * Mapping sets: a directory with `mapping.yaml` (and the files it references), an optional
 * `layout.yaml` (the file core's batch layout) and `fixtures/`. This module reads them from disk
 * and joins the pure mapping engine (src/mapping) with the file core's layout compiler
 * (src/core/file/layout): it sits above both, so the engine never imports a core. Paths a mapping
 * references (CSV lookups) must stay inside its directory.
 */

/** The engine of a set with the set's file layout beside it (`layout.yaml`; undefined when it declares none). */
export interface SetMapper extends Mapper {
  readonly layout?: Layout | undefined;
}

/** Reads a file of the mapping set by its relative path (never outside it); undefined when absent. */
export function readerFor(dir: string): (rel: string) => string | undefined {
  const root = resolve(dir);
  return (rel) => {
    if (isAbsolute(rel)) return undefined;
    const full = resolve(root, normalize(rel));
    if (full !== root && !full.startsWith(root + sep)) return undefined;
    try {
      return readFileSync(full, 'utf8');
    } catch {
      return undefined;
    }
  };
}

/** Content hash of the files a mapping read, in a stable order: the mapping version. */
export function hashSources(sources: ReadonlyMap<string, string>): string {
  const h = createHash('sha256');
  for (const path of [...sources.keys()].sort()) {
    const text = sources.get(path) ?? '';
    h.update(`${path.replaceAll('\\', '/')}\u0000${Buffer.byteLength(text)}\u0000`);
    h.update(text);
  }
  return h.digest('hex');
}

export interface LintResult extends CompileResult {
  dir: string;
  /** `<label>+<first 12 hex of the content hash>`, when the set compiled. */
  version: string | undefined;
  /** The compiled `layout.yaml`, when the set has one and everything compiled. */
  layout: Layout | undefined;
  /** Not errors (the set loads): a platform id into a field of maxLength or a fixed-width column (id-flow.ts). */
  warnings: LintProblem[];
}

function assertDir(dir: string): void {
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new ConfigError(`mappings.dir: ${dir} is not a directory`);
}

export function mappingVersionOf(label: string, sources: ReadonlyMap<string, string>): string {
  return `${label}+${hashSources(sources).slice(0, 12)}`;
}

/** The set's imaging index layouts (`imaging/*.yaml`, docs/imaging.md), compiled: their problems. */
export function lintImagingLayouts(dir: string, read: (rel: string) => string | undefined): LintProblem[] {
  const sub = join(dir, IMAGING_DIR);
  if (!existsSync(sub) || !statSync(sub).isDirectory()) return [];
  const problems: LintProblem[] = [];
  for (const name of readdirSync(sub).sort()) {
    if (!/\.ya?ml$/i.test(name)) continue;
    const file = `${IMAGING_DIR}/${name}`;
    const text = read(file);
    if (text === undefined) continue;
    problems.push(...compileImagingLayout(file, text, read).problems);
  }
  return problems;
}

/** Compiles a mapping directory and reports every problem (used by `mappings lint`). */
export function lintMappingDir(dir: string, opts: Partial<MapperOptions> = {}): LintResult {
  assertDir(dir);
  const read = readerFor(dir);
  const r = compileMapping(read, { ...DEFAULT_MAPPER_OPTIONS, ...opts });
  // The file layout is part of the set: it is linted with it and changes the mapping version.
  const layoutText = read(LAYOUT_FILE);
  let layout: Layout | undefined;
  const warnings: LintProblem[] = r.mapping ? idIntoLimitedFields(r.mapping) : [];
  if (layoutText !== undefined) {
    r.sources.set(LAYOUT_FILE, layoutText);
    const l = compileLayout(layoutText, layoutCatalogue(r.mapping));
    r.problems.push(...l.problems);
    warnings.push(...l.warnings);
    layout = l.layout;
  }
  r.problems.push(...lintImagingLayouts(dir, read));
  const ok = r.mapping !== undefined && r.problems.length === 0;
  return {
    ...r,
    dir,
    warnings,
    layout: ok ? layout : undefined,
    version: r.mapping ? mappingVersionOf(r.mapping.label, r.sources) : undefined,
  };
}

/**
 * The set's file layout (`layout.yaml`), or undefined when it declares none. Throws ConfigError
 * with file:line:column when the set or its layout does not compile.
 */
export function loadLayout(dir: string, opts: Partial<MapperOptions> = {}): Layout | undefined {
  return cleanSet(dir, opts).layout;
}

/** The set linted; throws ConfigError listing every problem with file:line:column. */
function cleanSet(
  dir: string,
  opts: Partial<MapperOptions>,
): LintResult & { mapping: CompiledMapping; version: string } {
  const r = lintMappingDir(dir, opts);
  if (!r.mapping || !r.version || r.problems.length > 0) {
    const problems = r.problems.map(
      (p: LintProblem) => `${join(dir, p.file)}:${p.line}:${p.column}: ${p.message}`,
    );
    throw new ConfigError(
      `mapping set ${dir} has ${problems.length} problem(s):\n  ${problems.join('\n  ')}`,
      problems,
    );
  }
  return { ...r, mapping: r.mapping, version: r.version };
}

/**
 * Loads the mapping set the pipeline uses. Throws ConfigError listing every problem with
 * file:line:column when the set does not compile: a daemon must not start on a broken mapping.
 */
export async function loadMapper(dir: string, opts: Partial<MapperOptions> = {}): Promise<SetMapper> {
  await Promise.resolve();
  const r = cleanSet(dir, opts);
  return { ...createMapper(r.mapping, r.version, r.layout), layout: r.layout };
}

/** `<dir>/fixtures/<case>/{input.json, expected.json, options.json?}` in name order. */
export function loadFixtures(dir: string): { cases: FixtureCase[]; problems: LintProblem[] } {
  const fixturesDir = join(dir, 'fixtures');
  const cases: FixtureCase[] = [];
  const problems: LintProblem[] = [];
  if (!existsSync(fixturesDir)) return { cases, problems };
  for (const name of readdirSync(fixturesDir).sort()) {
    const caseDir = join(fixturesDir, name);
    if (!statSync(caseDir).isDirectory()) continue;
    const read = (file: string, required: boolean): unknown => {
      const path = join(caseDir, file);
      const rel = relative(dir, path);
      if (!existsSync(path)) {
        if (required) problems.push({ file: rel, line: 1, column: 1, message: `missing ${file}` });
        return undefined;
      }
      const text = readFileSync(path, 'utf8');
      try {
        return JSON.parse(text) as unknown;
      } catch (err) {
        const m = /position (\d+)/.exec(err instanceof Error ? err.message : '');
        const offset = m ? Number(m[1]) : 0;
        const before = text.slice(0, offset);
        problems.push({
          file: rel,
          line: before.split('\n').length,
          column: offset - before.lastIndexOf('\n'),
          message: `invalid JSON: ${err instanceof Error ? err.message : String(err)}`,
        });
        return undefined;
      }
    };
    const input = read('input.json', true);
    const expected = read('expected.json', true);
    const options = read('options.json', false);
    if (input === undefined || expected === undefined) continue;
    // Expected lines of the layout's files, compared byte for byte (they are in the file's encoding).
    const linesDir = join(caseDir, 'expected-lines');
    const expectedLines: Record<string, Uint8Array> = {};
    if (existsSync(linesDir))
      for (const f of readdirSync(linesDir).sort()) expectedLines[f] = readFileSync(join(linesDir, f));
    // Expected imaging index records, one file per imaging layout of the set (imaging/<name>.yaml).
    const imagingDir = join(caseDir, 'expected-imaging');
    const expectedImaging: Record<string, string> = {};
    if (existsSync(imagingDir))
      for (const f of readdirSync(imagingDir).sort())
        if (f.endsWith('.txt')) expectedImaging[f] = readFileSync(join(imagingDir, f), 'utf8');
    cases.push({
      name,
      dir: relative(dir, caseDir),
      input,
      expected,
      options,
      ...(Object.keys(expectedLines).length > 0 ? { expectedLines } : {}),
      ...(Object.keys(expectedImaging).length > 0 ? { expectedImaging } : {}),
    });
  }
  return { cases, problems };
}

/**
 * `mappings test --update`: rewrites a case's `expected.json` from the outcome and, when the case
 * has `expected-lines/`, each of its files from the lines the records render to in the layout (a
 * loan that would be quarantined renders no lines: its expected-lines stay as they are). Returns
 * the files written, relative to the case, and the problems that kept a file from being written.
 */
export function updateFixture(
  dir: string,
  c: FixtureCase,
  outcome: MappingOutcome,
  layout: Layout | undefined,
): { written: string[]; problems: string[] } {
  const caseDir = join(dir, c.dir);
  const written: string[] = [];
  const problems: string[] = [];
  writeFileSync(join(caseDir, 'expected.json'), `${JSON.stringify(expectedFromOutcome(outcome), null, 2)}\n`);
  written.push('expected.json');
  if (c.expectedLines === undefined) return { written, problems };
  if (!outcome.ok) {
    problems.push('expected-lines: not updated (the loan would be quarantined, it has no lines)');
    return { written, problems };
  }
  if (layout === undefined) {
    problems.push('expected-lines: not updated (the mapping set declares no layout.yaml)');
    return { written, problems };
  }
  const loanId = (c.input as { loan?: { id?: unknown } } | null)?.loan?.id;
  for (const name of Object.keys(c.expectedLines)) {
    const bytes = renderExpectedLines(
      layout,
      typeof loanId === 'string' ? loanId : '',
      outcome.records,
      name,
      fixtureTimeZone(c),
    );
    if (typeof bytes === 'string') {
      problems.push(`${bytes} (not updated)`);
      continue;
    }
    writeFileSync(join(caseDir, 'expected-lines', name), bytes);
    written.push(`expected-lines/${name}`);
  }
  return { written, problems };
}

export { formatProblem };
