import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { envelope } from './errors.js';
import { record, sendRaw } from './pipeline.js';
import { clientRoutes } from './routes-clients.js';
import { guarantorAndDocumentRoutes } from './routes-guarantors-documents.js';
import { loanRoutes } from './routes-loans.js';
import { DEFAULT_FINERACT_TENANT } from './tenant.js';
import type { FineractSimulator, FineractSimulatorOptions, SimClient, SimState } from './model.js';

/**
 * A simulated Apache Fineract core: real HTTP under /fineract-provider/api/v1, every request held
 * to Fineract's published contract (contract.ts: the OpenAPI of the operations the adapter uses,
 * answered with Fineract's 400 envelope on any violation), every answer checked against the
 * published response schemas, and at least as strict as the real server on every rule we know of
 * beyond the schema (../shared/domain-notes.md, read from Fineract's validators 1.9–develop):
 * - basic auth (401), the tenant header (missing: 400 JSON; unknown tenant: 400 with a plain-text
 *   body), permissions (403 `error.msg.not.authorized`, "User has no authority to: CREATE_CLIENT");
 * - the command pipeline's idempotency: the key is stored in a VARCHAR(50) column before the
 *   command runs (a longer key: 403 data integrity), scoped by action + entity + key (not URL),
 *   every result stored and replayed — failures, 5xx included — with `x-served-from-cache: true`,
 *   and 425 while the same key is in flight. Document uploads bypass the pipeline: no idempotency;
 * - unsupported parameters refused on every command (FromJsonHelper.checkForUnsupportedParameters);
 * - unique external ids (loans: 403 `error.msg.loan.with.externalId.already.used`, clients:
 *   `error.msg.client.duplicate.externalId`, under the generic `validation.msg.domain.rule.violation`);
 * - `loanTermFrequency` = `repaymentEvery × numberOfRepayments`, `loanTermFrequencyType` =
 *   `repaymentFrequencyType`, `graceOnPrincipalPayment` < `numberOfRepayments`, principal within
 *   DECIMAL(19,6), disbursement not before submittal;
 * - a client's activation date not before its office opened nor after the business date
 *   (Client.validateActivationDate);
 * - documents: pdf, doc, docx, xls, xlsx, jpg, jpeg, png only, content type matching the
 *   extension, at most 5 MiB (403 `error.msg.document.save`), not empty (DocumentCommandValidator);
 * - commands in the wrong loan state: 400; product settings (floating rate, principal limits);
 *   approve/disburse dates after the business date;
 * - client identifiers: one (document type, key) across all clients (403
 *   `error.msg.clientIdentifier.identityKey.duplicate`), one of a type per client;
 * - the search API (`GET /search?query=&resource=clientIdentifiers&exactMatch=true`);
 * - request paths Tomcat or Spring's StrictHttpFirewall refuse (400 before Fineract);
 * - a loan's `accountNo` unique (403 `error.msg.loan.duplicate.accountNo`), else Fineract's own:
 *   the loan id zero-padded to 9;
 * and fault injection (5xx before the write, the write committed and then the response
 * held/failed/reset, or a slow command that holds its key in flight).
 *
 * Everything is recorded so a test can assert "exactly one client per external id".
 */

export const FINERACT_API_BASE = '/fineract-provider/api/v1';

/**
 * Why Tomcat (an encoded slash or backslash: `encodedSolidusHandling` reject, the default) or
 * Spring Security's StrictHttpFirewall (an encoded percent, a semicolon, `//`, a dot segment,
 * anything but printable ASCII) refuses a request path, before Fineract sees it; null when it passes.
 * Checked on the raw path as sent (the query string is not checked: both allow encoded slashes there).
 */
