import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { FatalError, UsageError } from '../lib/errors.js';
import { mappingOptions, openMappingPreview } from '../app/mappings.js';
import {
  formatProblem,
  lintSets,
  mappingJsonSchema,
  testSets,
  type FixtureSetReport,
} from '../ops/mappings.js';
import { redactPayload } from '../lib/redact.js';
import { commandHint } from '../lib/shell.js';
import {
  SOURCE_NOTE,
  checkFixtureName,
  formatIssue,
  maskRecords,
  previewMapping,
  saveFixture,
  type MappingInput,
  type MappingOutcome,
} from '../ops/mapping-preview.js';
import { indexPreviewText, previewIndexRecords } from '../imaging/preview.js';
import { loadImagingLayout } from '../app/imaging.js';
import { out, type CliContext } from './context.js';
import { followPlatformWaits } from './progress.js';

interface DirOptions {
  dir?: string[];
  json?: boolean;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

function dirsOf(ctx: CliContext, opts: DirOptions): string[] {
  return opts.dir && opts.dir.length > 0 ? opts.dir : [ctx.config().mappings.dir];
}

export function registerMappingsCommands(program: Command, ctx: CliContext): void {
  const mappings = program
    .command('mappings')
    .description('lint, test and preview the mapping files (mappings.dir)');

  mappings
    .command('lint')
    .description(
      'parse every mapping file, compile every expression, check helpers, lookups, defaults and the file schema; ' +
        'exit 1 with file:line:column on problems',
    )
    .option('--dir <dir>', 'mapping directory (repeatable; default: config mappings.dir)', collect)
    .option('--json', 'print the result as JSON')
    .action((opts: DirOptions) => {
      const { failed, results } = lintSets(dirsOf(ctx, opts), mappingOptions(ctx));
      out(ctx, opts.json ? JSON.stringify({ ok: failed === 0, results }, null, 2) : lintText(results));
      if (failed > 0)
        throw new FatalError(
          `mappings lint: ${results.reduce((n, r) => n + r.problems.length, 0)} problem(s) in ${failed} mapping set(s)`,
        );
    });

  mappings
    .command('test')
    .description(
      'run the fixtures (<dir>/fixtures/<case>/input.json → expected.json) and show a field-level diff on ' +
        'mismatch; exit 1 on failure',
    )
    .option('--dir <dir>', 'mapping directory (repeatable; default: config mappings.dir)', collect)
    .option('--case <name>', 'run only the cases whose name contains this text')
    .option(
      '--update',
      'rewrite expected.json and the files in expected-lines/ from the actual outcome for failing cases (review ' +
        'the diff before committing!)',
    )
    .option('--json', 'print the result as JSON')
    .action(async (opts: DirOptions & { case?: string; update?: boolean }) => {
      const { failures, sets: report } = await testSets(dirsOf(ctx, opts), opts);
      out(
        ctx,
        opts.json ? JSON.stringify({ ok: failures === 0, sets: report }, null, 2) : fixturesText(report),
      );
      if (failures > 0) throw new FatalError(`mappings test: ${failures} failure(s)`);
    });

  mappings
    .command('preview')
    .description(
      'map one loan exactly as the pipeline would (its stored queue item when known, else the live one), diff ' +
        'against what was last boarded; writes nothing to the core',
    )
    .requiredOption('--loan <id>', 'platform loan id')
    .option('--dir <dir>', 'mapping directory (default: config mappings.dir)', collect)
    .option('--json', 'print input, outcome and diff as JSON (tax ids masked unless --show-pii)')
    .option('--show-pii', 'print full tax ids (masked by default)')
    .option(
      '--save-fixture <name>',
      'write <dir>/fixtures/<name>/input.json and expected.json from this loan (full tax ids replaced by ' +
        'synthetic ones unless --show-pii)',
    )
    .addHelpText(
      'after',
      '\nExit status: 0 when the loan would board (with or without review items); 1 when it would be quarantined ' +
        'or cannot be read.',
    )
    .action(async (opts: DirOptions & { loan: string; showPii?: boolean; saveFixture?: string }) => {
      const dirs = dirsOf(ctx, opts);
      if (dirs.length !== 1) throw new UsageError('preview takes one --dir');
      const dir = dirs[0] as string;
      const showPii = opts.showPii === true;
      checkFixtureName(opts.saveFixture);
      const progress = ctx.progress();
      const deps = await openMappingPreview(ctx, dir);
      followPlatformWaits(progress, deps.platform);
      const preview = await previewMapping(deps, opts.loan, (known) =>
        progress.status(
          known ? `reading loan ${opts.loan}` : `looking for loan ${opts.loan} in the boarding queue`,
        ),
      );
      const { source, input, outcome } = preview;
      progress.done();
      if (opts.saveFixture !== undefined) {
        const p = { dir, name: opts.saveFixture, loanId: opts.loan, source, input, showPii };
        const caseDir = await saveFixture(deps.mapper, p);
        if (opts.json !== true) out(ctx, savedFixtureText(caseDir, opts.saveFixture, showPii));
      }
      // With imaging on: the index records the loan's documents would get (docs/imaging.md).
      const config = ctx.config();
      const index = config.imaging.enabled
        ? await previewIndexRecords(
            loadImagingLayout(dir, config.imaging.layout),
            input,
            config.bank.timeZone,
            showPii,
          )
        : null;
      const json = (): string => {
        const text = previewJson(opts.loan, preview, showPii);
        return index ? JSON.stringify({ ...JSON.parse(text), imagingIndex: index }, null, 2) : text;
      };
      out(
        ctx,
        opts.json
          ? json()
          : previewText(dir, opts.loan, preview, showPii) + (index ? `\n${indexPreviewText(index)}` : ''),
      );
      const unfit = index?.records.filter((r) => r.problem !== undefined).length ?? 0;
      if (unfit > 0)
        throw new FatalError(
          `preview ${opts.loan}: the loan would be quarantined (${unfit} document(s) the imaging layout cannot hold)`,
        );
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

/**
 * `mappings lint` as text: warnings (they do not fail lint, but say what to change before it bites), then ok
 * or the problems.
 */
function lintText(results: ReturnType<typeof lintSets>['results']): string {
  const lines: string[] = [];
  for (const r of results) {
    lines.push(...r.warnings.map((w) => formatProblem(w)));
    const warned = r.warnings.length > 0 ? `, ${r.warnings.length} warning(s)` : '';
    if (r.ok) lines.push(`${r.dir}: ok (mapping version ${r.version ?? '?'})${warned}`);
    else lines.push(...r.problems.map((p) => formatProblem(p)));
  }
  return lines.join('\n');
}

/** `mappings test` as text: each case ok or FAIL with its diffs, and a count per set. */
function fixturesText(sets: readonly FixtureSetReport[]): string {
  const lines: string[] = [];
  for (const set of sets) {
    lines.push(...set.problems);
    for (const r of set.results) {
      const updated = r.updated ? ` (updated: ${r.updated.join(', ')})` : '';
      lines.push(
        `${r.ok ? 'ok  ' : 'FAIL'} ${set.dir} ${r.name}${updated}`,
        ...r.diffs.map((d) => `       ${d}`),
      );
    }
    lines.push(
      `${set.dir}: ${set.results.filter((r) => r.ok).length}/${set.results.length} fixture(s) passed`,
    );
  }
  return lines.join('\n');
}

/**
 * The mapping outcome as text: records (tax ids masked unless showPii) and review items, or the issues that
 * quarantine it.
 */
function outcomeText(dir: string, outcome: MappingOutcome, showPii: boolean, input: MappingInput): string {
  const at = <T extends { file: string }>(i: T): T => ({ ...i, file: join(dir, i.file) });
  if (!outcome.ok)
    return [
      `mapping ${outcome.mappingVersion}: ${outcome.issues.length} issue(s); the loan would be quarantined`,
      ...outcome.issues.map((i) => `${i.code} ${formatIssue(at(i))}`),
    ].join('\n');
  const warnings = outcome.warnings ?? [];
  const review = warnings.length > 0 ? `; boards with ${warnings.length} review item(s)` : '';
  return [
    `mapping ${outcome.mappingVersion}: ${outcome.records.length} record(s)${review}`,
    ...(showPii ? outcome.records : maskRecords(outcome.records, input)).map(
      (r) => `${r.type} ${r.externalId}\n${JSON.stringify(r.fields, null, 2)}`,
    ),
    ...warnings.map((w) => `review ${w.code} ${formatIssue(at(w))}`),
  ].join('\n');
}

/** `mappings preview --json`: input, outcome and diff (tax ids masked unless showPii). */
function previewJson(loanId: string, p: Preview, showPii: boolean): string {
  const { row, source, input, outcome, diff } = p;
  const view = showPii
    ? { input, outcome }
    : {
        input: redactPayload(input),
        outcome: outcome.ok ? { ...outcome, records: maskRecords(outcome.records, input) } : outcome,
      };
  const head = {
    loanId,
    source,
    state: row?.state ?? null,
    boardedMappingVersion: row?.mappingVersion ?? null,
  };
  return JSON.stringify({ ...head, ...view, diffAgainstBoarded: diff }, null, 2);
}

/** `mappings preview` as text: where the input came from, the outcome, and the diff against what was boarded. */
function previewText(dir: string, loanId: string, p: Preview, showPii: boolean): string {
  const { row, source, input, outcome, boarded, diff } = p;
  const lines = [
    `loan ${loanId}: mapped from ${SOURCE_NOTE[source]}${row ? ` · state ${row.state}` : ''}`,
    outcomeText(dir, outcome, showPii, input),
  ];
  if (row?.state === 'acknowledged' || row?.boardedRecords) {
    const against = `\nagainst what was boarded (${row.mappingVersion ?? '?'})`;
    if (diff === null)
      lines.push(
        boarded
          ? '\nagainst what was boarded: not comparable (the loan would now be quarantined)'
          : '\nagainst what was boarded: the records of the last write were not kept (boarded before this version)',
      );
    else if (diff.length === 0) lines.push(`${against}: no field changes`);
    else
      lines.push(
        `${against}: ${diff.length} ` +
          `change(s)${showPii ? '' : ' (tax ids compared masked)'}\n${diff.map((d) => `  ${d}`).join('\n')}\n  ` +
          `(\`${commandHint('loans reboard', [loanId], '--reason …')}\` writes the new records to the core)`,
      );
  }
  return lines.join('\n');
}

/** What `mappings preview --save-fixture` says it wrote. */
function savedFixtureText(caseDir: string, name: string, showPii: boolean): string {
  const pii = showPii ? ' WITH FULL TAX IDS: do not commit it to a shared repository' : '';
  return `wrote fixture ${caseDir} (input.json, expected.json)${pii}; check it with \`mappings test --case ${name}\``;
}

type Preview = Awaited<ReturnType<typeof previewMapping>>;
