import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { FatalError, UsageError } from '../lib/errors.js';
import { formatProblem, type LintProblem, type MapperOptions } from '../mapping/compile.js';
import { CHANGE_WORDS, diffRecordLists } from '../mapping/record-diff.js';
import { expectedFromOutcome, fixtureTimeZone, runFixture, type FixtureResult } from '../mapping/fixtures.js';
import { lintMappingDir, loadFixtures, loadMapper, updateFixture } from '../mapping-sets/loader.js';
import { diffExpectedLines } from '../core/file/layout/expected-lines.js';
import { mappingJsonSchema } from '../mapping/spec.js';
import { formatIssue, type MappingInput, type MappingOutcome } from '../mapping/types.js';
import { isPlatformError } from '../platform/errors.js';
import { storedCustomers } from '../boarding/customers.js';
import { accountNumbersFromConfig, mappingIdentity } from '../boarding/identity.js';
import {
  fetchMappingInput,
  maskRecords,
  parseBoardedRecords,
  queueItemFor,
  type InputSource,
} from '../boarding/mapping-input.js';
import { redactPayload } from '../lib/redact.js';
import { mapperOptionsFromConfig } from '../app/runtime.js';
import { out, type CliContext } from './context.js';
import { followPlatformWaits } from './progress.js';
import { openPlatformSession } from '../app/session.js';
import { bankSchema, mappingsSchema } from '../config/schema.js';

