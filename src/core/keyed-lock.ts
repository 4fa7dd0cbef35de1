/**
 * Serialises async work per key inside one process (boards of the same loan, regenerations of the
 * same batch day, creation of a client two loans share). Different keys run concurrently.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.tails.set(key, tail);
    try {
      return await run;
    } finally {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }

  /** Resolves when everything queued so far has settled. */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.tails.values()]);
  }
}
