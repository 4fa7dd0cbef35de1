import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { FatalError, UsageError } from '../lib/errors.js';
import { formatProblem, type LintProblem, type MapperOptions } from '../mapping/compile.js';
import { expectedFromOutcome, runFixture, type FixtureResult } from '../mapping/fixtures.js';
import { lintMappingDir, loadFixtures, loadMapper } from '../mapping/loader.js';
import { diffExpectedLines } from '../mapping/layout-fixtures.js';
import { mappingJsonSchema } from '../mapping/spec.js';
import { formatIssue, type MappingOutcome } from '../mapping/types.js';
import { isPlatformError } from '../platform/errors.js';
import type { PlatformApi } from '../platform/api.js';
import type { QueueItem } from '../platform/schemas.js';
import { out, type CliContext } from './context.js';
import { openPlatformSession } from './session.js';

interface DirOptions {
  dir?: string[];
  json?: boolean;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

function dirsOf(ctx: CliContext, opts: DirOptions): string[] {
  return opts.dir && opts.dir.length > 0 ? opts.dir : [ctx.config().mappings.dir];
}

/** The bank's mapping options from config (lint and preview use them; fixtures use their own). */
function configOptions(ctx: CliContext): MapperOptions {
  const c = ctx.config();
  return { timeZone: c.bank.timeZone, allowLast4Tin: c.mappings.allowLast4Tin, defaults: c.mappings.defaults, timeoutMs: c.mappings.timeoutMs };
}

/** The loan id of a fixture's input (layout columns may show it). */
function fixtureLoanId(input: unknown): string {
  const id = (input as { loan?: { id?: unknown } } | null)?.loan?.id;
  return typeof id === 'string' ? id : '';
}

const located = (dir: string, p: LintProblem): string => formatProblem({ ...p, file: join(dir, p.file) });

/** Fetches what the pipeline would map for one loan: the loan, its entities and documents list. */
export async function fetchMappingInput(api: PlatformApi, loanId: string, signal?: AbortSignal): Promise<{ loan: QueueItem; entities: Awaited<ReturnType<PlatformApi['getEntities']>>; documents: Awaited<ReturnType<PlatformApi['listDocuments']>> }> {
  const opts = signal ? { signal } : {};
  const loan = await api.getLoan(loanId, opts);
  const [entities, documents] = [await api.getEntities(loanId, opts), await api.listDocuments(loanId, opts)];
  return { loan: { ...loan, boarding: null }, entities, documents };
}

function printOutcome(ctx: CliContext, dir: string, outcome: MappingOutcome): void {
  if (outcome.ok) {
    out(ctx, `mapping ${outcome.mappingVersion}: ${outcome.records.length} record(s)`);
    for (const r of outcome.records) out(ctx, `${r.type} ${r.externalId}\n${JSON.stringify(r.fields, null, 2)}`);
  } else {
    out(ctx, `mapping ${outcome.mappingVersion}: ${outcome.issues.length} issue(s); the loan would be quarantined`);
    for (const i of outcome.issues) out(ctx, `${i.code} ${formatIssue({ ...i, file: join(dir, i.file) })}`);
  }
}

export function registerMappingsCommands(program: Command, ctx: CliContext): void {
  const mappings = program.command('mappings').description('lint, test and preview the mapping files (mappings.dir)');

  mappings
    .command('lint')
    .description('parse every mapping file, compile every expression, check helpers, lookups, defaults and the file schema; exit 1 with file:line:column on problems')
    .option('--dir <dir>', 'mapping directory (repeatable; default: config mappings.dir)', collect)
    .option('--json', 'print the result as JSON')
    .action((opts: DirOptions) => {
      const options = configOptions(ctx);
      let failed = 0;
      const results = dirsOf(ctx, opts).map((dir) => {
        const r = lintMappingDir(dir, options);
        if (r.problems.length > 0) failed += 1;
        return { dir, ok: r.problems.length === 0, version: r.version ?? null, problems: r.problems.map((p) => ({ ...p, file: join(dir, p.file) })) };
      });
      if (opts.json) out(ctx, JSON.stringify({ ok: failed === 0, results }, null, 2));
      else {
        for (const r of results) {
          if (r.ok) out(ctx, `${r.dir}: ok (mapping version ${r.version ?? '?'})`);
          else for (const p of r.problems) out(ctx, formatProblem(p));
        }
      }
      if (failed > 0) throw new FatalError(`mappings lint: ${results.reduce((n, r) => n + r.problems.length, 0)} problem(s) in ${failed} mapping set(s)`);
    });

  mappings
    .command('test')
    .description('run the fixtures (<dir>/fixtures/<case>/input.json → expected.json) and show a field-level diff on mismatch; exit 1 on failure')
    .option('--dir <dir>', 'mapping directory (repeatable; default: config mappings.dir)', collect)
    .option('--case <name>', 'run only the cases whose name contains this text')
    .option('--update', 'write expected.json from the actual outcome for failing cases (review the diff before committing!)')
    .option('--json', 'print the result as JSON')
    .action(async (opts: DirOptions & { case?: string; update?: boolean }) => {
      let failures = 0;
      const report: Array<{ dir: string; results: Array<Omit<FixtureResult, 'outcome'>>; problems: string[] }> = [];
      for (const dir of dirsOf(ctx, opts)) {
        const lint = lintMappingDir(dir);
        const { cases, problems } = loadFixtures(dir);
        const setProblems = [...lint.problems, ...problems].map((p) => located(dir, p));
        if (lint.problems.length === 0 && cases.length === 0) setProblems.push(`${join(dir, 'fixtures')}: no fixtures found`);
        const results: FixtureResult[] = [];
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
          for (const c of cases.filter((x) => !opts.case || x.name.includes(opts.case))) {
            const r = await runFixture(c, mapperFor);
            if (c.expectedLines && r.outcome?.ok) {
              const lineDiffs = lint.layout ? diffExpectedLines(lint.layout, fixtureLoanId(c.input), r.outcome.records, c.expectedLines) : ['expected-lines: the mapping set declares no layout.yaml'];
              if (lineDiffs.length > 0) Object.assign(r, { ok: false, diffs: [...r.diffs, ...lineDiffs] });
            }
            if (!r.ok && opts.update && r.outcome) {
              writeFileSync(join(dir, c.dir, 'expected.json'), `${JSON.stringify(expectedFromOutcome(r.outcome), null, 2)}\n`);
            }
            results.push(r);
          }
        }
        failures += setProblems.length + results.filter((r) => !r.ok).length;
        report.push({ dir, problems: setProblems, results: results.map(({ outcome: _o, ...r }) => r) });
      }
      if (opts.json) out(ctx, JSON.stringify({ ok: failures === 0, sets: report }, null, 2));
      else {
        for (const set of report) {
          for (const p of set.problems) out(ctx, p);
          for (const r of set.results) {
            out(ctx, `${r.ok ? 'ok  ' : 'FAIL'} ${set.dir} ${r.name}${r.ok || !opts.update ? '' : ' (expected.json updated)'}`);
            for (const d of r.diffs) out(ctx, `       ${d}`);
          }
          const passed = set.results.filter((r) => r.ok).length;
          out(ctx, `${set.dir}: ${passed}/${set.results.length} fixture(s) passed`);
        }
      }
      if (failures > 0) throw new FatalError(`mappings test: ${failures} failure(s)`);
    });

