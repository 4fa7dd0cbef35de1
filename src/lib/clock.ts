/**
 * Injected time source: every "now", sleep and timer in the product goes through it, so tests move
 * time themselves and wait on events instead of wall-clock sleeps or fake timers.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Calls fn once, ms from now on this clock. A timer never keeps the process alive (shutdown is
   * driven by signals and the services' own stop, not by pending timers).
   */
  timeout(ms: number, fn: () => void): Timer;
}

export interface Timer {
  /** Idempotent; a timer that already fired ignores it. */
  cancel(): void;
}

function abortError(signal: AbortSignal | undefined): Error {
  return signal?.reason instanceof Error ? signal.reason : new Error('aborted');
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError(signal));
        return;
      }
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(abortError(signal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
  timeout: (ms, fn) => {
    const t = setTimeout(fn, Math.max(0, ms));
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/**
 * Calls fn every ms on the clock until cancelled: each run is armed after the previous one
 * started, so a slow fn never piles up calls (an async fn is not awaited; it guards itself).
 */
export function every(clock: Clock, ms: number, fn: () => void): Timer {
  let current: Timer | undefined;
  let cancelled = false;
  const arm = (): void => {
    current = clock.timeout(ms, () => {
      if (cancelled) return;
      arm();
      fn();
    });
  };
  arm();
  return {
    cancel: () => {
      cancelled = true;
      current?.cancel();
    },
  };
}
