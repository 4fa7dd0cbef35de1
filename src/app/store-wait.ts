import express from 'express';
import { retryDelayMs } from '../pipeline/backoff.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import { startHttpServer, type RunningServer } from '../http/server.js';
import { openStore, StoreUnavailableError, type OpenStoreOptions, type StoreTarget } from '../store/open.js';
import type { StoreDb } from '../store/sql.js';

/** Between two attempts: 1 s doubling to 1 min (with up to 20 % jitter off). */
export const STORE_WAIT_BASE_MS = 1_000;
export const STORE_WAIT_MAX_MS = 60_000;

export interface StoreWaitOptions extends OpenStoreOptions {
  clock: Clock;
  logger: Logger;
  /** Aborted (SIGTERM): the wait ends and openStoreWaiting resolves null. */
  signal: AbortSignal;
  /** Where the ops pages listen while waiting (admin.host/port): /healthz 200, /readyz 503. */
  admin?: { host: string; port: number };
  baseMs?: number;
  maxMs?: number;
  /** Told once the waiting admin listener is up (tests: its URL, the port may be 0). */
  onWaiting?: (adminUrl: string | null) => void;
  /** The opener (default openStore). */
  open?: (target: StoreTarget, opts: OpenStoreOptions) => Promise<StoreDb>;
  random?: () => number;
}

/**
 * `run`'s state store: opened now if it answers; otherwise, for a PostgreSQL server that is
 * unreachable or refuses the login (StoreUnavailableError), the process stays up and retries with
 * capped exponential backoff on the injected clock, logging each distinct failure once, while a
 * minimal admin listener answers /healthz (alive) and /readyz 503 with the reason (it names the
 * config key; the URL's password is never shown). Anything else (a config error, a schema newer
 * than this version) is thrown at once: exit 1. Resolves null when the signal aborts the wait.
 */
export async function openStoreWaiting(target: StoreTarget, opts: StoreWaitOptions): Promise<StoreDb | null> {
  const open = opts.open ?? openStore;
  const { clock, signal } = opts;
  const logger = opts.logger.child({ component: 'store' });
  const openOpts: OpenStoreOptions = {
    ...(opts.onWarning ? { onWarning: opts.onWarning } : {}),
    ...(opts.busyTimeoutMs !== undefined ? { busyTimeoutMs: opts.busyTimeoutMs } : {}),
    ...(opts.applicationName !== undefined ? { applicationName: opts.applicationName } : {}),
    logger: opts.logger,
  };
  const settings = {
    retryBaseMs: opts.baseMs ?? STORE_WAIT_BASE_MS,
    retryMaxMs: opts.maxMs ?? STORE_WAIT_MAX_MS,
  };
  let server: RunningServer | null = null;
  let lastError: StoreUnavailableError | null = null;
  let failingSince = 0;
  let attempts = 0;
  try {
    for (;;) {
      if (signal.aborted) return null;
      attempts += 1;
      try {
        const db = await open(target, openOpts);
        if (lastError) {
          logger.info(
            { attempts, waitedMs: clock.now() - failingSince },
            'the state store answers: starting the daemon',
          );
        }
        return db;
      } catch (err) {
        if (!(err instanceof StoreUnavailableError)) throw err;
        if (!lastError) failingSince = clock.now();
        // One line per distinct failure: a server down for an hour logs once, not every minute.
        if (lastError?.message !== err.message) {
          logger.error(
            { attempts },
            `${err.message}; retrying with backoff (up to ${Math.round(settings.retryMaxMs / 1000)} s apart), ` +
              `/readyz answers 503 meanwhile`,
          );
        }
        lastError = err;
      }
      if (!server && opts.admin) {
        server = await startHttpServer(
          waitingApp(() => ({ detail: lastError?.message ?? '', since: failingSince, attempts })),
          opts.admin.host,
          opts.admin.port,
          undefined,
          { host: 'admin.host', port: 'admin.port' },
        );
        logger.info(
          { url: server.url, pages: ['/healthz', '/readyz'] },
          'admin listener (ops pages) listening while the state store is unavailable',
        );
        opts.onWaiting?.(server.url);
      } else if (!opts.admin && attempts === 1) {
        opts.onWaiting?.(null);
      }
      try {
        await clock.sleep(retryDelayMs(attempts, settings, opts.random), signal);
      } catch {
        return null;
      }
    }
  } finally {
    await server?.close(0);
  }
}

/** The ops pages while waiting: alive, not ready, and why. */
function waitingApp(state: () => { detail: string; since: number; attempts: number }): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', (_req, res) => {
    const s = state();
    res.status(503).json({
      ready: false,
      checks: {
        database: {
          ok: false,
          detail:
            `waiting for the state store since ${new Date(s.since).toISOString()} ` +
            `(${s.attempts} attempt(s)): ${s.detail}`,
        },
      },
    });
  });
  app.use((_req, res) => {
    res.status(503).json({ error: 'starting: waiting for the state store (see /readyz)' });
  });
  return app;
}
