import type { Clock } from '../../../src/lib/clock.js';

/** A clock that only moves when the test says so; sleepers wake in deadline order. */
export class FakeClock implements Clock {
  private t: number;
  private sleepers: Array<{ until: number; resolve: () => void }> = [];

  constructor(start = 1_800_000_000_000) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(new Error('aborted'));
        return;
      }
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

  /** Moves time forward, waking sleepers in order and letting their continuations run. */
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
