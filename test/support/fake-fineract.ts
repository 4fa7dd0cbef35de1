import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type Request, type Response, type NextFunction } from 'express';
import { Response as WebResponse } from 'undici';

/**
 * A fake Apache Fineract core: real HTTP on port 0 under /fineract-provider/api/v1, with the rules
 * that trip real integrations — basic auth and the tenant header, unique external ids (403 like
 * Fineract's duplicate checks), `dateFormat` + `locale` with every date, `loanTermFrequency` =
 * `repaymentEvery × numberOfRepayments`, `loanTermFrequencyType` = `repaymentFrequencyType`,
 * `legalFormId` rules, unsupported parameters refused, multipart document upload, loan
 * approve/disburse commands, optional Idempotency-Key replay — and fault injection (5xx before
 * the write, or the write committed and then the response held/failed/reset).
 *
 * Everything is recorded so a test can assert "exactly one client per external id".
 */

export interface FakeFineractOptions {
  username?: string;
  password?: string;
  tenantId?: string;
  /** Replay the stored response for a repeated Idempotency-Key (Fineract's idempotency feature). */
  idempotencyReplay?: boolean;
  /** Loan product ids that exist (default: any positive integer). */
  products?: number[];
}

export type FaultKind =
  /** Answer `status` (default 503) without executing anything. */
  | 'status-before'
  /** Execute (commit), then answer `status` (default 500) instead of the real response. */
  | 'status-after-commit'
  /** Execute (commit), then never answer (the client times out). */
  | 'hang-after-commit'
  /** Execute (commit), then drop the connection. */
  | 'reset-after-commit';

export interface Fault {
  method?: string;
  /** Matched against the path below the API base, e.g. `/loans` or /^\/loans\/\d+\/documents$/ */
  path: string | RegExp;
  kind: FaultKind;
  status?: number;
  /** How many matching requests it applies to (default 1). */
  times?: number;
}

export interface FakeClient {
  id: number;
  externalId: string | null;
  officeId: number;
  legalFormId: number;
  firstname?: string;
  lastname?: string;
  fullname?: string;
  active: boolean;
  body: Record<string, unknown>;
}

export interface FakeLoan {
  id: number;
  externalId: string | null;
  clientId: number;
  statusId: number;
  body: Record<string, unknown>;
  approvedOnDate?: string;
  actualDisbursementDate?: string;
}

export interface FakeGuarantor {
  id: number;
  loanId: number;
  guarantorTypeId: number;
  entityId: number | null;
  firstname?: string;
  lastname?: string;
}

export interface FakeDocument {
  id: number;
  loanId: number;
  name: string;
  description: string;
  fileName: string;
  type: string;
  size: number;
  sha256: string;
}

export interface RecordedRequest {
  method: string;
  path: string;
  status: number;
  idempotencyKey: string | null;
  fromCache: boolean;
  fault: FaultKind | null;
}

export interface FakeFineract {
  /** Base URL, ending in /fineract-provider/api/v1 */
  readonly url: string;
  readonly username: string;
  readonly password: string;
  readonly tenantId: string;
  readonly clients: FakeClient[];
  readonly loans: FakeLoan[];
  readonly guarantors: FakeGuarantor[];
  readonly documents: FakeDocument[];
  readonly requests: RecordedRequest[];
  readonly faults: Fault[];
  inject(fault: Fault): void;
  /** Writes that reached the handlers (POSTs), by path pattern. */
  writes(path?: string | RegExp): RecordedRequest[];
  close(): Promise<void>;
}

const BASE = '/fineract-provider/api/v1';

const CLIENT_PARAMS = new Set([
  'address', 'officeId', 'firstname', 'middlename', 'lastname', 'fullname', 'legalFormId', 'externalId', 'mobileNo',
  'emailAddress', 'active', 'activationDate', 'dateFormat', 'locale', 'submittedOnDate', 'dateOfBirth', 'genderId',
  'clientTypeId', 'clientClassificationId', 'staffId', 'savingsProductId', 'isStaff', 'clientNonPersonDetails',
  'datatables', 'familyMembers', 'groupId', 'accountNo', 'isAddressEnabled',
]);
const CLIENT_DATES = ['activationDate', 'submittedOnDate', 'dateOfBirth'];

