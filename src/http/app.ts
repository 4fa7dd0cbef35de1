import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { WebhooksConfig } from '../config/schema.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { WebhookInbox } from '../store/inbox.js';
import {
  createConnectorMetrics,
  type ConnectorMetrics,
  type LeadershipView,
} from '../observability/metrics.js';
import { runReadiness, type ReadinessCheck } from '../observability/readiness.js';
import { latestReportFile } from './reports-route.js';
import { allowedHostsGuard } from './allowed-hosts.js';
import { REPORT_HTML_CSP } from '../reports/render-html.js';
import { createWebhookReceiver, WEBHOOK_PATH } from '../webhooks/receiver.js';
import { createLogThrottle } from '../webhooks/log-throttle.js';
import { createVerifier, unusableSecrets } from '../webhooks/signature.js';

export { WEBHOOK_PATH };

export interface WebhookAppDeps {
  config: Pick<WebhooksConfig, 'scheme' | 'secrets' | 'toleranceSeconds' | 'maxBodyBytes'>;
  inbox: WebhookInbox;
  logger: Logger;
  clock: Clock;
  /** Served at /metrics; a private one is created when absent. */
  metrics?: ConnectorMetrics;
  /** Told after a new delivery is stored (processing never happens inside the request). */
  processor?: { kick(): void };
  /** Conditions of /readyz (see readiness.ts: standardReadinessChecks). */
  readiness?: Record<string, ReadinessCheck>;
  /** This replica's role, in /readyz's JSON (a healthy standby is ready: it takes webhooks). */
  leadership?: () => LeadershipView;
  /** Directory the reconciliation writes into: GET /reports/latest serves its newest report.html. */
  reportsDir?: string;
  /**
   * Which routes: `public` (the webhook receiver and /healthz: what the platform reaches),
   * `admin` (/healthz, /readyz, /metrics, /reports/latest: the ops listener), or `all` (tests).
   */
  surface?: 'all' | 'public' | 'admin';
  /**
   * Adds routes to the ops surface, before its own (the console: src/console/index.ts mountConsole,
   * which puts its login in front of /reports/latest) and its 404.
   */
  mountOps?: (app: Express) => void;
  /** Host names the ops surface answers (allowed-hosts.ts adminHostNames); absent: any (tests). */
  allowedHosts?: readonly string[];
}

/**
 * The connector's HTTP surface: the platform's webhook receiver, health, readiness, metrics and the
 * latest report. No listen here: `startHttpServer` (server.ts) or a test does that.
 */
export function createApp(deps: WebhookAppDeps): Express {
  const clock = deps.clock;
  const log = deps.logger;
  const metrics = deps.metrics ?? createConnectorMetrics({ inbox: deps.inbox, processMetrics: false, clock });
  const surface = deps.surface ?? 'all';
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  if (surface === 'admin' && deps.allowedHosts !== undefined) {
    const refused = createLogThrottle();
    app.use(
      allowedHostsGuard(deps.allowedHosts, (host) => {
        const suppressed = refused.admit('client', clock.now());
        if (suppressed !== null)
          log.warn(
            { host, ...(suppressed > 0 ? { suppressedSinceLast: suppressed } : {}) },
            'admin listener: request for a host not in admin.allowedHosts refused (421)',
          );
      }),
    );
  }

  if (surface !== 'admin') {
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
      log.warn(
        { positions: unusable },
        `webhooks.secrets: ${unusable.length} secret(s) are not whsec_<base64> ` +
          `and cannot verify ${deps.config.scheme} signatures`,
      );
    }
    // The raw body is read on this route only: no other route takes a body.
    app.post(
      WEBHOOK_PATH,
      ...createWebhookReceiver({
        maxBodyBytes: deps.config.maxBodyBytes,
        verifier,
        inbox: deps.inbox,
        metrics,
        logger: log,
        clock,
        processor: deps.processor,
      }),
    );
  }

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  if (surface !== 'public') {
    // The console first: it guards /reports/latest with its login when it has users (issue 43 F12).
    deps.mountOps?.(app);
    registerOpsRoutes(app, deps, metrics);
  }

  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'not found' });
  });
  // The last resort: a client error someone raised (an http-errors 4xx) keeps its status, anything
  // else is our bug (500). Either way at most 20 lines a minute: a client that found a way to
  // trigger it must not flood the log.
  const throttle = createLogThrottle();
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (err as { status?: unknown } | null)?.status;
    const clientError = typeof status === 'number' && status >= 400 && status < 500;
    const suppressed = throttle.admit(clientError ? 'client' : 'internal', clock.now());
    if (suppressed !== null) {
      const extra = suppressed > 0 ? { suppressedSinceLast: suppressed } : {};
      if (clientError)
        log.warn(
          { status, message: (err as Error).message?.slice(0, 200), ...extra },
          'http request rejected',
        );
      else log.error({ err, ...extra }, 'http handler failed');
    }
    if (!res.headersSent)
      res.status(clientError ? status : 500).json({ error: clientError ? 'bad request' : 'internal error' });
  });
  return app;
}

/** The ops pages: never on the listener the platform reaches (unless a test asks for `all`). */
function registerOpsRoutes(app: Express, deps: WebhookAppDeps, metrics: ConnectorMetrics): void {
  app.get('/readyz', async (_req, res) => {
    const result = await runReadiness(deps.readiness ?? {});
    const l = deps.leadership?.();
    const role = l ? { role: l.role, epoch: l.epoch, holder: l.holder } : {};
    res.status(result.ready ? 200 : 503).json({ ready: result.ready, ...role, checks: result.checks });
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
    // report.html is self-contained (inline styles, an inline SVG): no script, no framing, no sniffing.
    res.setHeader('Content-Security-Policy', REPORT_HTML_CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.sendFile(file, { dotfiles: 'deny' });
  });
}
