import type { Writable } from 'node:stream';
import type { ReconcileProgress } from './types.js';

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

type TtyLike = Writable & { isTTY?: boolean; columns?: number };

/**
 * A single updating progress line on a TTY (stderr, so stdout stays clean for results); nothing at
 * all when the stream is not a terminal (logs say what happened). Redraws at most every 100 ms.
 */
export function createProgressBar(stream: TtyLike, now: () => number = Date.now): ProgressBar {
  if (stream.isTTY !== true) return { update: () => undefined, done: () => undefined };
  let last = 0;
  let lastPhase: string | null = null;
  let drawn = false;
  return {
    update(p) {
      const t = now();
      if (p.phase === lastPhase && t - last < 100 && p.done !== p.total) return;
      last = t;
      lastPhase = p.phase;
      const width = Math.max(10, Math.min(30, (stream.columns ?? 80) - 50));
      let line: string;
      if (p.total !== null && p.total > 0) {
        const frac = Math.min(1, p.done / p.total);
        const filled = Math.round(frac * width);
        line = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.round(frac * 100)).padStart(3)}% ${PHASE_LABEL[p.phase]} ${p.done.toLocaleString('en-US')}/${p.total.toLocaleString('en-US')}`;
      } else {
        const spin = '|/-\\'[Math.floor(t / 150) % 4] ?? '|';
        line = `[${spin}] ${PHASE_LABEL[p.phase]} ${p.done.toLocaleString('en-US')} loans`;
      }
      stream.write(`\r\x1b[2K${line}`);
      drawn = true;
    },
    done() {
      if (drawn) stream.write('\r\x1b[2K');
      drawn = false;
    },
  };
}
