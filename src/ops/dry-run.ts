import { errorMessage } from '../lib/errors.js';
import { CHANGE_WORDS, diffRecordLists } from '../mapping/record-diff.js';
import type { Mapper, MappingInput, MappingIssue, MappingOutcome } from '../mapping/types.js';
import type { PlatformApi } from '../platform/api.js';
import type { QueueItem } from '../contract/schemas.js';
import { quarantineReasonFor } from '../pipeline/board-loan.js';
import { fetchMappingInput, maskRecords } from '../pipeline/mapping-input.js';
import { dispositionOf } from '../pipeline/failures.js';
import { mappingIdentity } from '../identity/account-numbers.js';

export type DryRunVerdict = 'board' | 'board_with_warnings' | 'quarantine';

/** One line of the coverage table: how many loans got this verdict for this reason and field. */
export interface CoverageRow {
  verdict: DryRunVerdict;
  /** The quarantine reason or review item code ('' for a clean board). */
  reason: string;
  /** The record field at fault, e.g. loan.interestOnlyPeriods ('' for a clean board). */
  field: string;
  loans: number;
  examples: string[];
}

export interface DryRunChange {
  loanId: string;
  /** Field-level differences, baseline (`--against`) → the mapping under test. */
  diffs: string[];
}

export interface DryRunReport {
  mappingVersion: string;
  againstVersion: string | null;
  /** Loans the queue listed and were mapped. */
  loans: number;
  verdicts: Record<DryRunVerdict, number>;
  rows: CoverageRow[];
  /** Items the queue listed that fail the platform schema: the pipeline quarantines them (validation). */
  invalid: Array<{ loanId: string | null; message: string }>;
  /** Loans whose entities or documents could not be read (they were not mapped). */
  unreadable: Array<{ loanId: string; message: string }>;
  /** With `against`: loans whose records or verdict differ between the two sets. */
  changes: DryRunChange[] | null;
  complete: boolean;
}

export interface DryRunDeps {
  platform: Pick<PlatformApi, 'boardingQueue' | 'getEntities' | 'listDocuments'>;
  mapper: Mapper;
  /** A second mapping set to compare with (the baseline). */
  against?: Mapper;
  /** Stop after this many loans. */
  limit?: number;
  concurrency?: number;
  signal?: AbortSignal;
  onProgress?: (mapped: number) => void;
  /** The account number a loan maps with (identity.ts preview: its own, else the pool's next; nothing allocated). */
  accountNumberOf?: (loanId: string) => Promise<string | null>;
}

const EXAMPLES = 3;

function verdictOf(o: MappingOutcome): DryRunVerdict {
  if (!o.ok) return 'quarantine';
  return (o.warnings?.length ?? 0) > 0 ? 'board_with_warnings' : 'board';
}

/** What each verdict is charged to: one row per distinct (reason, field) of the loan. */
function keysOf(o: MappingOutcome): Array<{ reason: string; field: string }> {
  const issues: readonly MappingIssue[] = o.ok ? (o.warnings ?? []) : o.issues;
  if (issues.length === 0) return [{ reason: '', field: '' }];
  const seen = new Map<string, { reason: string; field: string }>();
  const loanReason = o.ok ? null : quarantineReasonFor(o.issues);
  for (const i of issues) {
    const k = { reason: loanReason ?? i.code, field: `${i.target}.${i.field}` };
    seen.set(`${k.reason}\u0000${k.field}`, k);
  }
  return [...seen.values()];
}

function outcomeLine(o: MappingOutcome): string {
  return o.ok ? verdictOf(o) : `quarantine (${quarantineReasonFor(o.issues)})`;
}

/**
 * A shadow run: walks the live boarding queue with reads only (inside the rate budget, since the
 * platform client spends from it), maps every loan with `mapper` and, when given, `against`, and
 * writes nothing anywhere: no core write, no acknowledgement, no loan row. What a bank wants to see
 * before it goes live or rolls out an edit.
 */
export async function dryRun(deps: DryRunDeps): Promise<DryRunReport> {
  const rows = new Map<string, CoverageRow>();
  const report: DryRunReport = {
    mappingVersion: deps.mapper.version,
    againstVersion: deps.against?.version ?? null,
    loans: 0,
    verdicts: { board: 0, board_with_warnings: 0, quarantine: 0 },
    rows: [],
    invalid: [],
    unreadable: [],
    changes: deps.against ? [] : null,
    complete: true,
  };
  const limit = deps.limit ?? Number.POSITIVE_INFINITY;
  const concurrency = Math.max(1, deps.concurrency ?? 4);
  let taken = 0;

  async function one(item: QueueItem): Promise<void> {
    let input: MappingInput;
    try {
      input = await fetchMappingInput(deps.platform, item, deps.signal);
    } catch (err) {
      // Refused credentials, or all traffic stopped after rate-limit strikes: every next loan would
      // fail alike, so the run ends here (sync --dry-run exits 1 or 4, as sync --once does).
      const d = dispositionOf(err);
      if (deps.signal?.aborted || d === 'fatal' || d === 'stop-cycle') throw err;
      report.unreadable.push({ loanId: item.id, message: errorMessage(err).slice(0, 300) });
      return;
    }
    input = { ...input, identity: mappingIdentity((await deps.accountNumberOf?.(item.id)) ?? null) };
    const outcome = await deps.mapper.map(input);
    const verdict = verdictOf(outcome);
    report.loans += 1;
    report.verdicts[verdict] += 1;
    for (const k of keysOf(outcome)) {
      const key = `${verdict}\u0000${k.reason}\u0000${k.field}`;
      let row = rows.get(key);
      if (!row) rows.set(key, (row = { verdict, reason: k.reason, field: k.field, loans: 0, examples: [] }));
      row.loans += 1;
      if (row.examples.length < EXAMPLES) row.examples.push(item.id);
    }
    if (deps.against && report.changes) {
      const base = await deps.against.map(input);
      const diffs: string[] = [];
      // The line carries the quarantine reason: a loan quarantined for another reason is a change too.
      if (outcomeLine(base) !== outcomeLine(outcome))
        diffs.push(`outcome: was ${outcomeLine(base)}, now ${outcomeLine(outcome)}`);
      // Compared masked on both sides: the report may be shared; a tax id change still shows as a change of
      // its last digits.
      if (base.ok && outcome.ok)
        diffs.push(
          ...diffRecordLists(
            maskRecords(base.records, input),
            maskRecords(outcome.records, input),
            CHANGE_WORDS,
          ),
        );
      if (diffs.length > 0) report.changes.push({ loanId: item.id, diffs });
    }
    deps.onProgress?.(report.loans);
  }

  walk: for await (const page of deps.platform.boardingQueue(deps.signal ? { signal: deps.signal } : {})) {
    for (const bad of page.invalid)
      report.invalid.push({ loanId: bad.id, message: bad.problems.join('; ').slice(0, 300) });
    const items = page.items.slice(0, Math.max(0, limit - taken));
    taken += items.length;
    for (let i = 0; i < items.length; i += concurrency) {
      await Promise.all(items.slice(i, i + concurrency).map(one));
    }
    if (taken >= limit) {
      report.complete = !page.hasMore && items.length === page.items.length;
      break walk;
    }
  }
  const order: Record<DryRunVerdict, number> = { quarantine: 0, board_with_warnings: 1, board: 2 };
  report.rows = [...rows.values()].sort(
    (a, b) =>
      order[a.verdict] - order[b.verdict] ||
      b.loans - a.loans ||
      a.reason.localeCompare(b.reason) ||
      a.field.localeCompare(b.field),
  );
  return report;
}
