import { createProgressLine, type ProgressLine, type ProgressMode } from '../lib/terminal.js';
import type { ReconcileProgress } from './types.js';
import type { Clock } from '../lib/clock.js';

export interface ProgressBar {
  update(p: ReconcileProgress): void;
  /** Clears the bar line (call before printing results). */
  done(): void;
}

const PHASE_LABEL: Record<ReconcileProgress['phase'], string> = {
  store: 'reading connector state',
  platform: 'walking platform (boarded)',
  core: 'reading core',
  compare: 'comparing',
  write: 'writing report',
};

type TtyLike = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/** A reconciliation phase as a bar with done/total (or a spinner and a count when the total is unknown). */
export function reconcileProgressText(p: ReconcileProgress, columns: number, t: number): string {
  const width = Math.max(10, Math.min(30, columns - 50));
  if (p.total !== null && p.total > 0) {
    const frac = Math.min(1, p.done / p.total);
    const filled = Math.round(frac * width);
    return (
      `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ` +
      `${String(Math.round(frac * 100)).padStart(3)}% ${PHASE_LABEL[p.phase]} ` +
      `${p.done.toLocaleString('en-US')}/${p.total.toLocaleString('en-US')}`
    );
  }
  const spin = '|/-\\'[Math.floor(t / 150) % 4] ?? '|';
  return `[${spin}] ${PHASE_LABEL[p.phase]} ${p.done.toLocaleString('en-US')} loans`;
}

/**
 * The reconciliation's progress on a progress line (src/lib/terminal.ts): a single updating line on
 * a TTY (stderr, so stdout stays clean for results); nothing at all when the stream is not a
 * terminal, unless `--progress=always`. Redraws at most every 100 ms. Pass `line` to share the
 * command's line (it also shows why platform calls wait).
 */
export function createProgressBar(
  stream: TtyLike,
  clock: Clock,
  o: { mode?: ProgressMode; line?: ProgressLine } = {},
): ProgressBar {
  const now = (): number => clock.now();
  const line = o.line ?? createProgressLine(stream, { mode: o.mode ?? 'auto', clock, minIntervalMs: 100 });
  if (!line.enabled) return { update: () => undefined, done: () => undefined };
  return {
    update(p) {
      line.status(reconcileProgressText(p, stream.columns ?? 80, now()));
    },
    done() {
      line.done();
    },
  };
}
