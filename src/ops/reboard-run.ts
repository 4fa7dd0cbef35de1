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
