import { PlatformError } from './errors.js';

/**
 * Caps requests in flight per bucket. The rate budget's token must be taken when the request can
 * leave at once: a token taken while the request then waits in the connection pool's queue would
 * let queued requests arrive in a bunch, and the server counts arrivals, not our tokens.
 */
export class Semaphore {
  private inUse = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(private readonly size: number) {}

  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) throw new PlatformError({ code: 'aborted', message: 'aborted while waiting for a connection slot' });
    if (this.inUse < this.size) {
      this.inUse += 1;
      return this.releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const grant = (): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        const i = this.waiters.indexOf(grant);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new PlatformError({ code: 'aborted', message: 'aborted while waiting for a connection slot' }));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(grant);
    });
    return this.releaser();
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiters.shift();
      // Hand the slot straight to the next waiter: inUse stays the same.
      if (next) next();
      else this.inUse -= 1;
    };
  }
}
