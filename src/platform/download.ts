import { createHash } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Dispatcher } from 'undici';
import type { Logger } from '../lib/logger.js';
import type { DownloadResult } from './api.js';
import { findRefusal, type DocumentHostGuard } from './download-guard.js';
import { classifyThrown, PlatformError } from './errors.js';
import { redactUrl } from '../lib/redact.js';
import { withLinkedSignal } from '../lib/signals.js';
import { drained } from '../lib/streams.js';

/**
 * Fetches a presigned address. The signature in the query string IS the credential, so: no
 * Authorization header (the request is built here with an explicit header list, on a dispatcher
 * that never carries the API key), and the query string never reaches a log line or an error
 * message. The body streams into the caller's sink through a meter that hashes and counts, and
 * aborts past maxBytes. On any failure the sink is destroyed: the caller discards the partial file.
 */
export interface DownloadDeps {
  /** Must connect through `guard.lookup` (download-guard.ts): the resolved addresses are checked there. */
  dispatcher: Dispatcher;
  /** Where downloads may go: no loopback, private or other special address unless allow-listed. */
  guard: DocumentHostGuard;
  logger: Logger;
  userAgent: string;
  /** Production: a presigned address over plain http is refused (the signature is the credential). */
  httpsOnly?: boolean;
  onOutcome?: (outcome: 'ok' | 'failed') => void;
}

export interface DownloadOptions {
  maxBytes: number;
  signal?: AbortSignal;
  /**
   * The whole download must finish within this: the idle timeouts only bound the gap between
   * bytes, so a host dripping one byte a second would otherwise hold a loan for days.
   */
  deadlineMs?: number;
}

/** The presigned address as a URL and as logs may show it (no query string), or why it is refused. */
function parseAddress(address: string, httpsOnly: boolean): { url: URL; where: string } {
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    throw new PlatformError({ code: 'download.failed', message: 'download: the address is not a valid URL' });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new PlatformError({
      code: 'download.failed',
      message: `download: unsupported scheme ${url.protocol}`,
    });
  }
  const where = redactUrl(url);
  if (httpsOnly && url.protocol !== 'https:') {
    throw new PlatformError({
      code: 'download.failed',
      message: `download: ${where} is not https; refused with platform.environment: production`,
    });
  }
  return { url, where };
}

export async function downloadPresigned(
  deps: DownloadDeps,
  address: string,
  sink: Writable,
  opts: DownloadOptions,
): Promise<DownloadResult> {
  const ms = opts.deadlineMs;
  if (ms === undefined) return downloadWithin(deps, address, sink, opts, opts.signal, undefined);
  // A timer cleared when the download ends: AbortSignal.timeout keeps its timer (and a WeakRef)
  // for the whole deadline after every download, 10 minutes by default (a soak's heap snapshots
  // counted them). The caller's signal may live as long as the daemon: linked for this download only.
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new DOMException(`download deadline of ${ms} ms`, 'TimeoutError')),
    ms,
  );
  timer.unref();
  try {
    return await withLinkedSignal([opts.signal, deadline.signal], (signal) =>
      downloadWithin(deps, address, sink, opts, signal, deadline.signal),
    );
  } finally {
    clearTimeout(timer);
  }
}

