import { fatalSentence } from '../pipeline/board-loan.js';
import type { CycleProgress, CycleSummary } from '../pipeline/cycle.js';

/**
 * How a `sync --once` cycle ended, as data: the CLI turns each kind into its documented exit status
 * (docs: exit status) and its message. The first that applies wins: another process leads, a fatal
 * refusal, a core outage, traffic stopped after strikes, an incomplete walk (unless we were stopped).
 */
export type CycleVerdict =
  | { kind: 'completed' }
  | { kind: 'busy'; busy: NonNullable<CycleSummary['busy']> }
  | { kind: 'fatal'; sentence: string }
  | { kind: 'core-outage'; failures: number }
  | { kind: 'traffic-stopped' }
  | { kind: 'walk-incomplete'; error: string | null };

export function cycleVerdict(summary: CycleSummary, stopped: boolean): CycleVerdict {
  if (summary.busy) return { kind: 'busy', busy: summary.busy };
  if (summary.fatal) return { kind: 'fatal', sentence: fatalStop(summary.fatal) };
  if (summary.coreOutage) return { kind: 'core-outage', failures: summary.coreOutage.failures };
  if (summary.trafficStopped) return { kind: 'traffic-stopped' };
  if (!summary.walk.complete && !stopped)
    return { kind: 'walk-incomplete', error: summary.walk.error ?? null };
  return { kind: 'completed' };
}

/** What stopped boarding on a fatal failure (a refused key, a refused core login…): `sync --once` and `run` alike. */
export function fatalStop(f: { code: string; message: string }): string {
  return fatalSentence(f.code, f.message);
}

export type { CycleProgress, CycleSummary };
