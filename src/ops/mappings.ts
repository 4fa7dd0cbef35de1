/**
 * The bank engineer's mapping commands: `mappings lint`, `mappings test` (fixtures, with
 * `--update`) and `mappings schema`, over the mapping loader. `mappings preview` is in
 * ops/mapping-preview.ts.
 */
import { join } from 'node:path';
import { formatProblem, type LintProblem, type MapperOptions } from '../mapping/compile.js';
import { writeFileSync } from 'node:fs';
import {
  fixtureInput,
  fixtureTimeZone,
  runFixture,
  type FixtureCase,
  type FixtureResult,
} from '../mapping/fixtures.js';
import {
  lintMappingDir,
  loadFixtures,
  loadMapper,
  readerFor,
  updateFixture,
} from '../mapping-sets/loader.js';
import { compileImagingLayout } from '../imaging/layout.js';
import { indexPreviewText, previewIndexRecords } from '../imaging/preview.js';
import { diffExpectedLines } from '../core/file/layout/expected-lines.js';
import { mappingJsonSchema } from '../mapping/spec.js';

export { formatProblem, mappingJsonSchema, type MapperOptions };

/** `mappings lint`: every set's problems and warnings, with file paths under its directory. */
export function lintSets(dirs: readonly string[], options: MapperOptions) {
  const results = dirs.map((dir) => {
    const r = lintMappingDir(dir, options);
    return {
      dir,
      ok: r.problems.length === 0,
      version: r.version ?? null,
      problems: r.problems.map((p) => ({ ...p, file: join(dir, p.file) })),
      warnings: r.warnings.map((p) => ({ ...p, file: join(dir, p.file) })),
    };
  });
  return { ok: results.every((r) => r.ok), failed: results.filter((r) => !r.ok).length, results };
}

/** The loan id of a fixture's input (layout columns may show it). */
function fixtureLoanId(input: unknown): string {
  const id = (input as { loan?: { id?: unknown } } | null)?.loan?.id;
  return typeof id === 'string' ? id : '';
}

const located = (dir: string, p: LintProblem): string => formatProblem({ ...p, file: join(dir, p.file) });

export interface FixtureSetReport {
  dir: string;
  results: Array<Omit<FixtureResult, 'outcome'> & { updated?: string[] }>;
  problems: string[];
}

/** The first line where a fixture file and what the set renders part (1-based), for the diff line. */
function firstLineDiff(rel: string, want: string, got: string): string {
  const a = want.split('\n');
  const b = got.split('\n');
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  const expected = JSON.stringify(a[i] ?? '(end)');
  return `${rel}:${i + 1}: expected ${expected}, the layout renders ${JSON.stringify(b[i] ?? '(end)')}`;
}

/**
 * A case's `expected-imaging/<layout>.txt` files against the index records its documents get in the
 * set's `imaging/<layout>.yaml` (what `mappings preview` prints, tax ids masked); with update, the
 * files that differ are rewritten instead.
 */
async function imagingFixture(
  dir: string,
  c: FixtureCase,
  update: boolean,
): Promise<{ diffs: string[]; written: string[] }> {
  const diffs: string[] = [];
  const written: string[] = [];
  const input = fixtureInput(c.input);
  if (c.expectedImaging === undefined || input === undefined) return { diffs, written };
  const read = readerFor(dir);
  for (const [name, want] of Object.entries(c.expectedImaging)) {
    const rel = join(c.dir, 'expected-imaging', name);
    const file = `imaging/${name.replace(/\.txt$/, '.yaml')}`;
    const text = read(file);
    const layout = text === undefined ? undefined : compileImagingLayout(file, text, read).layout;
    if (layout === undefined) {
      diffs.push(
        `${rel}: ${file} ${text === undefined ? 'is not in the set' : 'does not compile (see mappings lint)'}`,
      );
      continue;
    }
    const preview = await previewIndexRecords(layout, input, fixtureTimeZone(c), false);
    const got = `${indexPreviewText(preview)}\n`;
    if (got === want) continue;
    if (update) {
      writeFileSync(join(dir, rel), got);
      written.push(`expected-imaging/${name}`);
    } else diffs.push(firstLineDiff(rel, want, got));
  }
  return { diffs, written };
}

/** One set's fixtures: each case's result (and, with update, the files rewritten for a failing one). */
async function testSet(
  dir: string,
  input: { case?: string | undefined; update?: boolean | undefined },
): Promise<FixtureSetReport> {
  const lint = lintMappingDir(dir);
  const { cases, problems } = loadFixtures(dir);
  const setProblems = [...lint.problems, ...problems].map((p) => located(dir, p));
  if (lint.problems.length === 0 && cases.length === 0)
    setProblems.push(`${join(dir, 'fixtures')}: no fixtures found`);
  const results: Array<FixtureResult & { updated?: string[] }> = [];
  if (lint.problems.length === 0) {
    const mappers = new Map<string, ReturnType<typeof loadMapper>>();
    const mapperFor = (o: MapperOptions): ReturnType<typeof loadMapper> => {
      const key = JSON.stringify(o);
      let m = mappers.get(key);
      if (!m) {
        m = loadMapper(dir, o);
        mappers.set(key, m);
      }
      return m;
    };
    for (const c of cases.filter((x) => !input.case || x.name.includes(input.case))) {
      const r = await runFixture(c, mapperFor);
      if (c.expectedLines && r.outcome?.ok) {
        const lineDiffs = lint.layout
          ? diffExpectedLines(
              lint.layout,
              fixtureLoanId(c.input),
              r.outcome.records,
              c.expectedLines,
              fixtureTimeZone(c),
            )
          : ['expected-lines: the mapping set declares no layout.yaml'];
        if (lineDiffs.length > 0) Object.assign(r, { ok: false, diffs: [...r.diffs, ...lineDiffs] });
      }
      const im = r.outcome?.ok
        ? await imagingFixture(dir, c, input.update === true)
        : { diffs: [], written: [] };
      if (im.diffs.length > 0) Object.assign(r, { ok: false, diffs: [...r.diffs, ...im.diffs] });
      if (!r.ok && input.update && r.outcome) {
        const u = updateFixture(dir, c, r.outcome, lint.layout);
        results.push({ ...r, diffs: [...r.diffs, ...u.problems], updated: [...u.written, ...im.written] });
        continue;
      }
      results.push(im.written.length > 0 ? { ...r, updated: im.written } : r);
    }
  }
  return { dir, problems: setProblems, results: results.map(({ outcome: _o, ...r }) => r) };
}

/** `mappings test`: the fixtures of every set; failures counts set problems and failing cases. */
export async function testSets(
  dirs: readonly string[],
  input: { case?: string | undefined; update?: boolean | undefined },
): Promise<{ failures: number; sets: FixtureSetReport[] }> {
  const sets: FixtureSetReport[] = [];
  for (const dir of dirs) sets.push(await testSet(dir, input));
  const failures = sets.reduce((n, s) => n + s.problems.length + s.results.filter((r) => !r.ok).length, 0);
  return { failures, sets };
}