  mappings
    .command('preview')
    .description('fetch one loan (loan, entities, documents) from the platform and print the mapped records or issues; writes nothing to the core')
    .requiredOption('--loan <id>', 'platform loan id')
    .option('--dir <dir>', 'mapping directory (default: config mappings.dir)', collect)
    .option('--json', 'print the outcome as JSON')
    .action(async (opts: DirOptions & { loan: string }) => {
      const dirs = dirsOf(ctx, opts);
      if (dirs.length !== 1) throw new UsageError('preview takes one --dir');
      const dir = dirs[0] as string;
      const mapper = await loadMapper(dir, configOptions(ctx));
      // Through the state database: preview spends from the same rate budget as the daemon.
      const { platform } = openPlatformSession(ctx);
      let input;
      try {
        input = await fetchMappingInput(platform, opts.loan, ctx.shutdown);
      } catch (err) {
        if (isPlatformError(err)) throw new FatalError(`preview ${opts.loan}: ${err.message}${err.status ? ` (HTTP ${err.status})` : ''}`);
        throw err;
      }
      const outcome = await mapper.map(input);
      if (opts.json) out(ctx, JSON.stringify(outcome, null, 2));
      else printOutcome(ctx, dir, outcome);
    });

  mappings
    .command('schema')
    .description('print the JSON Schema of mapping files (the shipped mappings/schema.json), or write it with --out')
    .option('--out <file>', 'write to this file')
    .action((opts: { out?: string }) => {
      const text = `${JSON.stringify(mappingJsonSchema(), null, 2)}\n`;
      if (opts.out) {
        writeFileSync(resolve(opts.out), text);
        out(ctx, `wrote ${opts.out}`);
      } else ctx.stdout.write(text);
    });
}
