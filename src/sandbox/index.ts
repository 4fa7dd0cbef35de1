import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { silentLogger, type Logger } from '../lib/logger.js';
import { createAdminRouter } from './admin-api.js';
import { BlobServer } from './blob-server.js';
import { FaultInjector } from './faults.js';
import { createPublicApiHandler } from './public-api.js';
import { RateLimiter } from './rate-limit.js';
import type { IdShapes } from './ids.js';
import { SandboxState } from './state.js';
import { WebhookSender } from './webhook-sender.js';
import { extractCsv } from './repeat-borrowers.js';

/** Written whole under a temporary name and renamed, so a connector never reads half an extract. */
async function writeExtract(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await mkdir(dirname(path), { recursive: true });
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, path);
}
import type { AmountProfile } from './generator.js';
import { SANDBOX_DEFAULTS } from './defaults.js';

export interface SandboxOptions {
  host?: string;
  /** 0 = a free port. */
  port?: number;
  loans?: number;
  seed?: number;
  /** Fraction of generated loans released to the core at start. */
  releaseRatio?: number;
  windowMs?: number;
  readsPerWindow?: number;
  writesPerWindow?: number;
  legacyPerWindow?: number;
  /** Revoke a key after this many 429s in 24 h (the platform's live-key rule is 3); default never. */
  revokeAfterStrikes?: number | null;
  /** Accept http(s)://127.0.0.1 / localhost webhook URLs (local testing). */
  allowLoopbackWebhooks?: boolean;
  documentMaxBytes?: number;
  webhookRetry?: { attempts: number; baseMs: number };
  /** Consecutive failed deliveries after which an endpoint is disabled (default 10). */
  webhookAutoDisableAfter?: number;
  /**
   * Permissions of the printed key; default every permission except read:businesses:ein and
   * read:people:ssn (a bank's first key rarely has them). See PERMISSIONS in keys.ts.
   */
  apiKeyPermissions?: string[];
  /**
   * Shapes of generated ids (loans, businesses, people, documents, requirements, releases); default
   * mixed. See ids.ts.
   */
  idShapes?: IdShapes;
  /** Share (0..1) of loans whose borrower (EIN/SSN, name) is an earlier loan's; half under a new entity id. */
  repeatBorrowers?: number;
  /** Write a bank customer extract (CSV: cif,tin,name,birth_or_formation_date) of the generated borrowers here. */
  customerExtract?: { path: string; existingShare: number };
  /**
   * Generated amounts, rates and terms: `realistic` (default; small-business and personal lending)
   * or `extreme` (amounts up to $900B with odd cents, odd terms; what overflow and convention tests need).
   */
  amounts?: AmountProfile;
  /** Time source (ms); defaults to Date.now. */
  now?: () => number;
  logger?: Logger;
}

export interface RunningSandbox {
  /** http://127.0.0.1:PORT/api */
  baseUrl: string;
  /** pk_test_… with every permission except read:businesses:ein and read:people:ssn. */
  apiKey: string;
  /** http://127.0.0.1:PORT/admin */
  adminUrl: string;
  close(): Promise<void>;
}

export { SANDBOX_DEFAULTS };

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** Starts the Loan Platform simulator (API + admin on one port, presigned blobs on another). */
export async function startSandbox(opts: SandboxOptions = {}): Promise<RunningSandbox> {
  const host = opts.host ?? SANDBOX_DEFAULTS.host;
  const logger = opts.logger ?? silentLogger();
  const now = opts.now ?? Date.now;
  const state = new SandboxState(
    opts.seed ?? SANDBOX_DEFAULTS.seed,
    now,
    opts.idShapes ?? SANDBOX_DEFAULTS.idShapes,
    opts.repeatBorrowers ?? 0,
    opts.amounts ?? SANDBOX_DEFAULTS.amounts,
  );
  const apiKey = state.defaultKey(opts.apiKeyPermissions).key;
  const releaseRatio = opts.releaseRatio ?? SANDBOX_DEFAULTS.releaseRatio;
  state.generate(opts.loans ?? SANDBOX_DEFAULTS.loans, { releaseRatio });
  if (releaseRatio > 0) state.releaseEveryStatus();
  if (opts.customerExtract)
    await writeExtract(
      opts.customerExtract.path,
      extractCsv(state.customerExtract(opts.customerExtract.existingShare)),
    );

  const limiter = new RateLimiter(
    {
      windowMs: opts.windowMs ?? SANDBOX_DEFAULTS.windowMs,
      readsPerWindow: opts.readsPerWindow ?? SANDBOX_DEFAULTS.readsPerWindow,
      writesPerWindow: opts.writesPerWindow ?? SANDBOX_DEFAULTS.writesPerWindow,
      legacyPerWindow: opts.legacyPerWindow ?? SANDBOX_DEFAULTS.legacyPerWindow,
      revokeAfterStrikes: opts.revokeAfterStrikes ?? null,
    },
    now,
  );
  const faults = new FaultInjector();
  const sender = new WebhookSender(
    state,
    logger,
    opts.webhookRetry ?? { ...SANDBOX_DEFAULTS.webhookRetry },
    opts.webhookAutoDisableAfter ?? SANDBOX_DEFAULTS.webhookAutoDisableAfter,
  );
  const blobs = new BlobServer(state, host, faults);
  await blobs.listen();

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use('/admin', createAdminRouter({ state, limiter, faults, sender, logger }));
  // The printed baseUrl itself (a banner link): what is served under it, without a key or a budget.
  app.get(['/api', '/api/'], (_req, res) => {
    res.json({
      name: 'Loan Platform sandbox',
      api: '/api/public/v1/... (Authorization: Bearer <apiKey>; the spec is docs/sandbox.md)',
      admin: '/admin',
    });
  });
  app.use(
    '/api',
    express.raw({ type: () => true, limit: '2mb' }),
    createPublicApiHandler({
      state,
      limiter,
      faults,
      blobs,
      logger,
      options: {
        allowLoopbackWebhooks: opts.allowLoopbackWebhooks ?? false,
        documentMaxBytes: opts.documentMaxBytes ?? SANDBOX_DEFAULTS.documentMaxBytes,
      },
    }),
  );
  // Body-parser failures (e.g. a body over 2 MB) in the API's error shape rather than HTML.
  app.use(
    '/api',
    (err: unknown, _req: express.Request, res: express.Response, next: express.NextFunction) => {
      void next;
      const e = err as { status?: number; message?: string };
      res
        .status(e.status ?? 400)
        .json({ code: 'input.invalid', message: e.message ?? 'request could not be read' });
    },
  );
  app.use((_req: express.Request, res: express.Response) => {
    res.status(404).json({
      code: 'route.not_found',
      message: 'the sandbox serves /api/public/v1/..., /api/public/... (legacy) and /admin/...',
    });
  });

  const server: Server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const origin = `http://${hostForUrl(host)}:${port}`;
  logger.info({ origin, blobs: blobs.baseUrl, loans: state.loans.size }, 'sandbox listening');
  let closed = false;
  return {
    baseUrl: `${origin}/api`,
    apiKey,
    adminUrl: `${origin}/admin`,
    async close() {
      if (closed) return;
      closed = true;
      sender.close();
      server.closeAllConnections();
      await Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), blobs.close()]);
      await sender.idle();
    },
  };
}

export { PERMISSIONS, DEFAULT_PERMISSIONS } from './keys.js';