interface DirOptions {
  dir?: string[];
  json?: boolean;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

function dirsOf(ctx: CliContext, opts: DirOptions): string[] {
  return opts.dir && opts.dir.length > 0 ? opts.dir : [ctx.config().mappings.dir];
}

/**
 * The bank's mapping options from config (lint and preview use them; fixtures use their own).
 * Without a config (`mappings lint --dir D` on a bank engineer's machine) the defaults of the
 * config keys apply (bank.timeZone, mappings.*), exactly as a config that leaves them out.
 */
function configOptions(ctx: CliContext): MapperOptions {
  if (ctx.configPath() === undefined)
    return mapperOptionsFromConfig({ bank: bankSchema.parse({}), mappings: mappingsSchema.parse({}) });
  return mapperOptionsFromConfig(ctx.config());
}

/** The loan id of a fixture's input (layout columns may show it). */
function fixtureLoanId(input: unknown): string {
  const id = (input as { loan?: { id?: unknown } } | null)?.loan?.id;
  return typeof id === 'string' ? id : '';
}

const located = (dir: string, p: LintProblem): string => formatProblem({ ...p, file: join(dir, p.file) });

function printOutcome(
  ctx: CliContext,
  dir: string,
  outcome: MappingOutcome,
  showPii: boolean,
  input: MappingInput,
): void {
  if (outcome.ok) {
    const warnings = outcome.warnings ?? [];
    out(
      ctx,
      `mapping ${outcome.mappingVersion}: ${outcome.records.length} record(s)${warnings.length > 0 ? `; boards with ${warnings.length} review item(s)` : ''}`,
    );
    for (const r of showPii ? outcome.records : maskRecords(outcome.records, input))
      out(ctx, `${r.type} ${r.externalId}\n${JSON.stringify(r.fields, null, 2)}`);
    for (const w of warnings) out(ctx, `review ${w.code} ${formatIssue({ ...w, file: join(dir, w.file) })}`);
  } else {
    out(
      ctx,
      `mapping ${outcome.mappingVersion}: ${outcome.issues.length} issue(s); the loan would be quarantined`,
    );
    for (const i of outcome.issues) out(ctx, `${i.code} ${formatIssue({ ...i, file: join(dir, i.file) })}`);
  }
}

/** A full tax id in a saved fixture becomes a synthetic one with the same last 4 digits (the mapping takes the same path). */
function fixtureInput(input: MappingInput, showPii: boolean): MappingInput {
  if (showPii) return input;
  const synth = (v: unknown): unknown => {
    const digits = typeof v === 'string' || typeof v === 'number' ? String(v).replace(/\D/g, '') : '';
    return digits.length === 9 ? `00000${digits.slice(-4)}` : v;
  };
  const scrub = <T extends Record<string, unknown>>(e: T): T => ({
    ...e,
    ...('ein' in e ? { ein: synth(e['ein']) } : {}),
    ...('ssn' in e ? { ssn: synth(e['ssn']) } : {}),
  });
  return {
    ...input,
    entities: {
      ...input.entities,
      businesses: input.entities.businesses.map(scrub),
      people: input.entities.people.map(scrub),
    },
  };
}

const SOURCE_NOTE: Record<InputSource, string> = {
  stored: 'the queue item the connector stored when it took the loan from the queue (what the pipeline maps)',
  queue: 'the live boarding queue (the connector has not taken this loan yet)',
  loan: 'the bare loan: it is not in the boarding queue and the connector does not know it, so boarding.* fields map empty',
};

export function registerMappingsCommands(program: Command, ctx: CliContext): void {
  const mappings = program
    .command('mappings')
    .description('lint, test and preview the mapping files (mappings.dir)');

  mappings
    .command('lint')
    .description(
      'parse every mapping file, compile every expression, check helpers, lookups, defaults and the file schema; exit 1 with file:line:column on problems',
    )
    .option('--dir <dir>', 'mapping directory (repeatable; default: config mappings.dir)', collect)
    .option('--json', 'print the result as JSON')
    .action((opts: DirOptions) => {
      const options = configOptions(ctx);
      let failed = 0;
      const results = dirsOf(ctx, opts).map((dir) => {
        const r = lintMappingDir(dir, options);
        if (r.problems.length > 0) failed += 1;
        return {
          dir,
          ok: r.problems.length === 0,
          version: r.version ?? null,
          problems: r.problems.map((p) => ({ ...p, file: join(dir, p.file) })),
          warnings: r.warnings.map((p) => ({ ...p, file: join(dir, p.file) })),
        };
      });
      if (opts.json) out(ctx, JSON.stringify({ ok: failed === 0, results }, null, 2));
      else {
        for (const r of results) {
          // Warnings do not fail lint (the set loads) but say what to change before it bites.
          for (const w of r.warnings) out(ctx, formatProblem(w));
          if (r.ok)
            out(
              ctx,
              `${r.dir}: ok (mapping version ${r.version ?? '?'})${r.warnings.length > 0 ? `, ${r.warnings.length} warning(s)` : ''}`,
            );
          else for (const p of r.problems) out(ctx, formatProblem(p));
        }
      }
      if (failed > 0)
        throw new FatalError(
          `mappings lint: ${results.reduce((n, r) => n + r.problems.length, 0)} problem(s) in ${failed} mapping set(s)`,
        );
    });

  mappings
    .command('test')
    .description(
      'run the fixtures (<dir>/fixtures/<case>/input.json → expected.json) and show a field-level diff on mismatch; exit 1 on failure',
    )
    .option('--dir <dir>', 'mapping directory (repeatable; default: config mappings.dir)', collect)
    .option('--case <name>', 'run only the cases whose name contains this text')
    .option(
      '--update',
      'rewrite expected.json and the files in expected-lines/ from the actual outcome for failing cases (review the diff before committing!)',
    )
    .option('--json', 'print the result as JSON')
    .action(async (opts: DirOptions & { case?: string; update?: boolean }) => {
      let failures = 0;
      const report: Array<{
        dir: string;
        results: Array<Omit<FixtureResult, 'outcome'> & { updated?: string[] }>;
        problems: string[];
      }> = [];
      for (const dir of dirsOf(ctx, opts)) {
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
          for (const c of cases.filter((x) => !opts.case || x.name.includes(opts.case))) {
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
            if (!r.ok && opts.update && r.outcome) {
              const u = updateFixture(dir, c, r.outcome, lint.layout);
              results.push({ ...r, diffs: [...r.diffs, ...u.problems], updated: u.written });
              continue;
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
            out(
              ctx,
              `${r.ok ? 'ok  ' : 'FAIL'} ${set.dir} ${r.name}${r.updated ? ` (updated: ${r.updated.join(', ')})` : ''}`,
            );
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
    .description(
      'map one loan exactly as the pipeline would (its stored queue item when known, else the live one), diff against what was last boarded; writes nothing to the core',
    )
    .requiredOption('--loan <id>', 'platform loan id')
    .option('--dir <dir>', 'mapping directory (default: config mappings.dir)', collect)
    .option('--json', 'print input, outcome and diff as JSON (tax ids masked unless --show-pii)')
    .option('--show-pii', 'print full tax ids (masked by default)')
    .option(
      '--save-fixture <name>',
      'write <dir>/fixtures/<name>/input.json and expected.json from this loan (full tax ids replaced by synthetic ones unless --show-pii)',
    )
    .addHelpText(
      'after',
      '\nExit status: 0 when the loan would board (with or without review items); 1 when it would be quarantined or cannot be read.',
    )
    .action(async (opts: DirOptions & { loan: string; showPii?: boolean; saveFixture?: string }) => {
      const dirs = dirsOf(ctx, opts);
      if (dirs.length !== 1) throw new UsageError('preview takes one --dir');
      const dir = dirs[0] as string;
      const showPii = opts.showPii === true;
      if (opts.saveFixture !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$/.test(opts.saveFixture)) {
        throw new UsageError(
          `--save-fixture: a fixture name is letters, digits, '.', '_' and '-' (at most 81), got ${JSON.stringify(opts.saveFixture)}`,
        );
      }
      const progress = ctx.progress();
      const mapper = await loadMapper(dir, configOptions(ctx));
      // Through the state database: preview spends from the same rate budget as the daemon, and
      // maps the queue item the pipeline stored for the loan.
      const { store, platform } = await openPlatformSession(ctx);
      const row = await store.loans.get(opts.loan);
      followPlatformWaits(progress, platform);
      progress.status(
        row?.queueItem ? `reading loan ${opts.loan}` : `looking for loan ${opts.loan} in the boarding queue`,
      );
      let input: MappingInput;
      let source: InputSource;
      try {
        const found = await queueItemFor(platform, opts.loan, row?.queueItem ?? null, ctx.shutdown);
        source = found.source;
        input = await fetchMappingInput(platform, found.item, ctx.shutdown);
      } catch (err) {
        if (isPlatformError(err)) throw new FatalError(`preview ${opts.loan}: ${err.describe()}`);
        throw err;
      } finally {
        progress.done();
      }
      // As the pipeline maps it: the loan's account number (or the one the pool would give it next:
      // nothing is allocated) and the customers its board resolved (CIFs), when it has been boarded.
      input = {
        ...input,
        identity: {
          ...mappingIdentity(
            await accountNumbersFromConfig(ctx.config(), store, ctx.logger()).preview(opts.loan),
          ),
          customers: storedCustomers(await store.customers.forLoan(opts.loan)),
        },
      };
      const outcome = await mapper.map(input);
      const boarded = parseBoardedRecords(row?.boardedRecords ?? null);
      const diff =
        boarded && outcome.ok
          ? diffRecordLists(boarded, maskRecords(outcome.records, input), CHANGE_WORDS)
          : null;
      if (opts.saveFixture !== undefined) {
        const saved = fixtureInput(input, showPii);
        const savedOutcome = await mapper.map(saved);
        const caseDir = join(dir, 'fixtures', opts.saveFixture);
        if (existsSync(caseDir))
          throw new UsageError(`--save-fixture: ${caseDir} exists already; pick another name or remove it`);
        mkdirSync(caseDir, { recursive: true });
        writeFileSync(
          join(caseDir, 'input.json'),
          `${JSON.stringify({ description: `loan ${opts.loan}, saved by mappings preview (${SOURCE_NOTE[source]})`, ...saved }, null, 2)}\n`,
        );
        writeFileSync(
          join(caseDir, 'expected.json'),
          `${JSON.stringify(expectedFromOutcome(savedOutcome), null, 2)}\n`,
        );
        if (opts.json !== true)
          out(
            ctx,
            `wrote fixture ${caseDir} (input.json, expected.json)${showPii ? ' WITH FULL TAX IDS: do not commit it to a shared repository' : ''}; check it with \`mappings test --case ${opts.saveFixture}\``,
          );
      }
      if (opts.json) {
        const view = showPii
          ? { input, outcome }
          : {
              input: redactPayload(input),
              outcome: outcome.ok ? { ...outcome, records: maskRecords(outcome.records, input) } : outcome,
            };
        out(
          ctx,
          JSON.stringify(
            {
              loanId: opts.loan,
              source,
              state: row?.state ?? null,
              boardedMappingVersion: row?.mappingVersion ?? null,
              ...view,
              diffAgainstBoarded: diff,
            },
            null,
            2,
          ),
        );
      } else {
        out(
          ctx,
          `loan ${opts.loan}: mapped from ${SOURCE_NOTE[source]}${row ? ` · state ${row.state}` : ''}`,
        );
        printOutcome(ctx, dir, outcome, showPii, input);
        if (row?.state === 'acknowledged' || row?.boardedRecords) {
          if (diff === null)
            out(
              ctx,
              boarded
                ? '\nagainst what was boarded: not comparable (the loan would now be quarantined)'
                : '\nagainst what was boarded: the records of the last write were not kept (boarded before this version)',
            );
          else if (diff.length === 0)
            out(ctx, `\nagainst what was boarded (${row.mappingVersion ?? '?'}): no field changes`);
          else
            out(
              ctx,
              `\nagainst what was boarded (${row.mappingVersion ?? '?'}): ${diff.length} change(s)${showPii ? '' : ' (tax ids compared masked)'}\n${diff.map((d) => `  ${d}`).join('\n')}\n  (\`loans reboard ${opts.loan} --reason …\` writes the new records to the core)`,
            );
        }
      }
      if (!outcome.ok)
        throw new FatalError(
          `preview ${opts.loan}: the loan would be quarantined (${outcome.issues.length} issue(s))`,
        );
    });

  mappings
    .command('schema')
    .description(
      'print the JSON Schema of mapping files (the shipped mappings/schema.json), or write it with --out',
    )
    .option('--out <file>', 'write to this file')
    .action((opts: { out?: string }) => {
      const text = `${JSON.stringify(mappingJsonSchema(), null, 2)}\n`;
      if (opts.out) {
        writeFileSync(resolve(opts.out), text);
        out(ctx, `wrote ${opts.out}`);
      } else ctx.stdout.write(text);
    });
}
