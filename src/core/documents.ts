import { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Logger } from '../lib/logger.js';
import type { PlatformApi } from '../platform/api.js';
import type { DocumentFetcher } from './port.js';
import { afterDrain } from '../lib/streams.js';

export interface DocumentFetcherOptions {
  /** Size cap per document (config `boarding.documentMaxBytes`); the platform client enforces it. */
  maxBytes: number;
  /** Per-document overall deadline (config `boarding.documentDeadlineMs`). */
  deadlineMs?: number;
  logger: Logger;
}

/**
 * Fetches a document for a core adapter: asks the platform for the presigned download address,
 * streams the bytes into the adapter's sink (the platform client sends no Authorization header to
 * the blob host), and asks for a new address once if the first had expired (addresses live
 * 5 minutes; a slow queue or a large earlier document can outlive one).
 *
 * Each attempt writes through a guard, so a failed attempt never destroys or ends the adapter's
 * sink; a retry is only made when the failed attempt wrote nothing, so bytes are never doubled.
 * On success the sink is ended and flushed before the promise resolves.
 */
export function createDocumentFetcher(platform: PlatformApi, opts: DocumentFetcherOptions): DocumentFetcher {
  const logger = opts.logger.child({ component: 'core.documents' });
  return async (doc, sink, signal) => {
    const readOpts = signal ? { signal } : {};
    for (let attempt = 1; ; attempt += 1) {
      const address = await platform.getDownloadAddress(doc.id, readOpts);
      const guard = new SinkGuard(sink);
      try {
        const limits = {
          maxBytes: opts.maxBytes,
          ...(opts.deadlineMs !== undefined ? { deadlineMs: opts.deadlineMs } : {}),
        };
        const res = await platform.download(address.url, guard, signal ? { ...limits, signal } : limits);
        if (!guard.writableFinished) {
          guard.end();
          await finished(guard);
        }
        sink.end();
        await finished(sink);
        if (typeof doc.size === 'number' && doc.size !== res.bytes) {
          // The listed size is informational (not documented as exact): keep the bytes, say so.
          logger.warn(
            { documentId: doc.id, listed: doc.size, received: res.bytes },
            'document size differs from the listed size',
          );
        }
        return res;
      } catch (err) {
        guard.destroy();
        if (attempt === 1 && guard.bytes === 0 && isExpiredAddress(err) && signal?.aborted !== true) {
          logger.info({ documentId: doc.id }, 'download address refused (expired?): requesting a new one');
          continue;
        }
        throw err;
      }
    }
  };
}

/** A presigned address that expired: the platform client's code, or the blob host's 403/410. */
export function isExpiredAddress(err: unknown): boolean {
  if (err === null || typeof err !== 'object') return false;
  const e = err as { code?: unknown; status?: unknown; serverCode?: unknown };
  if (e.code === 'download.expired' || e.serverCode === 'download.expired') return true;
  return (
    typeof e.code === 'string' && e.code.startsWith('download.') && (e.status === 403 || e.status === 410)
  );
}

/** Forwards writes to the real sink with backpressure; ending or destroying it leaves the sink alone. */
class SinkGuard extends Writable {
  bytes = 0;
  constructor(private readonly target: Writable) {
    super();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.bytes += chunk.length;
    if (this.target.destroyed) {
      cb(new Error('document sink closed'));
      return;
    }
    if (this.target.write(chunk)) cb();
    else afterDrain(this.target, cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    cb();
  }
}
