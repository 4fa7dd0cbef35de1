/**
 * `mappings preview --loan ID`: one loan mapped exactly as the pipeline would (its stored queue
 * item when known, else the live one), diffed against what was last boarded; optionally saved as
 * a fixture. Writes nothing to the core or the state (the platform client books its reads).
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FatalError, UsageError } from '../lib/errors.js';
import { redactPayload } from '../lib/redact.js';
import { expectedFromOutcome } from '../mapping/fixtures.js';
import { CHANGE_WORDS, diffRecordLists } from '../mapping/record-diff.js';
import { formatIssue, type Mapper, type MappingInput, type MappingOutcome } from '../mapping/types.js';
import { isPlatformError } from '../platform/errors.js';
import type { PlatformApi } from '../platform/api.js';
import { storedCustomers } from '../identity/customer-match.js';
import { mappingIdentity, type AccountNumbers } from '../identity/account-numbers.js';
import {
  fetchMappingInput,
  maskRecords,
  parseBoardedRecords,
  queueItemFor,
  type InputSource,
} from '../pipeline/mapping-input.js';
import type { BoardingStore } from '../store/index.js';
import { commandHint } from '../lib/shell.js';

export { formatIssue, maskRecords, type MappingInput, type MappingOutcome };

export const SOURCE_NOTE: Record<InputSource, string> = {
  stored: 'the queue item the connector stored when it took the loan from the queue (what the pipeline maps)',
  queue: 'the live boarding queue (the connector has not taken this loan yet)',
  loan:
    'the bare loan: it is not in the boarding queue and the ' +
    'connector does not know it, so boarding.* fields map empty',
};

export interface PreviewDeps {
  store: BoardingStore;
  platform: Pick<PlatformApi, 'getLoan' | 'getEntities' | 'listDocuments' | 'boardingQueue'>;
  mapper: Mapper;
  accountNumbers: Pick<AccountNumbers, 'preview'>;
  signal: AbortSignal;
}

/**
 * A full tax id in a saved fixture becomes a synthetic one with the same last 4 digits (the mapping takes the
 * same path).
 */
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
  const { businesses, people } = input.entities;
  return {
    ...input,
    entities: { ...input.entities, businesses: businesses.map(scrub), people: people.map(scrub) },
  };
}

export function checkFixtureName(name: string | undefined): void {
  if (name !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$/.test(name))
    throw new UsageError(
      `--save-fixture: a fixture name is letters, digits, '.', '_' and '-' (at most 81), got ${JSON.stringify(name)}`,
    );
}

/** Reads and maps the loan; `onRead` is told what is read (the stored item, or a queue search). */
export async function previewMapping(
  deps: PreviewDeps,
  loanId: string,
  onRead?: (known: boolean) => void,
): Promise<{
  row: Awaited<ReturnType<BoardingStore['loans']['get']>>;
  source: InputSource;
  input: MappingInput;
  outcome: MappingOutcome;
  boarded: ReturnType<typeof parseBoardedRecords>;
  diff: string[] | null;
}> {
  const { store, platform, signal } = deps;
  const row = await store.loans.get(loanId);
  let input: MappingInput;
  let source: InputSource;
  try {
    onRead?.(Boolean(row?.queueItem));
    const found = await queueItemFor(platform, loanId, row?.queueItem ?? null, signal);
    source = found.source;
    input = await fetchMappingInput(platform, found.item, signal);
  } catch (err) {
    if (isPlatformError(err)) throw new FatalError(`preview ${loanId}: ${err.describe()}`);
    throw err;
  }
  // As the pipeline maps it: the loan's account number (or the one the pool would give it next:
  // nothing is allocated) and the customers its board resolved (CIFs), when it has been boarded.
  input = {
    ...input,
    identity: {
      ...mappingIdentity(await deps.accountNumbers.preview(loanId)),
      customers: storedCustomers(await store.customers.forLoan(loanId)),
    },
  };
  const outcome = await deps.mapper.map(input);
  const boarded = parseBoardedRecords(row?.boardedRecords ?? null);
  const diff =
    boarded && outcome.ok
      ? diffRecordLists(boarded, maskRecords(outcome.records, input), CHANGE_WORDS)
      : null;
  return { row, source, input, outcome, boarded, diff };
}

/** `--save-fixture NAME`: input.json and expected.json under <dir>/fixtures/NAME; the case directory. */
export async function saveFixture(
  mapper: Mapper,
  p: {
    dir: string;
    name: string;
    loanId: string;
    source: InputSource;
    input: MappingInput;
    showPii: boolean;
  },
): Promise<string> {
  const saved = fixtureInput(p.input, p.showPii);
  const savedOutcome = await mapper.map(saved);
  const caseDir = join(p.dir, 'fixtures', p.name);
  if (existsSync(caseDir))
    throw new UsageError(`--save-fixture: ${caseDir} exists already; pick another name or remove it`);
  mkdirSync(caseDir, { recursive: true });
  const description = `loan ${p.loanId}, saved by mappings preview (${SOURCE_NOTE[p.source]})`;
  writeFileSync(join(caseDir, 'input.json'), `${JSON.stringify({ description, ...saved }, null, 2)}\n`);
  writeFileSync(
    join(caseDir, 'expected.json'),
    `${JSON.stringify(expectedFromOutcome(savedOutcome), null, 2)}\n`,
  );
  return caseDir;
}

/**
 * The mapping outcome as text: records (tax ids masked unless showPii) and review items, or the issues that
 * quarantine it.
 */
export function outcomeText(
  dir: string,
  outcome: MappingOutcome,
  showPii: boolean,
  input: MappingInput,
): string {
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

type Preview = Awaited<ReturnType<typeof previewMapping>>;

/** `mappings preview --json`: input, outcome and diff (tax ids masked unless showPii). */
export function previewJson(loanId: string, p: Preview, showPii: boolean): string {
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
export function previewText(dir: string, loanId: string, p: Preview, showPii: boolean): string {
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
export function savedFixtureText(caseDir: string, name: string, showPii: boolean): string {
  const pii = showPii ? ' WITH FULL TAX IDS: do not commit it to a shared repository' : '';
  return `wrote fixture ${caseDir} (input.json, expected.json)${pii}; check it with \`mappings test --case ${name}\``;
}
