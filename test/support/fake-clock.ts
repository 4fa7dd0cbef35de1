import type { Clock, Timer } from '../../src/lib/clock.js';

export interface FakeClockOptions {
  /** Epoch ms the clock starts at. */
  start?: number;
  /**
   * `manual` (default): `sleep` waits until the test advances time past its deadline; sleepers wake
   * in deadline order. `auto`: `sleep` moves time forward itself and returns at once (a pipeline
   * test that only needs retries and back-offs to take no real time).
   */
  sleep?: 'manual' | 'auto';
}

/** The tests' clock: time moves only when the test (or, with `sleep: 'auto'`, a sleeper) says so. */
export class FakeClock implements Clock {
  private t: number;
  private readonly auto: boolean;
  /** Sleepers and timers, woken in deadline order (then in the order they were set). */
  private sleepers: Array<{ until: number; resolve: () => void }> = [];

  constructor(opts: FakeClockOptions = {}) {
    this.t = opts.start ?? Date.parse('2026-03-01T12:00:00Z');
    this.auto = opts.sleep === 'auto';
  }

  now(): number {
    return this.t;
  }

  /** Jumps to an instant (never backwards: a clock that runs back is not a case the code handles). */
  set(ms: number): void {
    if (ms < this.t) throw new Error(`FakeClock.set: ${ms} is before now (${this.t})`);
    this.t = ms;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(new Error('aborted'));
    if (this.auto) {
      this.t += Math.max(0, ms);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const entry = { until: this.t + Math.max(0, ms), resolve };
      this.sleepers.push(entry);
      signal?.addEventListener(
        'abort',
        () => {
          this.sleepers = this.sleepers.filter((s) => s !== entry);
          reject(new Error('aborted'));
        },
        { once: true },
      );
    });
  }

  /**
   * A timer on this clock: fires when a test advances time past its deadline (with `sleep: 'auto'`
   * too: only advance() or a sleeper moves time, never the timer itself).
   */
  timeout(ms: number, fn: () => void): Timer {
    const entry = { until: this.t + Math.max(0, ms), resolve: fn };
    this.sleepers.push(entry);
    return {
      cancel: () => {
        this.sleepers = this.sleepers.filter((s) => s !== entry);
      },
    };
  }

  /**
   * Moves time forward, waking sleepers in deadline order and letting their continuations run
   * (a continuation that sleeps again within the span is woken too). Time has moved when this
   * returns; awaiting it also lets the woken code run.
   */
  async advance(ms: number): Promise<void> {
    const target = this.t + ms;
    for (;;) {
      await settle();
      const due = this.sleepers.filter((s) => s.until <= target).sort((a, b) => a.until - b.until)[0];
      if (!due) break;
      this.t = Math.max(this.t, due.until);
      this.sleepers = this.sleepers.filter((s) => s !== due);
      due.resolve();
    }
    this.t = target;
    await settle();
  }

  pendingSleepers(): number {
    return this.sleepers.length;
  }
}

/** Lets queued promise continuations run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/**
 * A clock read from a variable the test moves itself (`let now = …; clockReading(() => now)`):
 * sleeps return at once and a timer is an error, so a test that relies on time moving by itself
 * fails loudly instead of hanging.
 */
export function clockReading(now: () => number): Clock {
  return {
    now,
    sleep: async () => {},
    timeout: () => {
      throw new Error('clockReading(): this test clock has no timers; use FakeClock');
    },
  };
}
