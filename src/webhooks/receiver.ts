import express, {
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
  type ErrorRequestHandler,
} from 'express';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { InvalidPayloadError, toWebhookEvent, type WebhookEvent } from './event.js';
import type { WebhookInbox } from '../store/inbox.js';
import { createLogThrottle } from './log-throttle.js';
import { REJECT_STATUS, type RejectReason, type Verifier } from './signature.js';

import { WEBHOOK_PATH } from './path.js';

export { WEBHOOK_PATH };

/** What the receiver counts (observability's connector metrics implement it; webhooks never import them). */
export interface ReceiverMetrics {
  webhookReceived(outcome: 'accepted' | 'duplicate', eventType: string): void;
  webhookRejected(reason: RejectReason): void;
}

export interface WebhookReceiverDeps {
  maxBodyBytes: number;
  verifier: Verifier;
  inbox: Pick<WebhookInbox, 'insert'>;
  metrics: ReceiverMetrics;
  logger: Logger;
  clock: Clock;
  /** Told after a new delivery is stored (processing never happens inside the request). */
  processor?: { kick(): void } | undefined;
}

const GENERIC: Record<number, string> = {
  400: 'bad request',
  401: 'unauthorized',
  413: 'payload too large',
  415: 'unsupported content encoding',
};

/** Body-parser's error types for an encoding or charset it does not take (its own status: 415). */
const UNSUPPORTED = new Set(['encoding.unsupported', 'charset.unsupported']);

/** A client error raised while reading the body (body-parser's http-errors carry a 4xx status). */
function clientErrorStatus(err: unknown): number | null {
  const status =
    (err as { status?: unknown; statusCode?: unknown } | null)?.status ??
    (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : null;
}

/** The request's content-encoding for a rejection's detail, cut short (it comes from outside). */
function contentEncoding(req: Request): string {
  return String(req.headers['content-encoding'] ?? 'identity').slice(0, 40);
}

/** Body-parser's error types that mean the sender went away: nobody is left to answer. */
const ABORTED = new Set(['request.aborted', 'stream.not.readable']);

/**
 * `POST /webhooks/platform`: raw body (this route only, size limit on the decoded bytes) → verify
 * the signature on those bytes → parse with the envelope schema → one durable insert → 200 → kick
 * the processor. The insert is synchronous on the store's connection (synchronous=FULL), so the 2xx
 * is only ever sent for a row already on disk; the platform's ~27 deliveries a minute make that
 * fsync free. Returns the handlers to mount on the route: the body reader, the handler, and an
 * error handler that turns body-reader failures into the same counted, throttled rejections.
 */
export function createWebhookReceiver(
  deps: WebhookReceiverDeps,
): Array<RequestHandler | ErrorRequestHandler> {
  const { maxBodyBytes, verifier, inbox, metrics, clock } = deps;
  const log = deps.logger;
  const throttle = createLogThrottle();

  const reject = (req: Request, res: Response, reason: RejectReason, detail: string): void => {
    metrics.webhookRejected(reason);
    const status = REJECT_STATUS[reason];
    // The reason stays in our log; the sender only learns the status. Every rejection is counted
    // in the metrics; the log gets at most 20 lines per reason and minute.
    const suppressed = throttle.admit(reason, clock.now());
    if (suppressed !== null) {
      log.warn(
        {
          reason,
          detail,
          status,
          remote: req.socket.remoteAddress,
          contentLength: req.headers['content-length'],
          ...(suppressed > 0 ? { suppressedSinceLast: suppressed } : {}),
        },
        'webhook delivery rejected',
      );
    }
    res.status(status).json({ error: GENERIC[status] ?? 'rejected' });
  };

  // Every content type is read as bytes: the signature covers the exact bytes sent.
  const readBody = express.raw({ type: () => true, limit: maxBodyBytes, inflate: true });

  const handleAsync = async (req: Request, res: Response): Promise<void> => {
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const receivedAt = clock.now();
    const verdict = verifier.verify(req.headers, body, receivedAt);
    if (!verdict.ok) {
      reject(req, res, verdict.reason, verdict.detail);
      return;
    }
    const read = readEvent(body, verdict, receivedAt);
    if ('reason' in read) {
      reject(req, res, read.reason, read.detail);
      return;
    }
    const { event } = read;
    let inserted: boolean;
    try {
      inserted = await inbox.insert(event, receivedAt);
    } catch (err) {
      // The only case that earns a 5xx: the platform must redeliver what we could not store.
      log.error(
        { err, webhookId: event.webhookId, eventType: event.type },
        'webhook inbox write failed; answering 503 so the platform retries',
      );
      res.status(503).json({ error: 'temporarily unavailable' });
      return;
    }
    metrics.webhookReceived(inserted ? 'accepted' : 'duplicate', event.type);
    log.info(
      { webhookId: event.webhookId, eventType: event.type, loanId: event.loanId, duplicate: !inserted },
      'webhook delivery stored',
    );
    res.status(200).json({ received: true });
    if (inserted) deps.processor?.kick();
  };

  const bodyFailed = bodyErrorHandler({ maxBodyBytes, metrics, clock, log, throttle, reject });

  const handle: RequestHandler = (req, res, next) => {
    handleAsync(req, res).catch(next);
  };

  return [readBody, handle, bodyFailed];
}

type Reject = (req: Request, res: Response, reason: RejectReason, detail: string) => void;

/** The verified body as an event, or why it is refused (not JSON, not an event envelope). */
function readEvent(
  body: Buffer,
  verdict: { webhookId: string | null; timestampMs: number | null },
  receivedAt: number,
): { event: WebhookEvent } | { reason: RejectReason; detail: string } {
  const text = body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { reason: 'invalid_json', detail: `body of ${body.length} bytes is not JSON` };
  }
  try {
    return {
      event: toWebhookEvent(parsed, {
        webhookIdHeader: verdict.webhookId,
        signedTimestampMs: verdict.timestampMs,
        receivedAt,
        rawBody: body,
      }),
    };
  } catch (err) {
    if (err instanceof InvalidPayloadError) return { reason: 'invalid_payload', detail: err.message };
    throw err;
  }
}

