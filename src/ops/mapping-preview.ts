/**
 * `mappings preview --loan ID`: one loan mapped exactly as the pipeline would (its stored queue
 * item when known, else the live one), diffed against what was last boarded; optionally saved as
 * a fixture. Writes nothing to the core or the state (the platform client books its reads).
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FatalError, UsageError } from '../lib/errors.js';
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
