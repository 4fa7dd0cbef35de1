import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { Response as WebResponse } from 'undici';

/**
 * A fake Mambu (API v2): real HTTP on port 0 under /api, holding to what Mambu's public API v2
 * documents and its published OpenAPI say, at least as strictly (../shared/domain-notes.md "Mambu"):
 * - `Accept: application/vnd.mambu.v2+json` on every call; HTTP Basic or an `apiKey` header (401);
 * - Idempotency-Key: a v4 UUID (else 400); a repeat within **six hours** (on the injected clock) gets
 *   the cached status and body; a key still in flight answers **409** (or, with `inFlight: 102`, an
 *   interim 102 and a dropped connection); failures (4xx, 5xx) are **not cached**: a repeat runs again;
 * - caller-supplied `id` on clients, groups and loans: letters and digits, at most 32; a second
 *   create with an id in use fails with `DUPLICATE_ID`;
 * - custom fields: properties named `_<setId>` of a set that exists for the entity, each value an
 *   existing field of the set, never `""` or null; returned only with `detailsLevel=FULL`;
 * - unknown properties refused (`INVALID_PARAMETERS`), required ones named;
 * - groups: `groupMembers[].clientKey` must be a client's encodedKey;
 * - loans: the holder's encodedKey and type, the product's encodedKey, and the product's rules —
 *   amount range, installments range, allowed period units, grace type and grace < installments
 *   (`INVALID_GRACE_PERIOD`), rate range (`PARAMS_INCONSISTENT_WITH_PRODUCT_RULES`), first repayment
 *   after the expected disbursement; states PARTIAL_APPLICATION → PENDING_APPROVAL → APPROVED → ACTIVE;
 * - disbursement: only APPROVED, `externalId` unique across transactions, and with
 *   `approverMayDisburse: false` (the default) never by the user who approved
 *   (`INVALID_USER_WHO_APPROVED_THE_LOAN_CANNOT_DISBURSE_IT`);
 * - documents: multipart with `ownerType` CLIENT | GROUP | LOAN_ACCOUNT, an existing owner `id`,
 *   a `name` of at most 256 characters without / < > | : & ? * [ ] # \ " ';
 * - the error envelope `{"errors":[{errorCode, errorReason, errorSource}]}`; paging `offset`, `limit`
 *   ≤ 1000, `paginationDetails=ON` → items-offset / items-limit / items-total headers.
 * Faults: an answer before anything runs, a commit whose answer is lost (5xx, reset), a held write.
 * Everything is recorded so tests assert on the records the fake holds.
 */

export interface FakeMambuUser {
  username: string;
  password: string;
}

export interface FakeMambuProduct {
  id: string;
  name?: string;
  encodedKey?: string;
  accountInitialState?: 'PARTIAL_APPLICATION' | 'PENDING_APPROVAL';
  loanAmount?: { min?: number; max?: number };
  installments?: { min?: number; max?: number };
  repaymentPeriodUnits?: string[];
  /** The grace type a loan of this product may have (a loan without grace sends NONE / 0). */
  gracePeriodType?: 'NONE' | 'PAY_INTEREST_ONLY' | 'INTEREST_FORGIVENESS';
  interestRate?: { min?: number; max?: number };
}

export interface FakeMambuOptions {
  users?: FakeMambuUser[];
  apiKeys?: string[];
  products?: FakeMambuProduct[];
  /** Custom field sets by entity (CLIENT, GROUP, LOAN_ACCOUNT): set id → field ids. */
  customFieldSets?: Record<string, Record<string, string[]>>;
  /** Whether the approver may also disburse (Mambu's setting); default false. */
  approverMayDisburse?: boolean;
  /** How a call whose key is in flight is answered: 409 (default) or 102. */
  inFlight?: 409 | 102;
  /** The fake's clock (idempotency expiry); default Date.now. */
  now?: () => number;
  /** The tenant's time zone (GET /setup/organization timeZoneID); default America/Chicago. */
  timeZone?: string;
}

/**
 * status-before: answer `status` (503) without running anything; status-after-commit: run (commit),
 * then answer `status` (500); reset-after-commit: run, then drop the connection; delay: hold the
 * call `delayMs` (its key stays in flight); miss: a look-up or search that finds nothing (a read
 * racing a commit), so the caller's create meets its own id.
 */
export type FakeMambuFaultKind =
  'status-before' | 'status-after-commit' | 'reset-after-commit' | 'delay' | 'miss';

export interface FakeMambuFault {
  method?: string;
  path: string | RegExp;
  kind: FakeMambuFaultKind;
  status?: number;
  times?: number;
  delayMs?: number;
}

export interface FakeMambuRecord {
  encodedKey: string;
  id: string;
  body: Record<string, unknown>;
  createdBy: string;
}

export interface FakeMambuLoan extends FakeMambuRecord {
  accountState: string;
  /** loanAmount exactly as sent (the JSON text). */
  loanAmountText: string;
  approvedBy?: string;
  disbursedBy?: string;
}

export interface FakeMambuTransaction {
  encodedKey: string;
  id: string;
  loanId: string;
  type: 'DISBURSEMENT';
  externalId: string | null;
  by: string;
}

export interface FakeMambuDocument {
  encodedKey: string;
  ownerType: string;
  ownerKey: string;
  name: string;
  notes: string | null;
  fileSize: number;
  fileName: string;
}

