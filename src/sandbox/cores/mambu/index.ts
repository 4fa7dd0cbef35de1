import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Request, type Response } from 'express';
import { authenticate, sendError } from './http.js';
import { registerRoutes } from './routes.js';
import { fail } from './rules.js';
import {
  createState,
  newEncodedKey,
  nextId,
  type ContractViolation,
  type MambuFault,
  type MambuSimulatorOptions,
  type SimDocument,
  type SimLoan,
  type SimProduct,
  type SimRecord,
  type SimRequest,
  type SimTransaction,
} from './state.js';
import type { MambuUser } from './tenant.js';

export {
  DEFAULT_MAMBU_TENANT,
  type MambuProductSetup,
  type MambuTenantSetup,
  type MambuUser,
} from './tenant.js';
export { MAMBU_OPERATIONS, type MambuOperationName } from './contract.js';
export type {
  ContractViolation,
  MambuFault,
  MambuFaultKind,
  MambuSimulatorOptions,
  SimDocument,
  SimLoan,
  SimRecord,
  SimRequest,
  SimTransaction,
} from './state.js';

const BASE = '/api';

/**
 * A Mambu (API v2) users and tests can run: real HTTP under /api, holding every request and answer
 * to Mambu's published contract (contract.ts) and to the rules Mambu states in prose (rules.ts):
 * the v2 media type; HTTP Basic or an apiKey header; v4-UUID Idempotency-Keys kept six hours, 409
 * (or 102) while in flight, failures not cached; caller-supplied ids and DUPLICATE_ID; custom field
 * sets; products' ranges; PARTIAL_APPLICATION → PENDING_APPROVAL → APPROVED → ACTIVE; a separate
 * disburser; documents; paging; the error envelope. Faults can be injected; everything is recorded.
 */
export interface MambuSimulator {
  /** The API base to configure as core.mambu.baseUrl. */
  readonly url: string;
  readonly users: MambuUser[];
  /** The tenant's loan products (a test may change a rule between attempts). */
  readonly products: SimProduct[];
  readonly clients: SimRecord[];
  readonly groups: SimRecord[];
  readonly loans: SimLoan[];
  readonly transactions: SimTransaction[];
  readonly documents: SimDocument[];
  readonly requests: SimRequest[];
  /** Answers of the simulator that broke the published response schemas (should stay empty). */
  readonly contractViolations: ContractViolation[];
  inject(f: MambuFault): void;
  /** Moves the simulator's clock (idempotency expiry) forward. */
  advance(ms: number): void;
  /** A customer the bank already has (made in Mambu by a person). */
  seedClient(c: { id?: string; firstName: string; lastName: string; taxId?: string }): SimRecord;
  seedGroup(g: { id?: string; groupName: string; taxId?: string }): SimRecord;
  /** Writes that reached Mambu (POSTs other than searches), optionally by path. */
  writes(path?: string | RegExp): SimRequest[];
  /** Requests Mambu refused (4xx; not a look-up that found nothing, not a fault). */
  refused(): SimRequest[];
  /** The `core:` config block for this simulator, credentials included (approver, and a separate disburser). */
  coreBlock(): Record<string, unknown>;
  close(): Promise<void>;
}

export async function startMambuSimulator(
  opts: MambuSimulatorOptions & { port?: number; host?: string } = {},
): Promise<MambuSimulator> {
  const st = createState(opts);
  const app = express();
  app.disable('x-powered-by');
  app.use(BASE, authenticate(st));
  app.use(
    BASE,
    express.json({
      limit: '5mb',
      verify: (req, _res, buf) => ((req as unknown as { rawBody: string }).rawBody = buf.toString('utf8')),
    }),
  );
  app.use(BASE, express.raw({ type: 'multipart/form-data', limit: '60mb' }));
  registerRoutes(app, st, BASE);
  app.use(BASE, (req: Request, res: Response) =>
    sendError(st, req, res, fail('INVALID_API_OPERATION', `${req.method} ${req.path}`, 404, 0), null),
  );
  const host = opts.host ?? '127.0.0.1';
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(opts.port ?? 0, host, () => resolve(s));
    s.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}${BASE}`;

  const seed = (list: SimRecord[], id: string | undefined, body: Record<string, unknown>): SimRecord => {
    const rec: SimRecord = {
      encodedKey: newEncodedKey(),
      id: id ?? nextId(st),
      body,
      createdBy: 'teller',
      createdAt: st.now(),
    };
    list.push(rec);
    return rec;
  };
  const tax = (set: string, taxId: string | undefined): Record<string, unknown> =>
    taxId === undefined ? {} : { [set]: { taxId } };
  const [approver, disburser] = st.tenant.users;
  return {
    url,
    users: st.tenant.users,
    products: st.products,
    clients: st.clients,
    groups: st.groups,
    loans: st.loans,
    transactions: st.transactions,
    documents: st.documents,
    requests: st.requests,
    contractViolations: st.violations,
    inject: (f) => st.faults.push(f),
    advance: (ms) => {
      st.offsetMs += ms;
    },
    seedClient: (c) =>
      seed(st.clients, c.id, {
        firstName: c.firstName,
        lastName: c.lastName,
        state: 'ACTIVE',
        ...tax('_taxInformation_Clients', c.taxId),
      }),
    seedGroup: (g) =>
      seed(st.groups, g.id, { groupName: g.groupName, ...tax('_taxInformation_Groups', g.taxId) }),
    writes: (path) =>
      st.requests.filter(
        (r) =>
          r.method === 'POST' &&
          !r.path.endsWith(':search') &&
          (path === undefined || (typeof path === 'string' ? r.path === path : path.test(r.path))),
      ),
    refused: () =>
      st.requests.filter(
        (r) =>
          r.status >= 400 &&
          r.status < 500 &&
          r.reason !== 'fault' &&
          !(r.method === 'GET' && r.status === 404),
      ),
    coreBlock: () => ({
      adapter: 'mambu',
      mambu: {
        baseUrl: url,
        auth: approver
          ? { username: approver.username, password: approver.password }
          : { apiKey: st.tenant.apiKeys[0] },
        ...(disburser
          ? { disburseAuth: { username: disburser.username, password: disburser.password } }
          : {}),
        approve: true,
        disburse: true,
        timeZone: st.tenant.timeZone,
      },
    }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
