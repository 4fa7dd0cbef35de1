import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Readable, Transform } from 'node:stream';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { InvalidPayloadError, toWebhookEvent } from './event.js';
import type { InboxWriter } from './inbox-writer.js';
import { createLogThrottle } from './log-throttle.js';
import type { ConnectorMetrics } from './metrics.js';
import { REJECT_STATUS, type RejectReason, type Verifier } from './signature.js';

export const WEBHOOK_PATH = '/webhooks/platform';

export interface WebhookReceiverDeps {
  maxBodyBytes: number;
  verifier: Verifier;
  writer: InboxWriter;
  metrics: Pick<ConnectorMetrics, 'webhookReceived' | 'webhookRejected'>;
  logger: Logger;
  clock: Clock;
  /** Told after a new delivery is stored (processing never happens inside the request). */
  processor?: { kick(): void } | undefined;
}

const GENERIC: Record<number, string> = { 400: 'bad request', 401: 'unauthorized', 413: 'payload too large' };
const json = (o: unknown): Buffer => Buffer.from(JSON.stringify(o));
const BODY_OK = json({ received: true });
const BODY_503 = json({ error: 'temporarily unavailable' });
const BODY_REJECT = new Map<number, Buffer>(Object.keys(GENERIC).map((s) => [Number(s), json({ error: GENERIC[Number(s)] })]));
// What Express's res.json sends, so both paths answer byte for byte alike.
const JSON_TYPE = 'application/json; charset=utf-8';

function send(res: ServerResponse, status: number, body: Buffer): void {
  res.writeHead(status, { 'Content-Type': JSON_TYPE, 'Content-Length': body.length });
  res.end(body);
}

type BodyResult = { ok: true; body: Buffer } | { ok: false; kind: 'too_large' | 'aborted' | 'bad_request'; detail: string };

/** Decoders for the Content-Encodings Express's body reader inflated (same set, same outcome). */
function decoder(encoding: string): Transform | null | undefined {
  switch (encoding) {
    case '':
    case 'identity':
      return null;
    case 'gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      return undefined;
  }
}

/**
 * Reads the raw body with the size limit (counted on decoded bytes, like raw-body). Stops reading
 * on oversize: the caller answers with Connection: close, so the rest is never read.
 */
function readBody(req: IncomingMessage, limit: number, done: (r: BodyResult) => void): void {
  const encoding = String(req.headers['content-encoding'] ?? '').trim().toLowerCase();
  const dec = decoder(encoding);
  if (dec === undefined) {
    req.resume();
    done({ ok: false, kind: 'bad_request', detail: `unsupported content encoding "${encoding.slice(0, 40)}"` });
    return;
  }
  const source: Readable = dec ?? req;
  const chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  const finish = (r: BodyResult): void => {
    if (finished) return;
    finished = true;
    source.removeListener('data', onData);
    if (dec) req.unpipe(dec);
    done(r);
  };
  const onData = (c: Buffer): void => {
    size += c.length;
    if (size > limit) {
      finish({ ok: false, kind: 'too_large', detail: `body over webhooks.maxBodyBytes ${limit}` });
      return;
    }
    chunks.push(c);
  };
  source.on('data', onData);
  source.once('end', () => finish({ ok: true, body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size) }));
  if (dec) {
    dec.on('error', (err) => finish({ ok: false, kind: 'bad_request', detail: `body does not decode as ${encoding}: ${err.message}` }));
    req.pipe(dec);
  }
  req.on('error', () => finish({ ok: false, kind: 'aborted', detail: 'request stream failed' }));
  req.once('close', () => {
    if (!req.complete) finish({ ok: false, kind: 'aborted', detail: 'sender closed the connection mid-body' });
  });
}

/**
 * `POST /webhooks/platform` as a plain node:http handler: raw body (this route only, size limit),
 * verify before parsing, parse and validate, group-committed durable inbox insert, then 2xx.
 *
 * Why not Express middleware: this is the one hot route, and express's router, raw-body,
 * res.status().json() cost about as much CPU as verifying and storing a delivery. The same handler
 * serves the Express route (so `createApp` alone is complete) and, via `fastPathFor`, is called by
 * `startHttpServer` before Express for an exact `POST /webhooks/platform` (the request never
 * enters the router). Both give identical answers.
 */
