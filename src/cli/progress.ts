import type { CycleProgress } from '../ops/sync.js';
import type { ProgressLine } from '../lib/terminal.js';
import type { Bucket, PlatformWait, PlatformWaits } from '../ops/platform-status.js';

/**
 * Shows the waits of platform calls on the progress line, with the reason the rate budget or the
 * client gives (`waiting 12 s for the read budget`, `paused after a 429 until T`, a retry's
 * backoff). Returns the unsubscribe (also safe to ignore: the client goes with the command).
 */
export function followPlatformWaits(progress: ProgressLine, platform: PlatformWaits): () => void {
  if (!progress.enabled || platform.onWait === undefined) return () => undefined;
  let shown: Bucket | null = null;
  return platform.onWait((w) => {
    if (w.kind === 'resumed') {
      // A call of another bucket going out does not end this bucket's wait.
      if (shown === w.bucket) {
        shown = null;
        progress.resume();
      }
      return;
    }
    shown = w.bucket;
    progress.wait((remainingMs) => describeWait(w, remainingMs), w.until);
  });
}

/** A boarding cycle's progress as the line shows it. */
export function showCycleProgress(progress: ProgressLine, p: CycleProgress): void {
  switch (p.phase) {
    case 'walk':
      progress.status(`walking the boarding queue: ${p.items} loan(s) in ${p.pages} page(s)`);
      return;
    case 'board':
      progress.status(
        `boarding ${p.done}/${p.total}` +
          (p.pass > 1 ? ` (pass ${p.pass}: loans a short failure put in retry_wait)` : ''),
      );
      return;
    case 'settle':
      progress.wait(
        (ms) => `waiting ${Math.max(1, Math.ceil(ms / 1000))} s to retry ${p.loans} loan(s) in retry_wait`,
        p.until,
      );
      return;
  }
}

/** A wait as a progress line shows it, `remainingMs` before it ends. */
export function describeWait(w: Exclude<PlatformWait, { kind: 'resumed' }>, remainingMs: number): string {
  const s = Math.max(1, Math.ceil(remainingMs / 1000));
  switch (w.kind) {
    case 'budget':
      return (
        `waiting ${s} s for the ${w.bucket} ` +
        `budget${w.reason === 'server' ? ' (the platform says none remain)' : ''}`
      );
    case 'paused':
      return `paused after a 429 until ${new Date(w.until).toISOString().slice(11, 19)}Z (${s} s, ${w.bucket}s)`;
    case 'retry':
      return `retrying ${w.operation} in ${s} s after ${w.cause}`;
  }
}