export function refusedRequestPath(rawUrl: string): string | null {
  const path = rawUrl.split('?')[0] ?? '';
  if (/%2f/i.test(path) || /%5c/i.test(path) || path.includes('\\'))
    return 'The request was rejected because the URL contained an encoded slash or backslash';
  if (/%25/.test(path))
    return 'The request was rejected because the URL contained a potentially malicious String "%25"';
  if (/;|%3b/i.test(path))
    return 'The request was rejected because the URL contained a potentially malicious String ";"';
  if (path.includes('//'))
    return 'The request was rejected because the URL contained a potentially malicious String "//"';
  if (/[^\x21-\x7e]/.test(path))
    return 'The request was rejected because the URL contained non-printable or non-ASCII characters';
  const segments = path.split('/').map((seg) => seg.toLowerCase().replace(/%2e/g, '.'));
  if (segments.some((seg) => seg === '.' || seg === '..'))
    return 'The request was rejected because the URL was not normalized';
  return null;
}

function createState(opts: FineractSimulatorOptions): SimState {
  let nextId = 1;
  const productIds = opts.products ?? Object.keys(DEFAULT_FINERACT_TENANT.products).map(Number);
  return {
    opts,
    offices: opts.offices ?? DEFAULT_FINERACT_TENANT.offices,
    productIds,
    identifierTypes: opts.identifierTypes ?? DEFAULT_FINERACT_TENANT.identifierTypes,
    documentMaxBytes: opts.documentMaxBytes ?? DEFAULT_FINERACT_TENANT.documentMaxBytes,
    denied: new Set(opts.deniedPermissions ?? []),
    clients: [],
    loans: [],
    guarantors: [],
    documents: [],
    identifiers: [],
    requests: [],
    faults: [],
    contractRefusals: [],
    contractViolations: [],
    idempotency: new Map(),
    inFlight: new Set(),
    held: new Set(),
    newId: () => nextId++,
    product(id) {
      if (!productIds.includes(id)) return null;
      return opts.productSettings?.[id] ?? DEFAULT_FINERACT_TENANT.products[id] ?? {};
    },
    businessDate: () => opts.businessDate ?? null,
  };
}

/** Tomcat's and Spring's path firewall, then Fineract's tenant and authentication filters. */
function gatekeepers(
  s: SimState,
  app: Express,
  creds: { username: string; password: string; tenantId: string },
) {
  app.use((req: Request, res: Response, next: NextFunction) => {
    const why = refusedRequestPath(req.originalUrl);
    if (why === null) return next();
    record(s, req, null, 400, false, null);
    res
      .status(400)
      .type('text/html')
      .send(
        '<!doctype html><html lang="en"><head><title>HTTP Status 400 – Bad Request</title></head><body>' +
          `<h1>HTTP Status 400 – Bad Request</h1><p>${why}</p></body></html>`,
      );
  });
  app.use(FINERACT_API_BASE, (req: Request, res: Response, next: NextFunction) => {
    const tenant = req.header('fineract-platform-tenantid');
    if (tenant === undefined) {
      sendRaw(
        s,
        req,
        res,
        400,
        envelope(
          400,
          'error.msg.tenant.missing',
          'No tenant identifier found',
          [],
          "No tenant identifier found: Add request header of 'Fineract-Platform-TenantId'",
        ),
      );
      return;
    }
    if (tenant !== creds.tenantId) {
      // InvalidTenantIdentifierException surfaces from the servlet filter, not as API JSON.
      record(s, req, null, 400, false, null);
      res.status(400).type('text/plain').send(`The tenant identifier: ${tenant} is not valid.`);
      return;
    }
    const expected = `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`;
    if (req.header('authorization') !== expected) {
      sendRaw(
        s,
        req,
        res,
        401,
        envelope(
          401,
          'error.msg.not.authenticated',
          'Unauthenticated. Please login.',
          [],
          'Invalid authentication details were passed in api request.',
        ),
      );
      return;
    }
    next();
  });
}