export function createWebhookReceiver(deps: WebhookReceiverDeps): RequestListener {
  const { maxBodyBytes, verifier, writer, metrics, clock } = deps;
  const log = deps.logger;
  const throttle = createLogThrottle();

  const reject = (req: IncomingMessage, res: ServerResponse, reason: RejectReason, detail: string): void => {
    metrics.webhookRejected(reason);
    const status = REJECT_STATUS[reason];
    // The reason stays in our log; the sender only learns the status. Every rejection is counted
    // in the metrics; the log gets at most 20 lines per reason and minute.
    const suppressed = throttle.admit(reason, clock.now());
    if (suppressed !== null) {
      log.warn(
        { reason, detail, status, remote: req.socket.remoteAddress, contentLength: req.headers['content-length'], ...(suppressed > 0 ? { suppressedSinceLast: suppressed } : {}) },
        'webhook delivery rejected',
      );
    }
    send(res, status, BODY_REJECT.get(status) ?? json({ error: 'rejected' }));
  };

  const accept = (req: IncomingMessage, res: ServerResponse, body: Buffer): void => {
    const receivedAt = clock.now();
    const verdict = verifier.verify(req.headers, body, receivedAt);
    if (!verdict.ok) {
      reject(req, res, verdict.reason, verdict.detail);
      return;
    }
    const text = body.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      reject(req, res, 'invalid_json', `body of ${body.length} bytes is not JSON`);
      return;
    }
    let event;
    try {
      event = toWebhookEvent(parsed, { webhookIdHeader: verdict.webhookId, signedTimestampMs: verdict.timestampMs, receivedAt, rawBody: body });
    } catch (err) {
      if (err instanceof InvalidPayloadError) {
        reject(req, res, 'invalid_payload', err.message);
        return;
      }
      throw err;
    }
    // The verified text is stored as is: it is the JSON just parsed, so re-serialising is waste.
    event.payloadJson = text;
    writer.write(event, receivedAt).then(
      (inserted) => {
        metrics.webhookReceived(inserted ? 'accepted' : 'duplicate', event.type);
        log.info({ webhookId: event.webhookId, eventType: event.type, loanId: event.loanId, duplicate: !inserted }, 'webhook delivery stored');
        send(res, 200, BODY_OK);
        if (inserted) deps.processor?.kick();
      },
      (err: unknown) => {
        // The only case that earns a 5xx: the platform must redeliver what we could not store.
        log.error({ err, webhookId: event.webhookId, eventType: event.type }, 'webhook inbox write failed; answering 503 so the platform retries');
        send(res, 503, BODY_503);
      },
    );
  };

  return (req, res) => {
    // Refuse an announced oversize body before reading a byte of it.
    const declared = Number(req.headers['content-length']);
    if (declared > maxBodyBytes) {
      // Do not read the rest; close the connection once the answer is out.
      res.setHeader('Connection', 'close');
      reject(req, res, 'too_large', `content-length ${declared} > webhooks.maxBodyBytes ${maxBodyBytes}`);
      return;
    }
    readBody(req, maxBodyBytes, (r) => {
      if (r.ok) {
        try {
          accept(req, res, r.body);
        } catch (err) {
          log.error({ err }, 'webhook handler failed');
          if (!res.headersSent) send(res, 500, json({ error: 'internal error' }));
        }
      } else if (r.kind === 'too_large') {
        res.setHeader('Connection', 'close');
        reject(req, res, 'too_large', r.detail);
      } else if (r.kind === 'aborted') {
        metrics.webhookRejected('bad_request');
        // Throttled like every rejection: aborted uploads cost the sender nothing to repeat.
        const suppressed = throttle.admit('aborted', clock.now());
        if (suppressed !== null) {
          log.warn({ reason: 'aborted', remote: req.socket.remoteAddress, ...(suppressed > 0 ? { suppressedSinceLast: suppressed } : {}) }, 'webhook delivery aborted by the sender');
        }
      } else {
        reject(req, res, 'bad_request', r.detail);
      }
    });
  };
}

const fastPaths = new WeakMap<object, RequestListener>();

/** Registers `handler` as the pre-router fast path of `app` for `POST /webhooks/platform`. */
export function setFastPath(app: object, handler: RequestListener): void {
  fastPaths.set(app, handler);
}

/**
 * The listener to serve with: `app` itself, or — when `app` registered a fast path — a listener
 * that sends an exact `POST /webhooks/platform` (query string allowed) straight to the webhook
 * handler and everything else (other paths, methods, spellings Express also routes) to `app`.
 */
export function withFastPath(app: RequestListener): RequestListener {
  const fast = fastPaths.get(app);
  if (!fast) return app;
  return (req, res) => {
    const url = req.url ?? '';
    if (req.method === 'POST' && url.startsWith(WEBHOOK_PATH) && (url.length === WEBHOOK_PATH.length || url.charCodeAt(WEBHOOK_PATH.length) === 63 /* ? */)) {
      fast(req, res);
    } else {
      app(req, res);
    }
  };
}
