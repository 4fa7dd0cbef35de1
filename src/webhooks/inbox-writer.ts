import type { WebhookEvent } from './event.js';
import type { WebhookInbox } from './inbox.js';

/**
 * Group commit for the inbox. Every delivery must be on disk before its 2xx, and with
 * synchronous=FULL each commit costs an fsync (milliseconds, blocking the event loop). Deliveries
 * that arrive together are therefore written in one transaction on the next turn of the event
 * loop: one fsync for the whole batch, each request answered once its row is durable.
 */
export interface InboxWriter {
  /** Resolves true when stored, false for a duplicate; rejects when the write failed. */
  write(event: WebhookEvent, receivedAt: number): Promise<boolean>;
}

interface Pending {
  event: WebhookEvent;
  receivedAt: number;
  resolve: (inserted: boolean) => void;
  reject: (err: unknown) => void;
}

export function createInboxWriter(inbox: Pick<WebhookInbox, 'insertMany'>, opts: { maxBatch?: number } = {}): InboxWriter {
  const maxBatch = opts.maxBatch ?? 256;
  let queue: Pending[] = [];
  let scheduled = false;

  const flush = (): void => {
    scheduled = false;
    while (queue.length > 0) {
      const batch = queue.slice(0, maxBatch);
      queue = queue.slice(batch.length);
      let results: boolean[];
      try {
        results = inbox.insertMany(batch);
      } catch (err) {
        for (const p of batch) p.reject(err);
        continue;
      }
      batch.forEach((p, i) => p.resolve(results[i] ?? false));
    }
  };

  return {
    write(event, receivedAt) {
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ event, receivedAt, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
  };
}