/**
 * Body-reader failures (too large, an unsupported or undecodable encoding, a sender that went away)
 * as the same counted, throttled rejections as the handler's.
 */
function bodyErrorHandler(ctx: {
  maxBodyBytes: number;
  metrics: ReceiverMetrics;
  clock: Clock;
  log: Logger;
  throttle: ReturnType<typeof createLogThrottle>;
  reject: Reject;
}): ErrorRequestHandler {
  const { maxBodyBytes, metrics, clock, log, throttle, reject } = ctx;
  return (err: unknown, req: Request, res: Response, next: NextFunction) => {
    const type = (err as { type?: unknown } | null)?.type;
    if (typeof type !== 'string') {
      // A compressed body that does not decompress (gzip/deflate/br garbage): zlib's error,
      // wrapped by body-parser in a 400 without a type. The sender's fault, never a 5xx, and
      // throttled like every rejection (an unauthenticated client can repeat it for free).
      if (clientErrorStatus(err) !== null) {
        const code = (err as { code?: unknown }).code;
        reject(
          req,
          res,
          'bad_request',
          `body could not be decoded (content-encoding ${contentEncoding(req)}` +
            `${typeof code === 'string' ? `: ${code}` : ''})`,
        );
        return;
      }
      next(err);
      return;
    }
    if (type === 'entity.too.large') {
      // The rest of the body is not read: close the connection once the answer is out.
      res.setHeader('Connection', 'close');
      reject(req, res, 'too_large', `body over webhooks.maxBodyBytes ${maxBodyBytes}`);
    } else if (UNSUPPORTED.has(type)) {
      reject(
        req,
        res,
        'unsupported_encoding',
        `${type}: content-encoding ${contentEncoding(req)}, ` +
          `content-type ${String(req.headers['content-type'] ?? '').slice(0, 80)}`,
      );
    } else if (ABORTED.has(type)) {
      metrics.webhookRejected('bad_request');
      // Throttled like every rejection: aborted uploads cost the sender nothing to repeat.
      const suppressed = throttle.admit('aborted', clock.now());
      if (suppressed !== null) {
        log.warn(
          {
            reason: 'aborted',
            remote: req.socket.remoteAddress,
            ...(suppressed > 0 ? { suppressedSinceLast: suppressed } : {}),
          },
          'webhook delivery aborted by the sender',
        );
      }
    } else {
      reject(
        req,
        res,
        'bad_request',
        `body could not be read (${type}): ${(err as Error).message}`.slice(0, 300),
      );
    }
  };
}