const LOAN_PARAMS = new Set([
  'clientId', 'productId', 'principal', 'loanTermFrequency', 'loanTermFrequencyType', 'loanType', 'numberOfRepayments',
  'repaymentEvery', 'repaymentFrequencyType', 'interestRatePerPeriod', 'amortizationType', 'interestType',
  'interestCalculationPeriodType', 'transactionProcessingStrategyCode', 'expectedDisbursementDate', 'submittedOnDate',
  'externalId', 'dateFormat', 'locale', 'repaymentsStartingFromDate', 'interestChargedFromDate', 'graceOnPrincipalPayment',
  'graceOnInterestPayment', 'graceOnInterestCharged', 'graceOnArrearsAgeing', 'daysInYearType', 'allowPartialPeriodInterestCalcualtion',
  'isEqualAmortization', 'fundId', 'loanOfficerId', 'loanPurposeId', 'charges', 'collateral', 'disbursementData', 'linkAccountId',
  'maxOutstandingLoanBalance', 'inArrearsTolerance', 'fixedEmiAmount', 'isTopup', 'datatables', 'submittedOnNote',
  'createStandingInstructionAtDisbursement', 'repaymentFrequencyNthDayType', 'repaymentFrequencyDayOfWeekType',
  'isFloatingInterestRate', 'interestRateDifferential', 'accountNo', 'enableInstallmentLevelDelinquency',
]);
const LOAN_REQUIRED = [
  'clientId', 'productId', 'principal', 'loanTermFrequency', 'loanTermFrequencyType', 'loanType', 'numberOfRepayments',
  'repaymentEvery', 'repaymentFrequencyType', 'interestRatePerPeriod', 'amortizationType', 'interestType',
  'interestCalculationPeriodType', 'transactionProcessingStrategyCode', 'expectedDisbursementDate', 'submittedOnDate',
];
const LOAN_DATES = ['expectedDisbursementDate', 'submittedOnDate', 'repaymentsStartingFromDate', 'interestChargedFromDate'];
const FREQ = ['days', 'weeks', 'months', 'years'];

class HttpFail extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super(String(body['defaultUserMessage']));
  }
}

interface FieldError {
  parameterName: string;
  code: string;
  message: string;
}

function validationFail(resource: string, errors: FieldError[]): HttpFail {
  return new HttpFail(400, {
    developerMessage: 'The request was invalid. This typically will happen due to validation errors which are provided.',
    httpStatusCode: '400',
    defaultUserMessage: 'Validation errors exist.',
    userMessageGlobalisationCode: 'validation.msg.validation.errors.exist',
    errors: errors.map((e) => ({
      developerMessage: e.message,
      defaultUserMessage: e.message,
      userMessageGlobalisationCode: `validation.msg.${resource}.${e.parameterName}.${e.code}`,
      parameterName: e.parameterName,
    })),
  });
}

function domainFail(status: number, code: string, message: string): HttpFail {
  return new HttpFail(status, {
    developerMessage: message,
    httpStatusCode: String(status),
    defaultUserMessage: message,
    userMessageGlobalisationCode: code,
    errors: [{ developerMessage: message, defaultUserMessage: message, userMessageGlobalisationCode: code, parameterName: 'id' }],
  });
}

const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];

/** Parses a date with a Java-style pattern (yyyy, MM, MMMM, dd); returns yyyy-mm-dd or null. */
export function parseFineractDate(value: unknown, format: string): string | null {
  if (typeof value !== 'string') return null;
  const order: string[] = [];
  const re = format.replace(/yyyy|MMMM|MM|dd|[.*+?^${}()|[\]\\]/g, (tok) => {
    if (tok === 'yyyy') return order.push('y'), '(\\d{4})';
    if (tok === 'MMMM') return order.push('N'), '([A-Za-z]+)';
    if (tok === 'MM') return order.push('M'), '(\\d{1,2})';
    if (tok === 'dd') return order.push('d'), '(\\d{1,2})';
    return `\\${tok}`;
  });
  const m = new RegExp(`^${re}$`).exec(value.trim());
  if (!m) return null;
  let y = 0;
  let mo = 0;
  let d = 0;
  order.forEach((k, i) => {
    const v = m[i + 1] ?? '';
    if (k === 'y') y = Number(v);
    if (k === 'M') mo = Number(v);
    if (k === 'N') mo = MONTHS.indexOf(v.toLowerCase()) + 1;
    if (k === 'd') d = Number(v);
  });
  const dt = new Date(Date.UTC(y, mo - 1, d));
  if (mo < 1 || dt.getUTCFullYear() !== y || dt.getUTCMonth() !== mo - 1 || dt.getUTCDate() !== d) return null;
  return dt.toISOString().slice(0, 10);
}

function dateArray(iso: string | undefined): number[] | undefined {
  if (iso === undefined) return undefined;
  const [y, m, d] = iso.split('-').map(Number);
  return [y ?? 0, m ?? 0, d ?? 0];
}

