/**
 * `loans reboard` over several loans (ids, or every acknowledged loan of one mapping version) and
 * its dry run. One loan at a time: a re-board writes to the core, and before each one the command
 * checks again that a running daemon boards with the same mapping version (a long run may see the
 * daemon reload meanwhile; one version boards at a time).
 */
import { UsageError } from '../lib/errors.js';
import type { BoardingStore } from '../store/index.js';
import { assertSameMappingAsDaemon } from './daemon-guard.js';
import {
  previewReboard,
  reboardLoan,
  type ReboardDeps,
  type ReboardPreview,
  type ReboardPreviewDeps,
  type ReboardResult,
} from './reboard.js';

export type { ReboardPreview, ReboardResult } from './reboard.js';

/** The loans a re-board names: given ids (once each), or every acknowledged loan boarded with a mapping version. */
export async function reboardTargets(
  store: Pick<BoardingStore, 'loans'>,
  input: { ids: readonly string[]; mappingVersion?: string | undefined },
): Promise<string[]> {
  if (input.ids.length > 0 === (input.mappingVersion !== undefined))
    throw new UsageError('loans reboard: give loan ids or --mapping-version V (one of them)');
  if (input.mappingVersion === undefined) return [...new Set(input.ids)];
  return (await store.loans.list({ state: 'acknowledged' }))
    .filter((r) => r.mappingVersion === input.mappingVersion)
    .map((r) => r.id);
}

export interface ReboardRunInput {
  ids: readonly string[];
  actor: string;
  reason: string;
  force: boolean;
  signal: AbortSignal;
  /** The mapping this process loaded, checked against a running daemon's before every loan. */
  mappingDir: string;
  command: string;
  onLoan?: (r: ReboardResult, index: number) => void;
  beforeLoan?: (id: string, index: number) => void;
}

/** Refuses (ConfigError) when a running daemon boards with another mapping version than deps.mapper. */
export function assertReboardMapping(
  deps: Pick<ReboardDeps, 'store' | 'mapper' | 'clock'>,
  input: Pick<ReboardRunInput, 'mappingDir' | 'command'>,
): Promise<void> {
  const mine = { version: deps.mapper.version, dir: input.mappingDir };
  return assertSameMappingAsDaemon(deps.store.daemon, mine, deps.clock.now(), input.command);
}

/** Re-boards loans one at a time; a stop (signal) ends it between loans. */
export async function reboardLoans(deps: ReboardDeps, input: ReboardRunInput): Promise<ReboardResult[]> {
  const results: ReboardResult[] = [];
  for (const [i, id] of input.ids.entries()) {
    if (input.signal.aborted) break;
    input.beforeLoan?.(id, i);
    await assertReboardMapping(deps, input);
    const r = await reboardLoan(deps, id, {
      actor: input.actor,
      reason: input.reason,
      force: input.force,
      signal: input.signal,
    });
    results.push(r);
    input.onLoan?.(r, i);
  }
  return results;
}

/** The dry run: per loan, what a re-board would write; reads and maps only (no core, no state change). */
export async function previewReboards(
  deps: ReboardPreviewDeps,
  input: Pick<ReboardRunInput, 'ids' | 'force' | 'signal' | 'beforeLoan'> & {
    onLoan?: (r: ReboardPreview, index: number) => void;
  },
): Promise<ReboardPreview[]> {
  const results: ReboardPreview[] = [];
  for (const [i, id] of input.ids.entries()) {
    if (input.signal.aborted) break;
    input.beforeLoan?.(id, i);
    const r = await previewReboard(deps, id, { force: input.force, signal: input.signal });
    results.push(r);
    input.onLoan?.(r, i);
  }
  return results;
}

/** Counts of results by outcome. */
export function countOutcomes<T extends { outcome: string }>(results: readonly T[]): Record<string, number> {
  const n: Record<string, number> = {};
  for (const r of results) n[r.outcome] = (n[r.outcome] ?? 0) + 1;
  return n;
}

const changeLines = (changes: readonly string[]): string[] => [
  ...changes.slice(0, 30).map((c) => `    ${c}`),
  ...(changes.length > 30 ? [`    … ${changes.length - 30} more`] : []),
];

/** One re-board's outcome as a line (and its field changes). */
export function reboardText(
  r: ReboardResult | Exclude<ReboardPreview, { outcome: 'would_rewrite' }>,
): string {
  const id = `loan ${r.loanId}`;
  switch (r.outcome) {
    case 'rewritten':
      return [
        `${id}: re-boarded (${r.previousVersion ?? '?'} → ${r.mappingVersion}; core ${r.coreReference})`,
        ...changeLines(r.changes),
      ].join('\n');
    case 'unchanged':
      return `${id}: unchanged (already boarded with ${r.mappingVersion} from the same data; --force to write anyway)`;
    case 'would_quarantine':
      return `${id}: NOT re-boarded: the mapping would quarantine it (${r.reason}): ${r.message}`;
    case 'not_acknowledged':
      return `${id}: NOT re-boarded: it is ${r.state}, not acknowledged (use \`loans retry\`)`;
    case 'failed':
      return `${id}: FAILED: ${r.message} (the core keeps its earlier records)`;
  }
}

/** One dry-run preview as a line (and the field changes it would write). */
export function previewText(r: ReboardPreview): string {
  if (r.outcome === 'unchanged')
    return (
      `loan ${r.loanId}: unchanged (already boarded with ` +
      `${r.mappingVersion} from the same data; --force would write anyway)`
    );
  if (r.outcome === 'failed') return `loan ${r.loanId}: could not be read: ${r.message}`;
  if (r.outcome !== 'would_rewrite') return reboardText(r);
  const what = r.changes.length === 0 ? 'no field changes' : `${r.changes.length} change(s)`;
  return [
    `loan ${r.loanId}: would re-write (${r.previousVersion ?? '?'} → ${r.mappingVersion}): ${what}`,
    ...changeLines(r.changes),
  ].join('\n');
}

/** The last line of `loans reboard --dry-run`. */
export function previewSummaryText(
  results: readonly ReboardPreview[],
  targets: number,
  version: string,
): string {
  if (targets === 0) return 'no acknowledged loans match: nothing would be re-boarded';
  const n = countOutcomes(results);
  const [rewrite, same] = [n['would_rewrite'] ?? 0, n['unchanged'] ?? 0];
  return (
    `dry run with mapping ${version}: ${rewrite} would be re-written, ${same} unchanged, ` +
    `${results.length - rewrite - same} would not be ` +
    `re-boarded; nothing was written to the core, no state changed`
  );
}

/**
 * The last line of `loans reboard`, and how many loans were not re-boarded (failed, would quarantine, not
 * acknowledged).
 */
export function reboardSummaryText(
  results: readonly ReboardResult[],
  targets: number,
  version: string,
): { text: string; notReboarded: number } {
  const n = countOutcomes(results);
  const [rewritten, same] = [n['rewritten'] ?? 0, n['unchanged'] ?? 0];
  const notReboarded = results.length - rewritten - same;
  return {
    notReboarded,
    text:
      targets === 0
        ? 'no acknowledged loans match: nothing re-boarded'
        : `${rewritten} re-boarded, ${same} unchanged, ${notReboarded} ` +
          `not re-boarded (mapping ${version}; no acknowledgement sent)`,
  };
}
