import type { Clock, Timer } from '../lib/clock.js';

/**
 * Collapses a burst of calls into one trailing call `waitMs` after the last, but never later than
 * `maxWaitMs` after the first, so a steady stream of loan.funded events cannot postpone the early
 * cycle forever. Reasons of the collapsed calls are passed along for the log.
 */
export interface DebouncedTrigger {
  (reason: string): void;
  /** Runs a pending call now (used on shutdown paths and in tests). */
  flush(): void;
  cancel(): void;
  readonly pending: boolean;
}

export function debounceTrigger(
  clock: Clock,
  fn: (reasons: string[]) => void,
  waitMs: number,
  maxWaitMs = Math.max(waitMs * 5, waitMs),
): DebouncedTrigger {
  let timer: Timer | undefined;
  let firstAt = 0;
  let reasons: string[] = [];
  const fire = (): void => {
    timer?.cancel();
    timer = undefined;
    const r = reasons;
    reasons = [];
    if (r.length > 0) fn(r);
  };
  const trigger = ((reason: string) => {
    const now = clock.now();
    if (reasons.length === 0) firstAt = now;
    if (!reasons.includes(reason)) reasons.push(reason);
    timer?.cancel();
    const delay = Math.max(0, Math.min(waitMs, firstAt + maxWaitMs - now));
    // A clock timer never keeps the process alive just for an early cycle.
    timer = clock.timeout(delay, fire);
  }) as DebouncedTrigger;
  trigger.flush = fire;
  trigger.cancel = () => {
    timer?.cancel();
    timer = undefined;
    reasons = [];
  };
  Object.defineProperty(trigger, 'pending', { get: () => reasons.length > 0 });
  return trigger;
}