async function downloadWithin(
  deps: DownloadDeps,
  address: string,
  sink: Writable,
  opts: DownloadOptions,
  signal: AbortSignal | undefined,
  deadline: AbortSignal | undefined,
): Promise<DownloadResult> {
  const { url, where } = parseAddress(address, deps.httpsOnly === true);
  // A refusal's sentence first (what to change), the address after it: a queue shows the start.
  const literal = deps.guard.checkLiteral(url.hostname);
  if (literal !== null) {
    deps.onOutcome?.('failed');
    sink.destroy();
    deps.logger.warn({ url: where, code: 'download.refused' }, 'document download refused');
    throw new PlatformError({
      code: 'download.refused',
      operation: 'download',
      method: 'GET',
      path: where,
      message: `${literal} (GET ${where})`,
    });
  }
  const overDeadline = (): PlatformError | null =>
    deadline?.aborted === true && opts.signal?.aborted !== true
      ? new PlatformError({
          code: 'download.failed',
          operation: 'download',
          method: 'GET',
          path: where,
          message:
            `GET ${where}: the download did not finish within ${opts.deadlineMs} ms ` +
            `(boarding.documentDeadlineMs)`,
        })
      : null;
  const ctx = { operation: 'download', method: 'GET', path: where };
  const started = Date.now();
  let res: Dispatcher.ResponseData;
  try {
    res = await deps.dispatcher.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      // Explicit and complete: nothing else is ever sent to a presigned address.
      headers: { 'user-agent': deps.userAgent, accept: '*/*' },
      signal: signal ?? null,
    });
  } catch (err) {
    deps.onOutcome?.('failed');
    sink.destroy();
    const refused = findRefusal(err);
    if (refused !== null) {
      deps.logger.warn({ url: where, code: 'download.refused' }, 'document download refused');
      throw new PlatformError({
        code: 'download.refused',
        operation: 'download',
        method: 'GET',
        path: where,
        message: `${refused.message} (GET ${where})`,
        cause: err,
      });
    }
    throw overDeadline() ?? classifyThrown(ctx, err, opts.signal);
  }
  const fail = async (
    code: 'download.expired' | 'download.not_found' | 'download.failed' | 'download.too_large',
    message: string,
  ): Promise<never> => {
    await res.body.dump().catch(() => undefined);
    deps.onOutcome?.('failed');
    sink.destroy();
    deps.logger.warn({ url: where, status: res.statusCode, code }, 'document download failed');
    throw new PlatformError({
      code,
      status: res.statusCode,
      operation: 'download',
      method: 'GET',
      path: where,
      message,
    });
  };
  if (res.statusCode === 400 || res.statusCode === 401 || res.statusCode === 403 || res.statusCode === 410) {
    return fail(
      'download.expired',
      `GET ${where} → ${res.statusCode}: the download address was refused (presigned addresses expire after 5 ` +
        `minutes): request a new one`,
    );
  }
  if (res.statusCode === 404)
    return fail('download.not_found', `GET ${where} → 404: no file at the download address`);
  if (res.statusCode < 200 || res.statusCode >= 300)
    return fail('download.failed', `GET ${where} → ${res.statusCode}`);
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > opts.maxBytes) {
    return fail(
      'download.too_large',
      `GET ${where}: content-length ${declared} exceeds the ${opts.maxBytes}-byte cap`,
    );
  }
  const hash = createHash('sha256');
  let bytes = 0;
  const meter = (chunk: Buffer): void => {
    bytes += chunk.length;
    if (bytes > opts.maxBytes) {
      throw new PlatformError({
        code: 'download.too_large',
        operation: 'download',
        method: 'GET',
        path: where,
        message: `GET ${where}: body exceeds the ${opts.maxBytes}-byte cap`,
      });
    }
    hash.update(chunk);
  };
  try {
    await pumpInto(res.body, sink, meter, signal);
  } catch (err) {
    deps.onOutcome?.('failed');
    const e = err instanceof PlatformError ? err : (overDeadline() ?? classifyThrown(ctx, err, opts.signal));
    deps.logger.warn({ url: where, code: e.code, bytes }, 'document download aborted');
    throw e;
  }
  deps.onOutcome?.('ok');
  const ct = res.headers['content-type'];
  deps.logger.debug({ url: where, bytes, ms: Date.now() - started }, 'document downloaded');
  return { sha256: hash.digest('hex'), bytes, contentType: typeof ct === 'string' ? ct : null };
}

/**
 * The body into the sink, each chunk shown to `onChunk` first (it may throw to stop), with the
 * sink's backpressure; then the sink ended and finished. On a failure of the body, the sink,
 * onChunk or the signal, both streams are destroyed and the first error is thrown. What
 * `pipeline(body, meter, sink)` did, without the Transform and the AbortController pipeline makes
 * for each call and aborts at its end: a DOMException with its stack for every document (issue 44).
 */
export async function pumpInto(
  body: Readable,
  sink: Writable,
  onChunk: (chunk: Buffer) => void,
  signal?: AbortSignal,
): Promise<void> {
  // Set by the sink's listeners (a cast, so the checks below are not narrowed to null).
  let failed = null as { err: Error } | null;
  // A sink that fails while the body is quiet stops the body at once (it may be stalled).
  const onSinkFailed = (): void => {
    if (sink.writableFinished) return;
    const err = sink.errored ?? sinkClosed();
    failed ??= { err };
    body.destroy(err);
  };
  sink.on('error', onSinkFailed);
  sink.on('close', onSinkFailed);
  try {
    signal?.throwIfAborted();
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (failed !== null) break;
      onChunk(chunk);
      if (!sink.write(chunk)) await drained(sink, signal);
    }
    if (failed !== null) throw failed.err;
    sink.end();
    await finished(sink, { cleanup: true });
  } catch (err) {
    const first = failed?.err ?? err;
    body.destroy();
    sink.destroy(first instanceof Error ? first : new Error(String(first)));
    throw first;
  } finally {
    // Kept on a failed sink: its destroy may still emit 'error', which must find a listener.
    if (failed === null && sink.writableFinished) {
      sink.off('error', onSinkFailed);
      sink.off('close', onSinkFailed);
    }
  }
}

function sinkClosed(): Error {
  return new Error('the document sink closed before the download ended');
}
