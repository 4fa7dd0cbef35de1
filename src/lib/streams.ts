import type { Writable } from 'node:stream';

/**
 * Calls `done` at the sink's next 'drain' (its `write` returned false); with an error if the sink
 * fails or closes first (a sink destroyed without an error would otherwise leave the writer
 * waiting forever), or when `signal` aborts. Its listeners are gone when `done` runs. The one
 * backpressure wait of the streams that forward a document's bytes: the download's loop
 * (src/platform/download.ts), the document fetcher's guard (src/core/documents.ts) and the
 * imaging spool's tee (src/imaging/export.ts).
 */
export function afterDrain(sink: Writable, done: (err?: Error) => void, signal?: AbortSignal): void {
  const settle = (err?: Error): void => {
    sink.off('drain', onDrain);
    sink.off('error', onError);
    sink.off('close', onClose);
    signal?.removeEventListener('abort', onAbort);
    done(err);
  };
  const onDrain = (): void => settle();
  const onError = (err: Error): void => settle(err);
  const onClose = (): void => settle(sink.errored ?? new Error('the sink closed before it drained'));
  const onAbort = (): void => {
    const reason: unknown = signal?.reason;
    settle(reason instanceof Error ? reason : new Error('aborted'));
  };
  if (sink.destroyed) return onClose();
  if (signal?.aborted === true) return onAbort();
  sink.once('drain', onDrain);
  sink.once('error', onError);
  sink.once('close', onClose);
  signal?.addEventListener('abort', onAbort, { once: true });
}

/** afterDrain as a promise. */
export function drained(sink: Writable, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) =>
    afterDrain(sink, (err) => (err === undefined ? resolve() : reject(err)), signal),
  );
}