export interface FakeMambuRequest {
  method: string;
  path: string;
  status: number;
  idempotencyKey: string | null;
  fromCache: boolean;
  reason: string | null;
}

export interface FakeMambu {
  readonly url: string;
  readonly users: FakeMambuUser[];
  /** The tenant's loan products (a test may change a rule between attempts). */
  readonly products: Array<FakeMambuProduct & { encodedKey: string }>;
  readonly clients: FakeMambuRecord[];
  readonly groups: FakeMambuRecord[];
  readonly loans: FakeMambuLoan[];
  readonly transactions: FakeMambuTransaction[];
  readonly documents: FakeMambuDocument[];
  readonly requests: FakeMambuRequest[];
  inject(f: FakeMambuFault): void;
  /** Moves the fake's clock (idempotency expiry) forward. */
  advance(ms: number): void;
  /** A customer the bank already has (made in Mambu by a person). */
  seedClient(c: { id?: string; firstName: string; lastName: string; taxId?: string }): FakeMambuRecord;
  seedGroup(g: { id?: string; groupName: string; taxId?: string }): FakeMambuRecord;
  /** Writes that reached Mambu (POSTs other than searches), optionally by path. */
  writes(path?: string | RegExp): FakeMambuRequest[];
  /** Requests Mambu refused (4xx; not a look-up that found nothing, not a fault). */
  refused(): FakeMambuRequest[];
  close(): Promise<void>;
}

const MEDIA = 'application/vnd.mambu.v2+json';
const BASE = '/api';
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const ID_RULE = /^[A-Za-z0-9]{1,32}$/;
const SIX_HOURS = 6 * 60 * 60 * 1000;
const UNITS = ['DAYS', 'WEEKS', 'MONTHS', 'YEARS'];
const GRACE = ['NONE', 'PAY_INTEREST_ONLY', 'INTEREST_FORGIVENESS'];
const DOCUMENT_NAME_FORBIDDEN = /[/<>|:&?*[\]#\\"']/;

const CLIENT_PROPS = new Set([
  'id',
  'firstName',
  'lastName',
  'middleName',
  'idDocuments',
  'assignedBranchKey',
  'assignedCentreKey',
  'assignedUserKey',
  'birthDate',
  'gender',
  'emailAddress',
  'mobilePhone',
  'homePhone',
  'preferredLanguage',
  'notes',
  'addresses',
  'state',
  'clientRoleKey',
]);
const GROUP_PROPS = new Set([
  'id',
  'groupName',
  'groupMembers',
  'groupRoles',
  'assignedBranchKey',
  'assignedCentreKey',
  'assignedUserKey',
  'emailAddress',
  'mobilePhone',
  'homePhone',
  'notes',
  'addresses',
  'preferredLanguage',
]);
const LOAN_PROPS = new Set([
  'id',
  'accountHolderKey',
  'accountHolderType',
  'productTypeKey',
  'loanAmount',
  'loanName',
  'notes',
  'scheduleSettings',
  'interestSettings',
  'disbursementDetails',
  'assignedBranchKey',
  'assignedUserKey',
  'assignedCentreKey',
  'guarantors',
  'penaltySettings',
  'prepaymentSettings',
  'arrearsTolerancePeriod',
]);
const SCHEDULE_PROPS = new Set([
  'repaymentInstallments',
  'repaymentPeriodCount',
  'repaymentPeriodUnit',
  'gracePeriod',
  'gracePeriodType',
  'fixedDaysOfMonth',
  'periodicPayment',
  'scheduleDueDatesMethod',
  'defaultFirstRepaymentDueDateOffset',
]);
const INTEREST_PROPS = new Set(['interestRate', 'interestSpread', 'interestRateSource']);
const DISBURSEMENT_PROPS = new Set(['expectedDisbursementDate', 'firstRepaymentDate', 'fees']);
const ID_DOCUMENT_PROPS = new Set([
  'documentType',
  'documentId',
  'issuingAuthority',
  'validUntil',
  'identificationDocumentTemplateKey',
]);

class MambuFail extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: number,
    readonly reason: string,
    readonly source?: string,
  ) {
    super(reason);
  }
}

const fail = (reason: string, source?: string, status = 400, code = 4): MambuFail =>
  new MambuFail(status, code, reason, source);

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function date(v: unknown, what: string): string {
  // Published as string<date-time> (Loanaccount → disbursementDetails): a day alone is refused.
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v))
    throw fail('INVALID_DATE', what);
  const d = v.slice(0, 10);
  if (
    Number.isNaN(Date.parse(`${d}T00:00:00Z`)) ||
    new Date(`${d}T00:00:00Z`).toISOString().slice(0, 10) !== d
  )
    throw fail('INVALID_DATE', what);
  return d;
}

