import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { WebhooksConfig } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import { systemClock } from '../lib/clock.js';
import { errorMessage } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { InvalidPayloadError, toWebhookEvent } from './event.js';
import type { WebhookInbox } from './inbox.js';
import { createInboxWriter } from './inbox-writer.js';
import { createConnectorMetrics, type ConnectorMetrics } from './metrics.js';
import { runReadiness, type ReadinessCheck } from './readiness.js';
import { createLogThrottle } from './log-throttle.js';
import { latestReportFile } from './reports-route.js';
import { REJECT_STATUS, createVerifier, unusableSecrets, type RejectReason } from './signature.js';

export const WEBHOOK_PATH = '/webhooks/platform';

export interface WebhookAppDeps {
  config: Pick<WebhooksConfig, 'scheme' | 'secrets' | 'toleranceSeconds' | 'maxBodyBytes'>;
  inbox: WebhookInbox;
  logger: Logger;
  clock?: Clock;
  /** Served at /metrics; a private one is created when absent. */
  metrics?: ConnectorMetrics;
  /** Told after a new delivery is stored (processing never happens inside the request). */
  processor?: { kick(): void };
  /** Conditions of /readyz (see readiness.ts: standardReadinessChecks). */
  readiness?: Record<string, ReadinessCheck>;
  /** Directory the reconciliation writes into: GET /reports/latest serves its newest report.html. */
  reportsDir?: string;
}

const GENERIC: Record<number, string> = { 400: 'bad request', 401: 'unauthorized', 413: 'payload too large' };

/**
 * The connector's HTTP surface: the platform's webhook receiver, health, readiness, metrics and the
 * latest report. No listen here: `startHttpServer` (server.ts) or a test does that.
 */
export function createApp(deps: WebhookAppDeps): Express {
  const clock = deps.clock ?? systemClock;
  const log = deps.logger;
  const metrics = deps.metrics ?? createConnectorMetrics({ inbox: deps.inbox, processMetrics: false });
  const verifier = createVerifier({
    scheme: deps.config.scheme,
    secrets: deps.config.secrets,
    toleranceSeconds: deps.config.toleranceSeconds,
  });
  if (deps.config.secrets.length === 0) {
    log.warn('webhooks.secrets is empty: every delivery will be refused (set BOARDING_WEBHOOK_SECRETS)');
  }
  const unusable = unusableSecrets(deps.config.scheme, deps.config.secrets);
  if (unusable.length > 0) {
    log.warn({ positions: unusable }, `webhooks.secrets: ${unusable.length} secret(s) are not whsec_<base64> and cannot verify ${deps.config.scheme} signatures`);
  }

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  const throttle = createLogThrottle();
  const reject = (req: Request, res: Response, reason: RejectReason, detail: string): void => {
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
    res.status(status).json({ error: GENERIC[status] ?? 'rejected' });
  };

  const writer = createInboxWriter(deps.inbox);
  const rawBody = express.raw({ type: () => true, limit: deps.config.maxBodyBytes });

  app.post(
    WEBHOOK_PATH,
    (req, res, next) => {
      // Refuse an announced oversize body before reading a byte of it.
      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > deps.config.maxBodyBytes) {
        // Do not read the rest; close the connection once the answer is out.
        res.setHeader('Connection', 'close');
        reject(req, res, 'too_large', `content-length ${declared} > webhooks.maxBodyBytes ${deps.config.maxBodyBytes}`);
        return;
      }
      next();
    },
    rawBody,
    async (req, res) => {
      const receivedAt = clock.now();
      const body: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const verdict = verifier.verify(req.headers, body, receivedAt);
      if (!verdict.ok) {
        reject(req, res, verdict.reason, verdict.detail);
        return;
      }
      let json: unknown;
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        reject(req, res, 'invalid_json', `body of ${body.length} bytes is not JSON`);
        return;
      }
      let event;
      try {
        event = toWebhookEvent(json, {
          webhookIdHeader: verdict.webhookId,
          signedTimestampMs: verdict.timestampMs,
          receivedAt,
          rawBody: body,
        });
      } catch (err) {
        if (err instanceof InvalidPayloadError) {
          reject(req, res, 'invalid_payload', err.message);
          return;
        }
        throw err;
      }
      let inserted: boolean;
      try {
        inserted = await writer.write(event, receivedAt);
      } catch (err) {
        // The only case that earns a 5xx: the platform must redeliver what we could not store.
        log.error({ err, webhookId: event.webhookId, eventType: event.type }, 'webhook inbox write failed; answering 503 so the platform retries');
        res.status(503).json({ error: 'temporarily unavailable' });
        return;
      }
      metrics.webhookReceived(inserted ? 'accepted' : 'duplicate', event.type);
      log.info({ webhookId: event.webhookId, eventType: event.type, loanId: event.loanId, duplicate: !inserted }, 'webhook delivery stored');
      res.status(200).json({ received: true });
      if (inserted) deps.processor?.kick();
    },
  );
  // Errors of the body reader on the webhook route (size limit, aborted upload, bad encoding).
  app.use(WEBHOOK_PATH, (err: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const type = (err as { type?: unknown } | null)?.type;
    if (type === 'entity.too.large') {
      res.setHeader('Connection', 'close');
      reject(req, res, 'too_large', `body over webhooks.maxBodyBytes ${deps.config.maxBodyBytes}`);
    } else if (type === 'request.aborted') {
      metrics.webhookRejected('bad_request');
      log.warn({ reason: 'aborted' }, 'webhook delivery aborted by the sender');
    } else if (typeof type === 'string') {
      // Any other body-reader refusal (bad encoding, malformed chunking…): the sender's fault.
      reject(req, res, 'bad_request', errorMessage(err));
    } else {
      next(err);
    }
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', async (_req, res) => {
    const result = await runReadiness(deps.readiness ?? {});
    res.status(result.ready ? 200 : 503).json(result);
  });

  app.get('/metrics', async (_req, res) => {
    const text = await metrics.render();
    res.setHeader('Content-Type', metrics.contentType);
    res.send(text);
  });

  app.get('/reports/latest', async (_req, res) => {
    const file = deps.reportsDir ? await latestReportFile(deps.reportsDir) : null;
    if (!file) {
      res.status(404).json({ error: 'no report yet' });
      return;
    }
    res.setHeader('Cache-Control', 'no-store');
    res.sendFile(file, { dotfiles: 'deny' });
  });

  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'not found' });
  });
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    log.error({ err }, 'http handler failed');
    if (!res.headersSent) res.status(500).json({ error: 'internal error' });
  });
  return app;
}