function buildApp(s: SimState, creds: { username: string; password: string; tenantId: string }): Express {
  const app = express();
  app.disable('x-powered-by');
  gatekeepers(s, app, creds);
  app.use(FINERACT_API_BASE, express.json({ limit: '5mb' }));
  app.use(FINERACT_API_BASE, express.raw({ type: 'multipart/form-data', limit: '60mb' }));
  const r = express.Router();
  clientRoutes(s, r);
  loanRoutes(s, r);
  guarantorAndDocumentRoutes(s, r);
  app.use(FINERACT_API_BASE, r);
  app.use((req: Request, res: Response) =>
    sendRaw(
      s,
      req,
      res,
      404,
      envelope(404, 'error.msg.resource.not.found', 'Not found', [], `No route ${req.method} ${req.path}`),
    ),
  );
  // JSON parse errors and the like: Fineract answers 400.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    if ((err as { type?: unknown }).type === 'request.aborted') {
      // The client went away mid-body (killed, timed out): nobody to answer, nothing refused.
      record(s, req, null, 0, false, null);
      res.destroy();
      return;
    }
    sendRaw(
      s,
      req,
      res,
      400,
      envelope(
        400,
        'error.msg.invalid.request.body',
        'Invalid request body',
        [],
        String((err as Error).message),
      ),
    );
  });
  return app;
}

function seedClient(s: SimState, x: Parameters<FineractSimulator['seedClient']>[0]): SimClient {
  const legalFormId = x.fullname !== undefined ? 2 : 1;
  const c: SimClient = {
    id: s.newId(),
    externalId: x.externalId ?? null,
    officeId: s.offices[0]?.id ?? 1,
    legalFormId,
    active: true,
    body: {},
    ...(x.fullname !== undefined
      ? { fullname: x.fullname }
      : { firstname: x.firstname ?? 'Pat', lastname: x.lastname ?? 'Doe' }),
  };
  s.clients.push(c);
  for (const i of x.identifiers ?? []) {
    if (s.identifiers.some((o) => o.documentTypeId === i.documentTypeId && o.documentKey === i.documentKey))
      throw new Error(`seedClient: identifier ${i.documentTypeId}/${i.documentKey} exists`);
    s.identifiers.push({
      id: s.newId(),
      clientId: c.id,
      documentTypeId: i.documentTypeId,
      documentKey: i.documentKey,
    });
  }
  return c;
}

/** Starts the simulator on `host:port` (default 127.0.0.1, a free port). */
export async function startFineractSimulator(
  opts: FineractSimulatorOptions & { port?: number; host?: string } = {},
): Promise<FineractSimulator> {
  const creds = {
    username: opts.username ?? DEFAULT_FINERACT_TENANT.username,
    password: opts.password ?? DEFAULT_FINERACT_TENANT.password,
    tenantId: opts.tenantId ?? DEFAULT_FINERACT_TENANT.tenantId,
  };
  const s = createState(opts);
  const app = buildApp(s, creds);
  const host = opts.host ?? '127.0.0.1';
  const server: Server = await new Promise((resolve, reject) => {
    const srv = app.listen(opts.port ?? 0, host, () => resolve(srv));
    srv.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  const url = `http://${urlHost}:${port}${FINERACT_API_BASE}`;
  return {
    url,
    ...creds,
    clients: s.clients,
    loans: s.loans,
    guarantors: s.guarantors,
    documents: s.documents,
    identifiers: s.identifiers,
    requests: s.requests,
    faults: s.faults,
    contractRefusals: s.contractRefusals,
    contractViolations: s.contractViolations,
    inject(f) {
      s.faults.push({ times: 1, ...f });
    },
    seedClient: (x) => seedClient(s, x),
    keysInFlight: () => s.inFlight.size,
    writes(path) {
      return s.requests.filter(
        (q) =>
          q.method === 'POST' &&
          (path === undefined || (typeof path === 'string' ? q.path === path : path.test(q.path))),
      );
    },
    coreBlock: () => ({
      adapter: 'http',
      http: {
        profile: 'fineract',
        baseUrl: url,
        username: creds.username,
        password: creds.password,
        tenantId: creds.tenantId,
        officeId: s.offices[0]?.id ?? 1,
        approve: true,
        disburse: false,
      },
    }),
    async close() {
      for (const res of s.held) res.socket?.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