export async function startFakeMambu(opts: FakeMambuOptions = {}): Promise<FakeMambu> {
  const users = opts.users ?? [
    { username: 'approver', password: 'approver-pass' },
    { username: 'disburser', password: 'disburser-pass' },
  ];
  const apiKeys = opts.apiKeys ?? [];
  let offsetMs = 0;
  const now = (): number => (opts.now ?? Date.now)() + offsetMs;
  const products = (
    opts.products ?? [
      { id: 'term-loan', name: 'Term loan', gracePeriodType: 'PAY_INTEREST_ONLY' },
      { id: 'variable-term-loan', name: 'Variable-rate term loan', gracePeriodType: 'PAY_INTEREST_ONLY' },
      {
        id: 'personal-loan',
        name: 'Personal loan',
        gracePeriodType: 'PAY_INTEREST_ONLY',
        accountInitialState: 'PARTIAL_APPLICATION',
      },
    ]
  ).map((p) => ({ ...p, encodedKey: p.encodedKey ?? `8a${randomBytes(15).toString('hex')}` }));
  const sets = opts.customFieldSets ?? {
    CLIENT: { _taxInformation_Clients: ['taxId'] },
    GROUP: { _taxInformation_Groups: ['taxId'] },
    LOAN_ACCOUNT: { _boarding_Loans: ['platformLoanId'] },
  };
  const clients: FakeMambuRecord[] = [];
  const groups: FakeMambuRecord[] = [];
  const loans: FakeMambuLoan[] = [];
  const transactions: FakeMambuTransaction[] = [];
  const documents: FakeMambuDocument[] = [];
  const requests: FakeMambuRequest[] = [];
  const faults: FakeMambuFault[] = [];
  const cache = new Map<string, { status: number; body: unknown; at: number }>();
  const inFlight = new Set<string>();
  let seq = 1;
  const newKey = (): string => `8a${randomBytes(15).toString('hex')}`;
  const nextId = (): string => String(seq++);

  const app = express();
  app.disable('x-powered-by');

  function record(req: Request, status: number, fromCache: boolean, reason: string | null): void {
    requests.push({
      method: req.method,
      path: req.path,
      status,
      idempotencyKey: req.header('idempotency-key') ?? null,
      fromCache,
      reason,
    });
  }
  function sendError(req: Request, res: Response, e: MambuFail): void {
    record(req, e.status, false, e.reason);
    res.status(e.status).json({
      errors: [
        { errorCode: e.errorCode, errorReason: e.reason, ...(e.source ? { errorSource: e.source } : {}) },
      ],
    });
  }

  const userOf = (req: Request): string | null => {
    const key = req.header('apikey');
    if (key !== undefined) return apiKeys.includes(key) ? `apikey:${key.slice(0, 4)}` : null;
    const auth = req.header('authorization') ?? '';
    const m = /^Basic (.+)$/.exec(auth);
    if (!m) return null;
    const [u, ...rest] = Buffer.from(m[1] as string, 'base64')
      .toString('utf8')
      .split(':');
    const p = rest.join(':');
    return users.some((x) => x.username === u && x.password === p) ? (u as string) : null;
  };

  app.use(BASE, (req: Request, res: Response, next: NextFunction) => {
    if (req.header('accept') !== MEDIA) {
      sendError(req, res, fail('INVALID_API_VERSION', `Accept: ${MEDIA} is required`, 400, 1));
      return;
    }
    const user = userOf(req);
    if (user === null) {
      sendError(req, res, fail('INVALID_CREDENTIALS', undefined, 401, 2));
      return;
    }
    res.locals['user'] = user;
    next();
  });
  app.use(
    BASE,
    express.json({
      limit: '5mb',
      verify: (req, _res, buf) => ((req as unknown as { rawBody: string }).rawBody = buf.toString('utf8')),
    }),
  );
  app.use(BASE, express.raw({ type: 'multipart/form-data', limit: '60mb' }));

  function takeFault(req: Request): FakeMambuFault | undefined {
    const f = faults.find(
      (x) =>
        (x.times ?? 1) > 0 &&
        (x.method === undefined || x.method.toUpperCase() === req.method) &&
        (typeof x.path === 'string' ? x.path === req.path : x.path.test(req.path)),
    );
    if (f) f.times = (f.times ?? 1) - 1;
    return f;
  }

  /** Paging: offset, limit ≤ 1000, paginationDetails=ON headers. */
  function paged(req: Request, res: Response, items: unknown[]): unknown[] {
    const offset = req.query['offset'] === undefined ? 0 : Number(req.query['offset']);
    const limit = req.query['limit'] === undefined ? 50 : Number(req.query['limit']);
    if (!Number.isInteger(offset) || offset < 0) throw fail('INVALID_PAGINATION_OFFSET_VALUE', 'offset');
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
      throw fail('INVALID_PAGINATION_LIMIT_VALUE', 'limit');
    if (req.query['paginationDetails'] === 'ON') {
      res.setHeader('items-offset', String(offset));
      res.setHeader('items-limit', String(limit));
      res.setHeader('items-total', String(items.length));
    }
    return items.slice(offset, offset + limit);
  }

  /**
   * A route: faults, the Idempotency-Key (writes), the error envelope, recording. `write` routes
   * take a key: a v4 UUID, cached six hours when the answer is a success, 409 while in flight.
   */
  function route(
    write: boolean,
    handler: (
      req: Request,
      res: Response,
    ) => Promise<{ status?: number; body: unknown }> | { status?: number; body: unknown },
  ) {
    return async (req: Request, res: Response): Promise<void> => {
      const fault = takeFault(req);
      if (fault?.kind === 'status-before') {
        const status = fault.status ?? 503;
        record(req, status, false, 'fault');
        res.status(status).json({ errors: [{ errorCode: 0, errorReason: 'SERVICE_UNAVAILABLE' }] });
        return;
      }
      if (fault?.kind === 'miss') {
        if (req.method === 'GET') {
          sendError(req, res, fail('INVALID_ID', undefined, 404, 301));
          return;
        }
        record(req, 200, false, 'fault');
        res.status(200).json([]);
        return;
      }
      const key = write ? req.header('idempotency-key') : undefined;
      if (key !== undefined && !UUID_V4.test(key)) {
        sendError(req, res, fail('INVALID_IDEMPOTENCY_KEY', 'Idempotency-Key must be a v4 UUID'));
        return;
      }
      if (key !== undefined) {
        if (inFlight.has(key)) {
          if ((opts.inFlight ?? 409) === 102) {
            record(req, 102, false, 'in flight');
            res.writeProcessing();
            res.socket?.destroy();
            return;
          }
          sendError(
            req,
            res,
            fail('IDEMPOTENCY_KEY_IN_USE', 'a request with this Idempotency-Key is being processed', 409, 10),
          );
          return;
        }
        const hit = cache.get(key);
        if (hit !== undefined && now() - hit.at < SIX_HOURS) {
          record(req, hit.status, true, null);
          res.status(hit.status).json(hit.body);
          return;
        }
        if (hit !== undefined) cache.delete(key);
        inFlight.add(key);
      }
      try {
        if (fault?.kind === 'delay') await new Promise((r) => setTimeout(r, fault.delayMs ?? 500));
        let out: { status?: number; body: unknown };
        try {
          out = await handler(req, res);
        } catch (err) {
          if (err instanceof MambuFail) {
            // Failures are not cached: a repeat with the same key runs again.
            sendError(req, res, err);
            return;
          }
          throw err;
        }
        const status = out.status ?? 200;
        if (key !== undefined) cache.set(key, { status, body: out.body, at: now() });
        if (fault?.kind === 'status-after-commit') {
          record(req, fault.status ?? 500, false, 'fault');
          res.status(fault.status ?? 500).json({ errors: [{ errorCode: 0, errorReason: 'INTERNAL_ERROR' }] });
          return;
        }
        if (fault?.kind === 'reset-after-commit') {
          record(req, 0, false, 'fault');
          res.socket?.destroy();
          return;
        }
        record(req, status, false, null);
        res.status(status).json(out.body);
      } finally {
        if (key !== undefined) inFlight.delete(key);
      }
    };
  }

  /** Custom field sets on a create: sets of the entity, existing fields, no "" or null. */
  function customFields(
    entity: string,
    body: Record<string, unknown>,
  ): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const [k, v] of Object.entries(body)) {
      if (!k.startsWith('_')) continue;
      const fields = sets[entity]?.[k];
      if (fields === undefined) throw fail('INVALID_CUSTOM_FIELD_SET_ID', k);
      if (!isObject(v)) throw fail('INVALID_CUSTOM_FIELD_VALUE', k);
      for (const [f, value] of Object.entries(v)) {
        if (!fields.includes(f)) throw fail('INVALID_CUSTOM_FIELD_ID', `${k}.${f}`);
        if (value === null || value === '') throw fail('INVALID_CUSTOM_FIELD_VALUE', `${k}.${f}`);
        if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
          throw fail('INVALID_CUSTOM_FIELD_VALUE', `${k}.${f}`);
      }
      out[k] = { ...v };
    }
    return out;
  }

  function unknownProps(body: Record<string, unknown>, allowed: Set<string>, where: string): void {
    for (const k of Object.keys(body))
      if (!k.startsWith('_') && !allowed.has(k)) throw fail('INVALID_PARAMETERS', `${where}${k}`);
  }

  function callerId(body: Record<string, unknown>, taken: (id: string) => boolean): string {
    if (body['id'] === undefined) {
      let id = nextId();
      while (taken(id)) id = nextId();
      return id;
    }
    if (typeof body['id'] !== 'string' || !ID_RULE.test(body['id'])) throw fail('INVALID_ID', 'id');
    if (taken(body['id'])) throw fail('DUPLICATE_ID', 'id');
    return body['id'];
  }

  const idTaken = (id: string): boolean =>
    clients.some((c) => c.id === id) || groups.some((g) => g.id === id);
  const view = (r: FakeMambuRecord, full: boolean): Record<string, unknown> => {
    const body = Object.fromEntries(Object.entries(r.body).filter(([k]) => full || !k.startsWith('_')));
    return { ...body, id: r.id, encodedKey: r.encodedKey };
  };
  const byRef = <T extends FakeMambuRecord>(list: T[], ref: string): T | undefined =>
    list.find((x) => x.id === ref || x.encodedKey === ref);
  const full = (req: Request): boolean => req.query['detailsLevel'] === 'FULL';
  const notFound = (what: string): MambuFail => fail(`INVALID_${what}_ID`, undefined, 404, 301);

  function str(v: unknown, what: string, max = 256): string {
    if (typeof v !== 'string' || v.trim() === '') throw fail('INVALID_PARAMETERS', `${what} is required`);
    if (v.length > max) throw fail('INVALID_PARAMETERS', `${what} is longer than ${max}`);
    return v;
  }

  function createClient(body: Record<string, unknown>, user: string): FakeMambuRecord {
    unknownProps(body, CLIENT_PROPS, '');
    str(body['firstName'], 'firstName');
    str(body['lastName'], 'lastName');
    if (body['idDocuments'] !== undefined) {
      if (!Array.isArray(body['idDocuments'])) throw fail('INVALID_PARAMETERS', 'idDocuments');
      for (const d of body['idDocuments'] as unknown[]) {
        if (!isObject(d)) throw fail('INVALID_PARAMETERS', 'idDocuments');
        unknownProps(d, ID_DOCUMENT_PROPS, 'idDocuments.');
        str(d['documentType'], 'idDocuments.documentType');
        str(d['documentId'], 'idDocuments.documentId');
      }
    }
    const custom = customFields('CLIENT', body);
    const id = callerId(body, idTaken);
    const rec: FakeMambuRecord = {
      encodedKey: newKey(),
      id,
      body: { ...body, ...custom, clientState: 'PENDING_APPROVAL' },
      createdBy: user,
    };
    clients.push(rec);
    return rec;
  }

  function createGroup(body: Record<string, unknown>, user: string): FakeMambuRecord {
    unknownProps(body, GROUP_PROPS, '');
    str(body['groupName'], 'groupName', 255);
    if (body['groupMembers'] !== undefined) {
      if (!Array.isArray(body['groupMembers'])) throw fail('INVALID_PARAMETERS', 'groupMembers');
      for (const m of body['groupMembers'] as unknown[]) {
        if (!isObject(m) || typeof m['clientKey'] !== 'string')
          throw fail('INVALID_PARAMETERS', 'groupMembers.clientKey');
        for (const k of Object.keys(m))
          if (k !== 'clientKey' && k !== 'roles') throw fail('INVALID_PARAMETERS', `groupMembers.${k}`);
        if (!clients.some((c) => c.encodedKey === m['clientKey']))
          throw fail('INVALID_CLIENT_KEY', 'groupMembers.clientKey');
      }
    }
    const custom = customFields('GROUP', body);
    const id = callerId(body, idTaken);
    const rec: FakeMambuRecord = { encodedKey: newKey(), id, body: { ...body, ...custom }, createdBy: user };
    groups.push(rec);
    return rec;
  }

  function createLoan(body: Record<string, unknown>, raw: string, user: string): FakeMambuLoan {
    unknownProps(body, LOAN_PROPS, '');
    const type = body['accountHolderType'];
    if (type !== 'CLIENT' && type !== 'GROUP') throw fail('INVALID_PARAMETERS', 'accountHolderType');
    const holders: FakeMambuRecord[] = type === 'CLIENT' ? clients : groups;
    if (
      typeof body['accountHolderKey'] !== 'string' ||
      !holders.some((h) => h.encodedKey === body['accountHolderKey'])
    )
      throw fail(type === 'CLIENT' ? 'INVALID_CLIENT_KEY' : 'INVALID_GROUP_KEY', 'accountHolderKey');
    const product = products.find((p) => p.encodedKey === body['productTypeKey']);
    if (product === undefined) throw fail('INVALID_PRODUCT_KEY', 'productTypeKey');
    const amount = body['loanAmount'];
    if (typeof amount !== 'number' || !(amount > 0)) throw fail('INVALID_LOAN_AMOUNT', 'loanAmount');
    const amountText = /"loanAmount"\s*:\s*(-?[0-9.eE+]+)/.exec(raw)?.[1] ?? String(amount);
    if (!/^\d+(\.\d{1,2})?$/.test(amountText))
      throw fail('INVALID_LOAN_AMOUNT', `loanAmount ${amountText}: at most 2 decimals`);
    if (
      (product.loanAmount?.min !== undefined && amount < product.loanAmount.min) ||
      (product.loanAmount?.max !== undefined && amount > product.loanAmount.max)
    )
      throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'loanAmount');
    const s = body['scheduleSettings'];
    if (!isObject(s)) throw fail('INVALID_PARAMETERS', 'scheduleSettings is required');
    unknownProps(s, SCHEDULE_PROPS, 'scheduleSettings.');
    const n = s['repaymentInstallments'];
    if (!Number.isInteger(n) || (n as number) < 1)
      throw fail('INVALID_REPAYMENT_INSTALLMENTS', 'scheduleSettings.repaymentInstallments');
    if (
      (product.installments?.min !== undefined && (n as number) < product.installments.min) ||
      (product.installments?.max !== undefined && (n as number) > product.installments.max)
    )
      throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'scheduleSettings.repaymentInstallments');
    if (!Number.isInteger(s['repaymentPeriodCount']) || (s['repaymentPeriodCount'] as number) < 1)
      throw fail('INVALID_REPAYMENT_PERIOD_COUNT', 'scheduleSettings.repaymentPeriodCount');
    if (typeof s['repaymentPeriodUnit'] !== 'string' || !UNITS.includes(s['repaymentPeriodUnit']))
      throw fail('INVALID_PARAMETERS', 'scheduleSettings.repaymentPeriodUnit');
    if (
      product.repaymentPeriodUnits !== undefined &&
      !product.repaymentPeriodUnits.includes(s['repaymentPeriodUnit'])
    )
      throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'scheduleSettings.repaymentPeriodUnit');
    const grace = s['gracePeriod'] ?? 0;
    const graceType = s['gracePeriodType'] ?? 'NONE';
    if (!Number.isInteger(grace) || (grace as number) < 0)
      throw fail('INVALID_GRACE_PERIOD', 'scheduleSettings.gracePeriod');
    if (typeof graceType !== 'string' || !GRACE.includes(graceType))
      throw fail('INVALID_PARAMETERS', 'scheduleSettings.gracePeriodType');
    if ((grace as number) >= (n as number))
      throw fail(
        'INVALID_GRACE_PERIOD',
        'scheduleSettings.gracePeriod must be less than repaymentInstallments',
      );
    if ((grace as number) > 0 && graceType !== (product.gracePeriodType ?? 'NONE'))
      throw fail(
        'INVALID_GRACE_PERIOD',
        `scheduleSettings.gracePeriodType: the product allows ${product.gracePeriodType ?? 'NONE'}`,
      );
    if ((grace as number) === 0 && graceType !== 'NONE' && graceType !== (product.gracePeriodType ?? 'NONE'))
      throw fail('INVALID_GRACE_PERIOD', 'scheduleSettings.gracePeriodType');
    const i = body['interestSettings'];
    if (!isObject(i)) throw fail('INVALID_PARAMETERS', 'interestSettings is required');
    unknownProps(i, INTEREST_PROPS, 'interestSettings.');
    const rate = i['interestRate'];
    if (typeof rate !== 'number' || rate < 0)
      throw fail('INVALID_INTEREST_RATE', 'interestSettings.interestRate');
    if (
      (product.interestRate?.min !== undefined && rate < product.interestRate.min) ||
      (product.interestRate?.max !== undefined && rate > product.interestRate.max)
    )
      throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'interestSettings.interestRate');
    const d = body['disbursementDetails'];
    if (!isObject(d)) throw fail('INVALID_PARAMETERS', 'disbursementDetails is required');
    unknownProps(d, DISBURSEMENT_PROPS, 'disbursementDetails.');
    const expected = date(d['expectedDisbursementDate'], 'disbursementDetails.expectedDisbursementDate');
    if (
      d['firstRepaymentDate'] !== undefined &&
      date(d['firstRepaymentDate'], 'disbursementDetails.firstRepaymentDate') <= expected
    ) {
      throw fail(
        'FIRST_REPAYMENT_DATE_BEFORE_EXPECTED_DISBURSEMENT_DATE',
        'disbursementDetails.firstRepaymentDate',
      );
    }
    if (body['loanName'] !== undefined) str(body['loanName'], 'loanName', 255);
    const custom = customFields('LOAN_ACCOUNT', body);
    const id = callerId(body, (x) => loans.some((l) => l.id === x));
    const loan: FakeMambuLoan = {
      encodedKey: newKey(),
      id,
      body: { ...body, ...custom },
      createdBy: user,
      accountState: product.accountInitialState ?? 'PENDING_APPROVAL',
      loanAmountText: amountText,
    };
    loans.push(loan);
    return loan;
  }

  const loanView = (l: FakeMambuLoan, isFull: boolean): Record<string, unknown> => ({
    ...view(l, isFull),
    accountState: l.accountState,
  });

  function search<T extends FakeMambuRecord>(
    req: Request,
    res: Response,
    list: T[],
    fields: (x: T, field: string) => unknown,
    out: (x: T) => unknown,
  ): unknown[] {
    const criteria = (req.body as { filterCriteria?: unknown } | undefined)?.filterCriteria;
    if (!Array.isArray(criteria)) throw fail('INVALID_PARAMETERS', 'filterCriteria');
    let hits = list;
    for (const c of criteria as unknown[]) {
      if (!isObject(c) || typeof c['field'] !== 'string' || c['operator'] !== 'EQUALS')
        throw fail('INVALID_PARAMETERS', 'filterCriteria');
      hits = hits.filter((x) => {
        const v = fields(x, c['field'] as string);
        return (
          (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') &&
          String(v) === String(c['value'])
        );
      });
    }
    return paged(req, res, hits.map(out));
  }
  const fieldOf = (x: FakeMambuRecord, field: string): unknown => {
    if (field.startsWith('_')) {
      const [set, f] = field.split('.');
      const v = x.body[set ?? ''];
      return isObject(v) ? v[f ?? ''] : undefined;
    }
    if (field === 'id') return x.id;
    if (field === 'encodedKey') return x.encodedKey;
    return x.body[field];
  };

  app.post(
    `${BASE}/clients`,
    route(true, (req, res) => ({
      status: 201,
      body: view(createClient(req.body as Record<string, unknown>, res.locals['user'] as string), true),
    })),
  );
  app.post(
    `${BASE}/clients\\:search`,
    route(false, (req, res) => ({ body: search(req, res, clients, fieldOf, (c) => view(c, full(req))) })),
  );
  app.get(
    `${BASE}/clients/:id`,
    route(false, (req) => {
      const c = byRef(clients, String(req.params['id']));
      if (c === undefined) throw notFound('CLIENT');
      return { body: view(c, full(req)) };
    }),
  );
  app.post(
    `${BASE}/groups`,
    route(true, (req, res) => ({
      status: 201,
      body: view(createGroup(req.body as Record<string, unknown>, res.locals['user'] as string), true),
    })),
  );
  app.post(
    `${BASE}/groups\\:search`,
    route(false, (req, res) => ({ body: search(req, res, groups, fieldOf, (g) => view(g, full(req))) })),
  );
  app.get(
    `${BASE}/groups/:id`,
    route(false, (req) => {
      const g = byRef(groups, String(req.params['id']));
      if (g === undefined) throw notFound('GROUP');
      return { body: view(g, full(req)) };
    }),
  );
  app.post(
    `${BASE}/loans`,
    route(true, (req, res) => ({
      status: 201,
      body: loanView(
        createLoan(
          req.body as Record<string, unknown>,
          (req as unknown as { rawBody: string }).rawBody ?? '',
          res.locals['user'] as string,
        ),
        true,
      ),
    })),
  );
  app.post(
    `${BASE}/loans\\:search`,
    route(false, (req, res) => ({ body: search(req, res, loans, fieldOf, (l) => loanView(l, full(req))) })),
  );
  app.get(
    `${BASE}/loans`,
    route(false, (req, res) => ({
      body: paged(
        req,
        res,
        loans.map((l) => loanView(l, full(req))),
      ),
    })),
  );
  app.post(
    `${BASE}/loans/transactions\\:search`,
    route(false, (req, res) => {
      const criteria = (req.body as { filterCriteria?: unknown }).filterCriteria;
      if (!Array.isArray(criteria)) throw fail('INVALID_PARAMETERS', 'filterCriteria');
      let hits = transactions;
      for (const c of criteria as Array<Record<string, unknown>>) {
        if (c['operator'] !== 'EQUALS') throw fail('INVALID_PARAMETERS', 'filterCriteria.operator');
        hits = hits.filter(
          (t) => String((t as unknown as Record<string, unknown>)[String(c['field'])]) === String(c['value']),
        );
      }
      return { body: paged(req, res, hits) };
    }),
  );
  app.get(
    `${BASE}/loans/:id`,
    route(false, (req) => {
      const l = byRef(loans, String(req.params['id']));
      if (l === undefined) throw notFound('ACCOUNT');
      return { body: loanView(l, full(req)) };
    }),
  );
  app.post(
    `${BASE}/loans/:id\\:changeState`,
    route(true, (req, res) => {
      const l = byRef(loans, String(req.params['id']));
      if (l === undefined) throw notFound('ACCOUNT');
      const body = req.body as Record<string, unknown>;
      for (const k of Object.keys(body))
        if (k !== 'action' && k !== 'notes') throw fail('INVALID_PARAMETERS', k);
      const transitions: Record<string, [string, string]> = {
        REQUEST_APPROVAL: ['PARTIAL_APPLICATION', 'PENDING_APPROVAL'],
        APPROVE: ['PENDING_APPROVAL', 'APPROVED'],
        UNDO_APPROVE: ['APPROVED', 'PENDING_APPROVAL'],
      };
      const t = transitions[String(body['action'])];
      if (t === undefined) throw fail('INVALID_PARAMETERS', 'action');
      if (l.accountState !== t[0])
        throw fail('INVALID_ACCOUNT_STATE_FOR_ACTION', `${String(body['action'])} from ${l.accountState}`);
      l.accountState = t[1];
      if (body['action'] === 'APPROVE') l.approvedBy = res.locals['user'] as string;
      return { body: loanView(l, false) };
    }),
  );
  app.post(
    `${BASE}/loans/:id/disbursement-transactions`,
    route(true, (req, res) => {
      const l = byRef(loans, String(req.params['id']));
      if (l === undefined) throw notFound('ACCOUNT');
      const body = req.body as Record<string, unknown>;
      for (const k of Object.keys(body))
        if (
          ![
            'externalId',
            'notes',
            'valueDate',
            'bookingDate',
            'amount',
            'transactionDetails',
            'fees',
          ].includes(k)
        )
          throw fail('INVALID_PARAMETERS', k);
      if (l.accountState !== 'APPROVED')
        throw fail('INVALID_ACCOUNT_STATE', `disbursement from ${l.accountState}`);
      const user = res.locals['user'] as string;
      if (!(opts.approverMayDisburse ?? false) && l.approvedBy === user)
        throw fail('INVALID_USER_WHO_APPROVED_THE_LOAN_CANNOT_DISBURSE_IT');
      const externalId = typeof body['externalId'] === 'string' ? body['externalId'] : null;
      if (externalId !== null && transactions.some((t) => t.externalId === externalId))
        throw fail('DUPLICATE_TRANSACTION_EXTERNAL_ID', 'externalId');
      const t: FakeMambuTransaction = {
        encodedKey: newKey(),
        id: nextId(),
        loanId: l.id,
        type: 'DISBURSEMENT',
        externalId,
        by: user,
      };
      transactions.push(t);
      l.accountState = 'ACTIVE';
      l.disbursedBy = user;
      return { status: 201, body: t };
    }),
  );
  app.post(
    `${BASE}/documents`,
    route(true, async (req) => {
      if (!Buffer.isBuffer(req.body))
        throw fail('INVALID_PARAMETERS', 'a multipart/form-data body is required');
      const form = await new WebResponse(req.body, {
        headers: { 'content-type': req.header('content-type') ?? '' },
      }).formData();
      const file = form.get('file');
      if (file === null || typeof file === 'string') throw fail('INVALID_PARAMETERS', 'file');
      const ownerType = form.get('ownerType');
      const ownerId = form.get('id');
      const name = form.get('name');
      const lists: Record<string, FakeMambuRecord[]> = {
        CLIENT: clients,
        GROUP: groups,
        LOAN_ACCOUNT: loans,
      };
      if (typeof ownerType !== 'string' || lists[ownerType] === undefined)
        throw fail('INVALID_PARAMETERS', 'ownerType');
      const owner = typeof ownerId === 'string' ? byRef(lists[ownerType], ownerId) : undefined;
      if (owner === undefined) throw fail('INVALID_ENTITY_ID', 'id');
      if (typeof name !== 'string' || name === '' || name.length > 256 || DOCUMENT_NAME_FORBIDDEN.test(name))
        throw fail('INVALID_DOCUMENT_NAME', 'name');
      const notes = form.get('notes');
      const doc: FakeMambuDocument = {
        encodedKey: newKey(),
        ownerType,
        ownerKey: owner.encodedKey,
        name,
        notes: typeof notes === 'string' ? notes : null,
        fileSize: file.size,
        fileName: file.name,
      };
      documents.push(doc);
      return { status: 201, body: { ...doc, id: doc.encodedKey } };
    }),
  );
  app.get(
    `${BASE}/documents/documentsMetadata`,
    route(false, (req, res) => {
      const entity = typeof req.query['entity'] === 'string' ? req.query['entity'] : '';
      const owner = typeof req.query['ownerKey'] === 'string' ? req.query['ownerKey'] : '';
      return {
        body: paged(
          req,
          res,
          documents.filter((d) => d.ownerType === entity && d.ownerKey === owner),
        ),
      };
    }),
  );
  const productView = (p: (typeof products)[number]): Record<string, unknown> => ({
    id: p.id,
    encodedKey: p.encodedKey,
    name: p.name ?? p.id,
    newAccountSettings: {
      accountInitialState: p.accountInitialState ?? 'PENDING_APPROVAL',
      idGeneratorType: 'INCREMENTAL_NUMBER',
      idPattern: '@@@###',
    },
    gracePeriodSettings: { gracePeriodType: p.gracePeriodType ?? 'NONE' },
    loanAmountSettings: {
      loanAmount: { minValue: p.loanAmount?.min ?? null, maxValue: p.loanAmount?.max ?? null },
    },
    scheduleSettings: {
      numInstallments: { minValue: p.installments?.min ?? null, maxValue: p.installments?.max ?? null },
    },
  });
  app.get(
    `${BASE}/loanproducts`,
    route(false, (req, res) => ({ body: paged(req, res, products.map(productView)) })),
  );
  app.get(
    `${BASE}/loanproducts/:id`,
    route(false, (req) => {
      const p = products.find((x) => x.id === req.params['id'] || x.encodedKey === req.params['id']);
      if (p === undefined) throw fail('INVALID_PRODUCT_ID', undefined, 404, 301);
      return { body: productView(p) };
    }),
  );
  app.get(
    `${BASE}/customfieldsets`,
    route(false, (req, res) => {
      const entity = typeof req.query['availableFor'] === 'string' ? req.query['availableFor'] : '';
      const list = Object.entries(sets[entity] ?? {}).map(([id, fields]) => ({
        id,
        name: id,
        availableFor: entity,
        customFields: fields.map((f) => ({ id: f })),
      }));
      return { body: paged(req, res, list) };
    }),
  );
  app.get(
    `${BASE}/setup/organization`,
    route(false, () => ({
      body: {
        institutionName: 'Simulated bank',
        timeZoneID: opts.timeZone ?? 'America/Chicago',
        currency: 'USD',
        dateFormat: 'dd-MM-yyyy',
        dateTimeFormat: 'dd-MM-yyyy HH:mm:ss',
        decimalSeparator: 'POINT',
      },
    })),
  );
  app.use(BASE, (req: Request, res: Response) =>
    sendError(req, res, fail('INVALID_API_OPERATION', `${req.method} ${req.path}`, 404, 0)),
  );

  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;

  const seedTax = (set: string, taxId: string | undefined): Record<string, unknown> =>
    taxId === undefined ? {} : { [set]: { taxId } };
  return {
    url: `http://127.0.0.1:${port}${BASE}`,
    users,
    products,
    clients,
    groups,
    loans,
    transactions,
    documents,
    requests,
    inject: (f) => faults.push(f),
    advance: (ms) => {
      offsetMs += ms;
    },
    seedClient: (c) => {
      const rec: FakeMambuRecord = {
        encodedKey: newKey(),
        id: c.id ?? nextId(),
        body: {
          firstName: c.firstName,
          lastName: c.lastName,
          ...seedTax('_taxInformation_Clients', c.taxId),
        },
        createdBy: 'teller',
      };
      clients.push(rec);
      return rec;
    },
    seedGroup: (g) => {
      const rec: FakeMambuRecord = {
        encodedKey: newKey(),
        id: g.id ?? nextId(),
        body: { groupName: g.groupName, ...seedTax('_taxInformation_Groups', g.taxId) },
        createdBy: 'teller',
      };
      groups.push(rec);
      return rec;
    },
    writes: (path) =>
      requests.filter(
        (r) =>
          r.method === 'POST' &&
          !r.path.endsWith(':search') &&
          (path === undefined || (typeof path === 'string' ? r.path === path : path.test(r.path))),
      ),
    refused: () =>
      requests.filter(
        (r) =>
          r.status >= 400 &&
          r.status < 500 &&
          r.reason !== 'fault' &&
          !(r.method === 'GET' && r.status === 404),
      ),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