function addPeriod(iso: string, n: number, unit: number): string {
  const dt = new Date(`${iso}T00:00:00Z`);
  if (unit === 0) dt.setUTCDate(dt.getUTCDate() + n);
  if (unit === 1) dt.setUTCDate(dt.getUTCDate() + 7 * n);
  if (unit === 2) dt.setUTCMonth(dt.getUTCMonth() + n);
  if (unit === 3) dt.setUTCFullYear(dt.getUTCFullYear() + n);
  return dt.toISOString().slice(0, 10);
}

function num(v: unknown, locale: unknown): number | null {
  if (typeof v === 'number') return Number.isFinite(v) ? v : null;
  if (typeof v !== 'string' || v.trim() === '') return null;
  // Numbers in strings are read with the request's locale; only `en` grouping is modelled here.
  const text = locale === 'en' ? v.replace(/,/g, '') : v;
  const n = Number(text);
  return Number.isFinite(n) ? n : null;
}

function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v);
}

export async function startFakeFineract(opts: FakeFineractOptions = {}): Promise<FakeFineract> {
  const username = opts.username ?? 'mifos';
  const password = opts.password ?? 'password';
  const tenantId = opts.tenantId ?? 'default';
  const replay = opts.idempotencyReplay ?? true;
  const clients: FakeClient[] = [];
  const loans: FakeLoan[] = [];
  const guarantors: FakeGuarantor[] = [];
  const documents: FakeDocument[] = [];
  const requests: RecordedRequest[] = [];
  const faults: Fault[] = [];
  const idempotency = new Map<string, { status: number; body: unknown }>();
  const held = new Set<Response>();
  let nextId = 1;
  const newId = (): number => nextId++;

  const app = express();
  app.disable('x-powered-by');

  // Auth + tenant first, like Fineract's filter chain.
  app.use(BASE, (req: Request, res: Response, next: NextFunction) => {
    const tenant = req.header('fineract-platform-tenantid');
    if (tenant === undefined) {
      sendRaw(req, res, 400, { developerMessage: "No tenant identifier found: Add request header of 'Fineract-Platform-TenantId'", httpStatusCode: '400', defaultUserMessage: 'No tenant identifier found', userMessageGlobalisationCode: 'error.msg.tenant.missing', errors: [] });
      return;
    }
    const expected = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    if (tenant !== tenantId || req.header('authorization') !== expected) {
      sendRaw(req, res, 401, { developerMessage: 'Invalid authentication details were passed in api request.', httpStatusCode: '401', defaultUserMessage: 'Unauthenticated. Please login.', userMessageGlobalisationCode: 'error.msg.not.authenticated', errors: [] });
      return;
    }
    next();
  });
  app.use(BASE, express.json({ limit: '5mb' }));
  app.use(BASE, express.raw({ type: 'multipart/form-data', limit: '60mb' }));

  function record(req: Request, status: number, fromCache: boolean, fault: FaultKind | null): void {
    requests.push({ method: req.method, path: req.path, status, idempotencyKey: req.header('idempotency-key') ?? null, fromCache, fault });
  }

  function sendRaw(req: Request, res: Response, status: number, body: unknown): void {
    record(req, status, false, null);
    res.status(status).json(body);
  }

  function takeFault(req: Request): Fault | undefined {
    const f = faults.find(
      (x) =>
        (x.times ?? 1) > 0 &&
        (x.method === undefined || x.method.toUpperCase() === req.method) &&
        (typeof x.path === 'string' ? x.path === req.path : x.path.test(req.path)),
    );
    if (f) f.times = (f.times ?? 1) - 1;
    return f;
  }

  /** Wraps a handler: faults, idempotent replay, error bodies, recording. */
  function route(handler: (req: Request) => Promise<{ status?: number; body: unknown }> | { status?: number; body: unknown }) {
    return async (req: Request, res: Response): Promise<void> => {
      const fault = takeFault(req);
      if (fault?.kind === 'status-before') {
        const status = fault.status ?? 503;
        record(req, status, false, fault.kind);
        res.status(status).json({ developerMessage: 'Service unavailable (injected)', httpStatusCode: String(status), defaultUserMessage: 'Service unavailable', errors: [] });
        return;
      }
      const key = req.method === 'POST' ? req.header('idempotency-key') : undefined;
      const cacheKey = key === undefined ? undefined : `${req.method} ${req.originalUrl} ${key}`;
      let status: number;
      let body: unknown;
      let fromCache = false;
      const cached = cacheKey !== undefined && replay ? idempotency.get(cacheKey) : undefined;
      if (cached) {
        ({ status, body } = cached);
        fromCache = true;
      } else {
        try {
          const out = await handler(req);
          status = out.status ?? 200;
          body = out.body;
        } catch (err) {
          if (!(err instanceof HttpFail)) throw err;
          status = err.status;
          body = err.body;
        }
        if (cacheKey !== undefined && status < 500) idempotency.set(cacheKey, { status, body });
      }
      record(req, status, fromCache, fault?.kind ?? null);
      if (fault?.kind === 'hang-after-commit') {
        held.add(res);
        res.on('close', () => held.delete(res));
        return;
      }
      if (fault?.kind === 'reset-after-commit') {
        req.socket.destroy();
        return;
      }
      if (fault?.kind === 'status-after-commit') {
        const s = fault.status ?? 500;
        res.status(s).json({ developerMessage: 'Internal error (injected after commit)', httpStatusCode: String(s), defaultUserMessage: 'Internal error', errors: [] });
        return;
      }
      if (fromCache) res.setHeader('x-served-from-cache', 'true');
      res.status(status).json(body);
    };
  }

  const r = express.Router();

  r.get('/offices/:id', route((req) => {
    if (req.params['id'] !== '1') throw domainFail(404, 'error.msg.office.id.invalid', `Office with identifier ${String(req.params['id'])} does not exist`);
    return { body: { id: 1, name: 'Head Office', nameDecorated: 'Head Office', openingDate: [2009, 1, 1], hierarchy: '.' } };
  }));

  const clientJson = (c: FakeClient): Record<string, unknown> => ({
    id: c.id,
    accountNo: String(c.id).padStart(9, '0'),
    externalId: c.externalId,
    officeId: c.officeId,
    active: c.active,
    legalForm: { id: c.legalFormId, code: c.legalFormId === 2 ? 'legalFormType.entity' : 'legalFormType.person', value: c.legalFormId === 2 ? 'ENTITY' : 'PERSON' },
    ...(c.firstname !== undefined ? { firstname: c.firstname } : {}),
    ...(c.lastname !== undefined ? { lastname: c.lastname } : {}),
    ...(c.fullname !== undefined ? { fullname: c.fullname } : {}),
    displayName: c.fullname ?? `${c.firstname ?? ''} ${c.lastname ?? ''}`.trim(),
  });

  r.get('/clients/external-id/:eid', route((req) => {
    const c = clients.find((x) => x.externalId === req.params['eid']);
    if (!c) throw domainFail(404, 'error.msg.client.id.invalid', `Client with identifier ${String(req.params['eid'])} does not exist`);
    return { body: clientJson(c) };
  }));
  r.get('/clients/:id', route((req) => {
    const c = clients.find((x) => String(x.id) === req.params['id']);
    if (!c) throw domainFail(404, 'error.msg.client.id.invalid', `Client with identifier ${String(req.params['id'])} does not exist`);
    return { body: clientJson(c) };
  }));

  function checkUnsupported(resource: string, body: Record<string, unknown>, allowed: Set<string>): void {
    const bad = Object.keys(body).filter((k) => !allowed.has(k));
    if (bad.length > 0) {
      throw new HttpFail(400, {
        developerMessage: 'The request was invalid. This typically will happen due to validation errors which are provided.',
        httpStatusCode: '400',
        defaultUserMessage: 'Validation errors exist.',
        userMessageGlobalisationCode: 'validation.msg.validation.errors.exist',
        errors: bad.map((p) => ({ developerMessage: `The parameter ${p} is not supported.`, defaultUserMessage: `The parameter ${p} is not supported.`, userMessageGlobalisationCode: 'error.msg.parameter.unsupported', parameterName: p })),
      });
    }
    void resource;
  }

  function checkDates(resource: string, body: Record<string, unknown>, dateParams: string[], errors: FieldError[]): Record<string, string> {
    const present = dateParams.filter((p) => body[p] !== undefined && body[p] !== null);
    const out: Record<string, string> = {};
    if (present.length === 0) return out;
    if (typeof body['dateFormat'] !== 'string' || body['dateFormat'] === '') {
      errors.push({ parameterName: 'dateFormat', code: 'cannot.be.blank', message: 'The parameter `dateFormat` is mandatory.' });
    }
    if (typeof body['locale'] !== 'string' || body['locale'] === '') {
      errors.push({ parameterName: 'locale', code: 'cannot.be.blank', message: 'The parameter `locale` is mandatory.' });
    }
    if (typeof body['dateFormat'] !== 'string') return out;
    for (const p of present) {
      const iso = parseFineractDate(body[p], body['dateFormat']);
      if (iso === null) errors.push({ parameterName: p, code: 'invalid.date.format', message: `The parameter \`${p}\` is invalid based on the dateFormat: \`${body['dateFormat']}\` and locale: \`${String(body['locale'])}\` provided` });
      else out[p] = iso;
    }
    void resource;
    return out;
  }

  r.post('/clients', route((req) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    checkUnsupported('client', b, CLIENT_PARAMS);
    const errors: FieldError[] = [];
    if (!isInt(b['officeId'])) errors.push({ parameterName: 'officeId', code: 'cannot.be.blank', message: 'The parameter `officeId` is mandatory.' });
    const legalFormId = b['legalFormId'] ?? 1;
    if (legalFormId !== 1 && legalFormId !== 2) errors.push({ parameterName: 'legalFormId', code: 'is.not.one.of.expected.enumerations', message: 'The parameter `legalFormId` must be one of [ 1, 2 ] .' });
    const str = (k: string): boolean => typeof b[k] === 'string' && (b[k]).trim() !== '';
    if (legalFormId === 2) {
      if (!str('fullname')) errors.push({ parameterName: 'fullname', code: 'cannot.be.blank', message: 'The parameter `fullname` is mandatory.' });
      for (const k of ['firstname', 'lastname']) if (b[k] !== undefined) errors.push({ parameterName: k, code: 'cannot.also.be.provided.when.fullname.is.populated', message: `The parameter \`${k}\` cannot also be provided when fullname is populated.` });
    } else {
      if (b['fullname'] !== undefined) errors.push({ parameterName: 'fullname', code: 'cannot.also.be.provided.when.firstname.is.populated', message: 'The parameter `fullname` cannot also be provided when firstname is populated.' });
      for (const k of ['firstname', 'lastname']) if (!str(k)) errors.push({ parameterName: k, code: 'cannot.be.blank', message: `The parameter \`${k}\` is mandatory.` });
    }
    if (typeof b['active'] !== 'boolean') errors.push({ parameterName: 'active', code: 'cannot.be.blank', message: 'The parameter `active` is mandatory.' });
    if (b['active'] === true && b['activationDate'] === undefined) errors.push({ parameterName: 'activationDate', code: 'cannot.be.blank', message: 'The parameter `activationDate` is mandatory.' });
    if (b['externalId'] !== undefined && (typeof b['externalId'] !== 'string' || b['externalId'].length > 100)) errors.push({ parameterName: 'externalId', code: 'exceeds.max.length', message: 'The parameter `externalId` exceeds max length of 100.' });
    checkDates('client', b, CLIENT_DATES, errors);
    if (errors.length > 0) throw validationFail('client', errors);
    if (b['officeId'] !== 1) throw domainFail(404, 'error.msg.office.id.invalid', `Office with identifier ${String(b['officeId'])} does not exist`);
    const externalId = typeof b['externalId'] === 'string' ? b['externalId'] : null;
    if (externalId !== null && clients.some((c) => c.externalId === externalId)) {
      throw domainFail(403, 'error.msg.client.duplicate.externalId', `Client with externalId \`${externalId}\` already exists`);
    }
    const c: FakeClient = {
      id: newId(),
      externalId,
      officeId: 1,
      legalFormId: legalFormId as number,
      active: b['active'] === true,
      body: b,
      ...(legalFormId === 2 ? { fullname: b['fullname'] as string } : { firstname: b['firstname'] as string, lastname: b['lastname'] as string }),
    };
    clients.push(c);
    return { body: { officeId: 1, clientId: c.id, resourceId: c.id } };
  }));

  const loanJson = (l: FakeLoan): Record<string, unknown> => {
    const b = l.body;
    const iso = (k: string): string | undefined => parseFineractDate(b[k], String(b['dateFormat'])) ?? undefined;
    const disb = iso('expectedDisbursementDate') ?? '2000-01-01';
    const statuses: Record<number, [string, string]> = {
      100: ['loanStatusType.submitted.and.pending.approval', 'Submitted and pending approval'],
      200: ['loanStatusType.approved', 'Approved'],
      300: ['loanStatusType.active', 'Active'],
    };
    const [code, value] = statuses[l.statusId] ?? ['loanStatusType.invalid', 'Invalid'];
    const freqType = Number(b['repaymentFrequencyType']);
    return {
      id: l.id,
      accountNo: String(l.id).padStart(9, '0'),
      externalId: l.externalId,
      clientId: l.clientId,
      loanProductId: b['productId'],
      status: { id: l.statusId, code, value, pendingApproval: l.statusId === 100, waitingForDisbursal: l.statusId === 200, active: l.statusId === 300 },
      principal: num(b['principal'], b['locale']),
      approvedPrincipal: num(b['principal'], b['locale']),
      proposedPrincipal: num(b['principal'], b['locale']),
      termFrequency: b['loanTermFrequency'],
      termPeriodFrequencyType: { id: b['loanTermFrequencyType'], code: `termFrequency.periodFrequencyType.${FREQ[Number(b['loanTermFrequencyType'])] ?? ''}`, value: FREQ[Number(b['loanTermFrequencyType'])] },
      numberOfRepayments: b['numberOfRepayments'],
      repaymentEvery: b['repaymentEvery'],
      repaymentFrequencyType: { id: freqType, code: `repaymentFrequency.periodFrequencyType.${FREQ[freqType] ?? ''}`, value: FREQ[freqType] },
      interestRatePerPeriod: num(b['interestRatePerPeriod'], b['locale']),
      annualInterestRate: num(b['interestRatePerPeriod'], b['locale']),
      ...(iso('repaymentsStartingFromDate') ? { repaymentsStartingFromDate: dateArray(iso('repaymentsStartingFromDate')) } : {}),
      timeline: {
        submittedOnDate: dateArray(iso('submittedOnDate')),
        expectedDisbursementDate: dateArray(disb),
        expectedMaturityDate: dateArray(addPeriod(disb, Number(b['loanTermFrequency']), Number(b['loanTermFrequencyType']))),
        ...(l.approvedOnDate ? { approvedOnDate: dateArray(l.approvedOnDate) } : {}),
        ...(l.actualDisbursementDate ? { actualDisbursementDate: dateArray(l.actualDisbursementDate) } : {}),
      },
    };
  };

  const loanById = (id: unknown): FakeLoan => {
    const l = loans.find((x) => String(x.id) === String(id));
    if (!l) throw domainFail(404, 'error.msg.loan.id.invalid', `Loan with identifier ${String(id)} does not exist`);
    return l;
  };

  r.get('/loans', route((req) => {
    const offset = Number(req.query['offset'] ?? 0);
    const limit = Number(req.query['limit'] ?? 200);
    return { body: { totalFilteredRecords: loans.length, pageItems: loans.slice(offset, offset + limit).map(loanJson) } };
  }));
  r.get('/loans/external-id/:eid', route((req) => {
    const l = loans.find((x) => x.externalId === req.params['eid']);
    if (!l) throw domainFail(404, 'error.msg.loan.external.id.invalid', `Loan with external identifier ${String(req.params['eid'])} does not exist`);
    return { body: loanJson(l) };
  }));
  r.get('/loans/:id', route((req) => ({ body: loanJson(loanById(req.params['id'])) })));

  r.post('/loans', route((req) => {
    const b = (req.body ?? {}) as Record<string, unknown>;
    checkUnsupported('loan', b, LOAN_PARAMS);
    const errors: FieldError[] = [];
    for (const k of LOAN_REQUIRED) {
      if (b[k] === undefined || b[k] === null || b[k] === '') errors.push({ parameterName: k, code: 'cannot.be.blank', message: `The parameter \`${k}\` is mandatory.` });
    }
    const dates = checkDates('loan', b, LOAN_DATES, errors);
    if (b['loanType'] !== undefined && b['loanType'] !== 'individual') errors.push({ parameterName: 'loanType', code: 'invalid', message: 'The parameter `loanType` must be individual.' });
    const principal = num(b['principal'], b['locale']);
    if (b['principal'] !== undefined && (principal === null || principal <= 0)) errors.push({ parameterName: 'principal', code: 'not.greater.than.zero', message: 'The parameter `principal` must be greater than 0.' });
    for (const k of ['loanTermFrequency', 'numberOfRepayments', 'repaymentEvery']) {
      if (b[k] !== undefined && !(isInt(b[k]) && b[k] > 0)) errors.push({ parameterName: k, code: 'not.greater.than.zero', message: `The parameter \`${k}\` must be a whole number greater than 0.` });
    }
    for (const k of ['loanTermFrequencyType', 'repaymentFrequencyType']) {
      if (b[k] !== undefined && !(isInt(b[k]) && b[k] >= 0 && b[k] <= 3)) errors.push({ parameterName: k, code: 'is.not.within.expected.range', message: `The parameter \`${k}\` must be between 0 and 3.` });
    }
    if (errors.length > 0) throw validationFail('loan', errors);
    if (b['loanTermFrequencyType'] !== b['repaymentFrequencyType']) {
      throw validationFail('loan', [{ parameterName: 'loanTermFrequencyType', code: 'not.equal.to.repayment.frequency.type', message: 'Loan term frequency type must be the same as the repayment frequency type.' }]);
    }
    const expectedTerm = (b['repaymentEvery'] as number) * (b['numberOfRepayments'] as number);
    if (b['loanTermFrequency'] !== expectedTerm) {
      throw validationFail('loan', [{ parameterName: 'loanTermFrequency', code: 'must.equal.repaymentEvery.times.numberOfRepayments', message: `Loan term frequency (${String(b['loanTermFrequency'])}) must be equal to repaymentEvery × numberOfRepayments (${expectedTerm}).` }]);
    }
    if (dates['submittedOnDate'] && dates['expectedDisbursementDate'] && dates['submittedOnDate'] > dates['expectedDisbursementDate']) {
      throw validationFail('loan', [{ parameterName: 'expectedDisbursementDate', code: 'cannot.be.before.submittal.date', message: 'The date on which a loan is disbursed cannot be before its submittal date.' }]);
    }
    const client = clients.find((c) => c.id === b['clientId']);
    if (!client) throw domainFail(404, 'error.msg.client.id.invalid', `Client with identifier ${String(b['clientId'])} does not exist`);
    if (!client.active) throw domainFail(403, 'error.msg.loan.client.not.active', 'Client is not active.');
    const productOk = opts.products === undefined ? isInt(b['productId']) && b['productId'] > 0 : opts.products.includes(b['productId'] as number);
    if (!productOk) throw domainFail(404, 'error.msg.loanproduct.id.invalid', `Loan product with identifier ${String(b['productId'])} does not exist`);
    const externalId = typeof b['externalId'] === 'string' ? b['externalId'] : null;
    if (externalId !== null && loans.some((l) => l.externalId === externalId)) {
      throw domainFail(403, 'error.msg.loan.duplicate.externalId', `Loan with externalId \`${externalId}\` already exists`);
    }
    const l: FakeLoan = { id: newId(), externalId, clientId: client.id, statusId: 100, body: b };
    loans.push(l);
    return { body: { officeId: 1, clientId: client.id, loanId: l.id, resourceId: l.id } };
  }));

  r.post('/loans/:id', route((req) => {
    const l = loanById(req.params['id']);
    const b = (req.body ?? {}) as Record<string, unknown>;
    const command = req.query['command'];
    const errors: FieldError[] = [];
    if (command === 'approve') {
      if (b['approvedOnDate'] === undefined) errors.push({ parameterName: 'approvedOnDate', code: 'cannot.be.blank', message: 'The parameter `approvedOnDate` is mandatory.' });
      const d = checkDates('loanapplication', b, ['approvedOnDate'], errors);
      if (errors.length > 0) throw validationFail('loanapplication', errors);
      if (l.statusId !== 100) throw domainFail(403, 'error.msg.loan.approve.account.is.not.submitted.and.pending.state', 'Loan Account Approval is not allowed. Loan Account is not in submitted and pending approval state.');
      l.statusId = 200;
      if (d['approvedOnDate']) l.approvedOnDate = d['approvedOnDate'];
      return { body: { loanId: l.id, resourceId: l.id, changes: { status: { id: 200 } } } };
    }
    if (command === 'disburse') {
      if (b['actualDisbursementDate'] === undefined) errors.push({ parameterName: 'actualDisbursementDate', code: 'cannot.be.blank', message: 'The parameter `actualDisbursementDate` is mandatory.' });
      const d = checkDates('loan.disbursement', b, ['actualDisbursementDate'], errors);
      if (errors.length > 0) throw validationFail('loan.disbursement', errors);
      if (l.statusId !== 200) throw domainFail(403, 'error.msg.loan.disbursal.account.is.not.approve.not.disbursed.state', 'Loan Disbursal is not allowed. Loan Account is not in approved and not disbursed state.');
      l.statusId = 300;
      if (d['actualDisbursementDate']) l.actualDisbursementDate = d['actualDisbursementDate'];
      return { body: { loanId: l.id, resourceId: l.id, changes: { status: { id: 300 } } } };
    }
    throw domainFail(400, 'error.msg.command.unsupported', `Unrecognized command ${JSON.stringify(command)}`);
  }));

  r.get('/loans/:id/guarantors', route((req) => {
    const l = loanById(req.params['id']);
    return {
      body: guarantors
        .filter((g) => g.loanId === l.id)
        .map((g) => ({ id: g.id, loanId: g.loanId, guarantorType: { id: g.guarantorTypeId, code: g.guarantorTypeId === 1 ? 'guarantor.existing.customer' : 'guarantor.external', value: g.guarantorTypeId === 1 ? 'CUSTOMER' : 'EXTERNAL' }, entityId: g.entityId, firstname: g.firstname, lastname: g.lastname, status: true })),
    };
  }));
  r.post('/loans/:id/guarantors', route((req) => {
    const l = loanById(req.params['id']);
    const b = (req.body ?? {}) as Record<string, unknown>;
    const typeId = b['guarantorTypeId'];
    const errors: FieldError[] = [];
    if (typeId !== 1 && typeId !== 2 && typeId !== 3) errors.push({ parameterName: 'guarantorTypeId', code: 'is.not.one.of.expected.enumerations', message: 'The parameter `guarantorTypeId` must be one of [ 1, 2, 3 ] .' });
    if ((typeId === 1 || typeId === 2) && !isInt(b['entityId'])) errors.push({ parameterName: 'entityId', code: 'cannot.be.blank', message: 'The parameter `entityId` is mandatory.' });
    if (typeId === 3) for (const k of ['firstname', 'lastname']) if (typeof b[k] !== 'string' || b[k] === '') errors.push({ parameterName: k, code: 'cannot.be.blank', message: `The parameter \`${k}\` is mandatory.` });
    if (errors.length > 0) throw validationFail('guarantor', errors);
    let entityId: number | null = null;
    if (typeId === 1) {
      const c = clients.find((x) => x.id === b['entityId']);
      if (!c) throw domainFail(404, 'error.msg.client.id.invalid', `Client with identifier ${String(b['entityId'])} does not exist`);
      if (c.id === l.clientId) throw domainFail(403, 'error.msg.loan.guarantor.self.guarantee.error', 'Loan applicant cannot be a guarantor of their own loan.');
      entityId = c.id;
      if (guarantors.some((g) => g.loanId === l.id && g.entityId === entityId)) {
        throw domainFail(403, 'error.msg.loan.guarantor.duplicate', `Client ${entityId} is already a guarantor of loan ${l.id}`);
      }
    }
    const g: FakeGuarantor = {
      id: newId(),
      loanId: l.id,
      guarantorTypeId: typeId as number,
      entityId,
      ...(typeof b['firstname'] === 'string' ? { firstname: b['firstname'] } : {}),
      ...(typeof b['lastname'] === 'string' ? { lastname: b['lastname'] } : {}),
    };
    guarantors.push(g);
    return { body: { loanId: l.id, resourceId: g.id } };
  }));

  r.get('/loans/:id/documents', route((req) => {
    const l = loanById(req.params['id']);
    return {
      body: documents
        .filter((d) => d.loanId === l.id)
        .map((d) => ({ id: d.id, parentEntityType: 'loans', parentEntityId: d.loanId, name: d.name, fileName: d.fileName, size: d.size, type: d.type, description: d.description })),
    };
  }));
  r.post('/loans/:id/documents', route(async (req) => {
    const l = loanById(req.params['id']);
    if (!Buffer.isBuffer(req.body)) throw validationFail('document', [{ parameterName: 'file', code: 'cannot.be.blank', message: 'A multipart/form-data body with a file is required.' }]);
    const form = await new WebResponse(req.body, { headers: { 'content-type': req.header('content-type') ?? '' } }).formData();
    const name = form.get('name');
    const file = form.get('file');
    const errors: FieldError[] = [];
    if (typeof name !== 'string' || name.trim() === '') errors.push({ parameterName: 'name', code: 'cannot.be.blank', message: 'The parameter `name` is mandatory.' });
    if (typeof name === 'string' && name.length > 250) errors.push({ parameterName: 'name', code: 'exceeds.max.length', message: 'The parameter `name` exceeds max length of 250.' });
    const description = form.get('description');
    if (typeof description === 'string' && description.length > 1000) errors.push({ parameterName: 'description', code: 'exceeds.max.length', message: 'The parameter `description` exceeds max length of 1000.' });
    if (file === null || typeof file === 'string') errors.push({ parameterName: 'file', code: 'cannot.be.blank', message: 'The parameter `file` is mandatory.' });
    if (errors.length > 0 || file === null || typeof file === 'string') throw validationFail('document', errors);
    const bytes = Buffer.from(await file.arrayBuffer());
    const d: FakeDocument = {
      id: newId(),
      loanId: l.id,
      name: name as string,
      description: typeof description === 'string' ? description : '',
      fileName: file.name,
      type: file.type,
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    };
    documents.push(d);
    return { body: { resourceId: d.id, resourceIdentifier: String(d.id) } };
  }));

  app.use(BASE, r);
  app.use((req: Request, res: Response) => sendRaw(req, res, 404, { developerMessage: `No route ${req.method} ${req.path}`, httpStatusCode: '404', defaultUserMessage: 'Not found', errors: [] }));
  // JSON parse errors and the like: Fineract answers 400.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    sendRaw(req, res, 400, { developerMessage: String((err as Error).message), httpStatusCode: '400', defaultUserMessage: 'Invalid request body', errors: [] });
  });

  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}${BASE}`,
    username,
    password,
    tenantId,
    clients,
    loans,
    guarantors,
    documents,
    requests,
    faults,
    inject(f) {
      faults.push({ times: 1, ...f });
    },
    writes(path) {
      return requests.filter(
        (q) => q.method === 'POST' && (path === undefined || (typeof path === 'string' ? q.path === path : path.test(q.path))),
      );
    },
    async close() {
      for (const res of held) res.socket?.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
