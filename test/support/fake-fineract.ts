import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type Request, type Response, type NextFunction } from 'express';
import { Response as WebResponse } from 'undici';

/**
 * A fake Apache Fineract core: real HTTP on port 0 under /fineract-provider/api/v1, at least as
 * strict as the real server on every rule we know of (../shared/domain-notes.md, read from
 * Fineract's validators 1.9–develop):
 * - basic auth (401), the tenant header (missing: 400 JSON; unknown tenant: 400 with a plain-text
 *   body), permissions (403 `error.msg.not.authorized`, "User has no authority to: CREATE_CLIENT");
 * - the command pipeline's idempotency: the key is stored in a VARCHAR(50) column before the
 *   command runs (a longer key: 403 data integrity), scoped by action + entity + key (not URL),
 *   every result stored and replayed — failures, 5xx included — with `x-served-from-cache: true`,
 *   and 425 while the same key is in flight. Document uploads bypass the pipeline: no idempotency;
 * - unique external ids (loans: 403 `error.msg.loan.with.externalId.already.used`, clients:
 *   `error.msg.client.duplicate.externalId`, under the generic `validation.msg.domain.rule.violation`);
 * - `dateFormat` + `locale` with every date, `loanTermFrequency` = `repaymentEvery ×
 *   numberOfRepayments`, `loanTermFrequencyType` = `repaymentFrequencyType`,
 *   `graceOnPrincipalPayment` < `numberOfRepayments`, principal within DECIMAL(19,6),
 *   `legalFormId` required, name lengths, unsupported parameters refused on every command;
 * - documents: pdf, doc, docx, xls, xlsx, jpg, jpeg, png only, content type matching the
 *   extension, at most 5 MiB (403 `error.msg.document.save`);
 * - commands in the wrong loan state: 400; product settings (floating rate, principal limits);
 *   approve/disburse dates after the business date;
 * - client identifiers (`POST /clients/{id}/identifiers`): one (document type, key) across all
 *   clients (403 `error.msg.clientIdentifier.identityKey.duplicate`), one of a type per client;
 * - the search API (`GET /search?query=&resource=clientIdentifiers&exactMatch=true`);
 * - request paths Tomcat or Spring's StrictHttpFirewall refuse (400 before Fineract): an encoded
 *   slash, backslash or percent, `;`, `//`, dot segments, raw non-ASCII (refusedRequestPath);
 * - externalId at most 100 characters (clients and loans: `exceeds.max.length`); a loan's
 *   `accountNo` at most 20 characters, unique (403 `error.msg.loan.duplicate.accountNo`, the
 *   `loan_account_no_UNIQUE` constraint), else Fineract's own: the loan id zero-padded to 9;
 * and fault injection (5xx before the write, the write committed and then the response
 * held/failed/reset, or a slow command that holds its key in flight).
 *
 * Everything is recorded so a test can assert "exactly one client per external id".
 */

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

export interface FakeFineractOptions {
  username?: string;
  password?: string;
  tenantId?: string;
  /** Replay the stored response for a repeated Idempotency-Key (Fineract's idempotency feature). */
  idempotencyReplay?: boolean;
  /** Loan product ids that exist (default: any positive integer). */
  products?: number[];
  /** Settings of particular products (GET /loanproducts/{id}); others are plain fixed-rate products. */
  productSettings?: Record<number, FakeProductSettings>;
  /** Permissions the user lacks, e.g. ['CREATE_CLIENT'] (403 error.msg.not.authorized). */
  deniedPermissions?: string[];
  /** The core's business date (yyyy-mm-dd): approve/disburse dates after it are refused. */
  businessDate?: string;
  /** Document upload cap (Fineract's default 5 MiB). */
  documentMaxBytes?: number;
  /** Code value ids of the "Customer Identifier" code (default 1, 2, 3). */
  identifierTypes?: number[];
}

export interface FakeProductSettings {
  name?: string;
  isFloatingInterestRate?: boolean;
  holdGuaranteeFunds?: boolean;
  minPrincipal?: number;
  maxPrincipal?: number;
}

export type FaultKind =
  /** Answer `status` (default 503) without executing anything. */
  | 'status-before'
  /** Execute (commit), then answer `status` (default 500) instead of the real response. */
  | 'status-after-commit'
  /** Execute (commit), then never answer (the client times out). */
  | 'hang-after-commit'
  /** Execute (commit), then drop the connection. */
  | 'reset-after-commit'
  /** Hold the command `delayMs` before executing it (its idempotency key stays in flight). */
  | 'delay'
  /** The command fails inside Fineract with `status` (default 500): nothing committed, the failure stored under its key. */
  | 'fail-in-command';

export interface Fault {
  method?: string;
  /** Matched against the path below the API base, e.g. `/loans` or /^\/loans\/\d+\/documents$/ */
  path: string | RegExp;
  kind: FaultKind;
  status?: number;
  /** How many matching requests it applies to (default 1). */
  times?: number;
  /** For `delay`. */
  delayMs?: number;
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
  /** The account number: the accountNo sent with the create, else the id zero-padded to 9 digits. */
  accountNo: string;
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

export interface FakeIdentifier {
  id: number;
  clientId: number;
  documentTypeId: number;
  documentKey: string;
  description?: string;
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
  readonly identifiers: FakeIdentifier[];
  readonly requests: RecordedRequest[];
  readonly faults: Fault[];
  inject(fault: Fault): void;
  /** A client the bank already has (created outside the connector), with its identifiers. */
  seedClient(c: {
    fullname?: string;
    firstname?: string;
    lastname?: string;
    externalId?: string;
    identifiers?: Array<{ documentTypeId: number; documentKey: string }>;
  }): FakeClient;
  /** Writes that reached the handlers (POSTs), by path pattern. */
  writes(path?: string | RegExp): RecordedRequest[];
  /** Idempotency keys of requests being handled right now (a delay fault holds one). */
  keysInFlight(): number;
  close(): Promise<void>;
}

const BASE = '/fineract-provider/api/v1';

const CLIENT_PARAMS = new Set([
  'address',
  'officeId',
  'firstname',
  'middlename',
  'lastname',
  'fullname',
  'legalFormId',
  'externalId',
  'mobileNo',
  'emailAddress',
  'active',
  'activationDate',
  'dateFormat',
  'locale',
  'submittedOnDate',
  'dateOfBirth',
  'genderId',
  'clientTypeId',
  'clientClassificationId',
  'staffId',
  'savingsProductId',
  'isStaff',
  'clientNonPersonDetails',
  'datatables',
  'familyMembers',
  'groupId',
  'accountNo',
  'isAddressEnabled',
]);
const CLIENT_DATES = ['activationDate', 'submittedOnDate', 'dateOfBirth'];

const LOAN_PARAMS = new Set([
  'clientId',
  'productId',
  'principal',
  'loanTermFrequency',
  'loanTermFrequencyType',
  'loanType',
  'numberOfRepayments',
  'repaymentEvery',
  'repaymentFrequencyType',
  'interestRatePerPeriod',
  'amortizationType',
  'interestType',
  'interestCalculationPeriodType',
  'transactionProcessingStrategyCode',
  'expectedDisbursementDate',
  'submittedOnDate',
  'externalId',
  'dateFormat',
  'locale',
  'repaymentsStartingFromDate',
  'interestChargedFromDate',
  'graceOnPrincipalPayment',
  'graceOnInterestPayment',
  'graceOnInterestCharged',
  'graceOnArrearsAgeing',
  'daysInYearType',
  'allowPartialPeriodInterestCalcualtion',
  'isEqualAmortization',
  'fundId',
  'loanOfficerId',
  'loanPurposeId',
  'charges',
  'collateral',
  'disbursementData',
  'linkAccountId',
  'maxOutstandingLoanBalance',
  'inArrearsTolerance',
  'fixedEmiAmount',
  'isTopup',
  'datatables',
  'submittedOnNote',
  'createStandingInstructionAtDisbursement',
  'repaymentFrequencyNthDayType',
  'repaymentFrequencyDayOfWeekType',
  'isFloatingInterestRate',
  'interestRateDifferential',
  'accountNo',
  'enableInstallmentLevelDelinquency',
]);
const LOAN_REQUIRED = [
  'clientId',
  'productId',
  'principal',
  'loanTermFrequency',
  'loanTermFrequencyType',
  'loanType',
  'numberOfRepayments',
  'repaymentEvery',
  'repaymentFrequencyType',
  'interestRatePerPeriod',
  'amortizationType',
  'interestType',
  'interestCalculationPeriodType',
  'transactionProcessingStrategyCode',
  'expectedDisbursementDate',
  'submittedOnDate',
];
const LOAN_DATES = [
  'expectedDisbursementDate',
  'submittedOnDate',
  'repaymentsStartingFromDate',
  'interestChargedFromDate',
];
const APPROVE_PARAMS = new Set([
  'approvedOnDate',
  'approvedLoanAmount',
  'expectedDisbursementDate',
  'note',
  'dateFormat',
  'locale',
  'disbursementData',
]);
const DISBURSE_PARAMS = new Set([
  'actualDisbursementDate',
  'transactionAmount',
  'fixedEmiAmount',
  'note',
  'dateFormat',
  'locale',
  'paymentTypeId',
  'accountNumber',
  'checkNumber',
  'routingCode',
  'receiptNumber',
  'bankNumber',
  'externalId',
  'adjustRepaymentDate',
]);
const GUARANTOR_PARAMS = new Set([
  'guarantorTypeId',
  'entityId',
  'firstname',
  'lastname',
  'clientRelationshipTypeId',
  'addressLine1',
  'addressLine2',
  'city',
  'state',
  'country',
  'zip',
  'housePhoneNumber',
  'mobileNumber',
  'comment',
  'dob',
  'dateFormat',
  'locale',
  'savingsId',
  'amount',
]);
const IDENTIFIER_PARAMS = new Set(['documentTypeId', 'documentKey', 'description', 'status']);
/** Fineract's document whitelist (FileSystemContentPathSanitizer): extension → accepted content types. */
const DOCUMENT_TYPES: Record<string, string[]> = {
  pdf: ['application/pdf'],
  doc: ['application/msword'],
  docx: ['application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
  xls: ['application/vnd.ms-excel'],
  xlsx: ['application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
  jpg: ['image/jpeg'],
  jpeg: ['image/jpeg'],
  png: ['image/png'],
};
/** DECIMAL(19,6): 13 digits before the point. */
const MAX_PRINCIPAL_EXCLUSIVE = 1e13;
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
    developerMessage:
      'The request was invalid. This typically will happen due to validation errors which are provided.',
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

/**
 * Real 403/404 bodies carry a generic code at the top and the specific one in errors[0]
 * (GeneralPlatformDomainRuleException → validation.msg.domain.rule.violation; not found →
 * error.msg.resource.not.found); a 400 domain error keeps its own code on top.
 */
function domainFail(status: number, code: string, message: string): HttpFail {
  const top =
    status === 403
      ? 'validation.msg.domain.rule.violation'
      : status === 404
        ? 'error.msg.resource.not.found'
        : code;
  return new HttpFail(status, {
    developerMessage: status === 403 ? 'Request was understood but caused a domain rule violation.' : message,
    httpStatusCode: String(status),
    defaultUserMessage: status === 403 ? 'Errors contain reason for domain rule violation.' : message,
    userMessageGlobalisationCode: top,
    errors: [
      {
        developerMessage: message,
        defaultUserMessage: message,
        userMessageGlobalisationCode: code,
        parameterName: 'id',
      },
    ],
  });
}

const MONTHS = [
  'january',
  'february',
  'march',
  'april',
  'may',
  'june',
  'july',
  'august',
  'september',
  'october',
  'november',
  'december',
];

/** Parses a date with a Java-style pattern (yyyy, MM, MMMM, dd); returns yyyy-mm-dd or null. */
export function parseFineractDate(value: unknown, format: string): string | null {
  if (typeof value !== 'string') return null;
  const order: string[] = [];
  const re = format.replace(/yyyy|MMMM|MM|dd|[.*+?^${}()|[\]\\]/g, (tok) => {
    if (tok === 'yyyy') return (order.push('y'), '(\\d{4})');
    if (tok === 'MMMM') return (order.push('N'), '([A-Za-z]+)');
    if (tok === 'MM') return (order.push('M'), '(\\d{1,2})');
    if (tok === 'dd') return (order.push('d'), '(\\d{1,2})');
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
  if (mo < 1 || dt.getUTCFullYear() !== y || dt.getUTCMonth() !== mo - 1 || dt.getUTCDate() !== d)
    return null;
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
  const inFlight = new Set<string>();
  const denied = new Set(opts.deniedPermissions ?? []);
  const identifiers: FakeIdentifier[] = [];
  const identifierTypes = opts.identifierTypes ?? [1, 2, 3];
  const documentMaxBytes = opts.documentMaxBytes ?? 5 * 1024 * 1024;
  const held = new Set<Response>();
  let nextId = 1;
  const newId = (): number => nextId++;

  const app = express();
  app.disable('x-powered-by');

  // Tomcat and Spring Security's StrictHttpFirewall refuse a request path before Fineract sees it.
  app.use((req: Request, res: Response, next: NextFunction) => {
    const why = refusedRequestPath(req.originalUrl);
    if (why === null) {
      next();
      return;
    }
    record(req, 400, false, null);
    res
      .status(400)
      .type('text/html')
      .send(
        `<!doctype html><html lang="en"><head><title>HTTP Status 400 – Bad Request</title></head><body><h1>HTTP Status 400 – Bad Request</h1><p>${why}</p></body></html>`,
      );
  });

  // Auth + tenant first, like Fineract's filter chain.
  app.use(BASE, (req: Request, res: Response, next: NextFunction) => {
    const tenant = req.header('fineract-platform-tenantid');
    if (tenant === undefined) {
      sendRaw(req, res, 400, {
        developerMessage: "No tenant identifier found: Add request header of 'Fineract-Platform-TenantId'",
        httpStatusCode: '400',
        defaultUserMessage: 'No tenant identifier found',
        userMessageGlobalisationCode: 'error.msg.tenant.missing',
        errors: [],
      });
      return;
    }
    if (tenant !== tenantId) {
      // InvalidTenantIdentifierException surfaces from the servlet filter, not as API JSON.
      record(req, 400, false, null);
      res.status(400).type('text/plain').send(`The tenant identifier: ${tenant} is not valid.`);
      return;
    }
    const expected = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    if (req.header('authorization') !== expected) {
      sendRaw(req, res, 401, {
        developerMessage: 'Invalid authentication details were passed in api request.',
        httpStatusCode: '401',
        defaultUserMessage: 'Unauthenticated. Please login.',
        userMessageGlobalisationCode: 'error.msg.not.authenticated',
        errors: [],
      });
      return;
    }
    next();
  });
  app.use(BASE, express.json({ limit: '5mb' }));
  app.use(BASE, express.raw({ type: 'multipart/form-data', limit: '60mb' }));

  function record(req: Request, status: number, fromCache: boolean, fault: FaultKind | null): void {
    requests.push({
      method: req.method,
      path: req.path,
      status,
      idempotencyKey: req.header('idempotency-key') ?? null,
      fromCache,
      fault,
    });
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

  /**
   * Wraps a handler: faults, permissions, the command pipeline's idempotency (when `command` names
   * the action, e.g. CREATE_CLIENT), error bodies, recording. Routes without a command (reads,
   * document uploads) ignore an Idempotency-Key, as Fineract does.
   */
  function route(
    handler: (
      req: Request,
    ) => Promise<{ status?: number; body: unknown }> | { status?: number; body: unknown },
    command?: string | ((req: Request) => string),
  ) {
    return async (req: Request, res: Response): Promise<void> => {
      const fault = takeFault(req);
      if (fault?.kind === 'status-before') {
        const status = fault.status ?? 503;
        record(req, status, false, fault.kind);
        res.status(status).json({
          developerMessage: 'Service unavailable (injected)',
          httpStatusCode: String(status),
          defaultUserMessage: 'Service unavailable',
          errors: [],
        });
        return;
      }
      const action = typeof command === 'function' ? command(req) : command;
      if (action !== undefined && denied.has(action)) {
        sendRaw(req, res, 403, {
          developerMessage:
            'The user associated with credentials passed on this request does not have sufficient privileges to perform this action.',
          httpStatusCode: '403',
          defaultUserMessage: 'Insufficient privileges to perform this action.',
          userMessageGlobalisationCode: 'error.msg.not.authorized',
          errors: [
            {
              developerMessage: `User has no authority to: ${action}`,
              defaultUserMessage: `User has no authority to: ${action}`,
              userMessageGlobalisationCode: 'error.msg.not.authorized',
              parameterName: 'id',
            },
          ],
        });
        return;
      }
      const key = action !== undefined && req.method === 'POST' ? req.header('idempotency-key') : undefined;
      if (key !== undefined && key.length > 50) {
        // CommandSource.idempotency_key is VARCHAR(50): the insert fails before the command runs.
        sendRaw(req, res, 403, {
          developerMessage: 'The request caused a data integrity issue to be fired by the database.',
          httpStatusCode: '403',
          defaultUserMessage: `Unknown data integrity issue with resource: Data truncation: Data too long for column 'idempotency_key'`,
          userMessageGlobalisationCode: 'error.msg.unknown.data.integrity.issue',
          errors: [],
        });
        return;
      }
      // Scoped by action + entity + key (CommandSourceService), not by URL.
      const cacheKey = key === undefined || !replay ? undefined : `${action} ${key}`;
      if (cacheKey !== undefined && inFlight.has(cacheKey)) {
        record(req, 425, false, null);
        res.status(425).setHeader('x-served-from-cache', 'true');
        res.json({
          developerMessage: `Idempotent command with key ${key} is under processing`,
          httpStatusCode: '425',
          defaultUserMessage: 'The command is under processing',
          errors: [],
        });
        return;
      }
      let status: number;
      let body: unknown;
      let fromCache = false;
      const cached = cacheKey !== undefined ? idempotency.get(cacheKey) : undefined;
      if (cached) {
        ({ status, body } = cached);
        fromCache = true;
      } else {
        if (cacheKey !== undefined) inFlight.add(cacheKey);
        try {
          if (fault?.kind === 'delay') await new Promise((r) => setTimeout(r, fault.delayMs ?? 200));
          if (fault?.kind === 'fail-in-command')
            throw new HttpFail(fault.status ?? 500, {
              developerMessage: 'Command failed (injected)',
              httpStatusCode: String(fault.status ?? 500),
              defaultUserMessage: 'Internal error',
              errors: [],
            });
          const out = await handler(req);
          status = out.status ?? 200;
          body = out.body;
        } catch (err) {
          if (err instanceof HttpFail) {
            status = err.status;
            body = err.body;
          } else {
            status = 500;
            body = {
              developerMessage: String((err as Error).message),
              httpStatusCode: '500',
              defaultUserMessage: 'Internal error',
              errors: [],
            };
          }
        } finally {
          if (cacheKey !== undefined) inFlight.delete(cacheKey);
        }
        // Every result of the command is stored, failures included, and replayed for the key.
        if (cacheKey !== undefined) idempotency.set(cacheKey, { status, body });
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
        res.status(s).json({
          developerMessage: 'Internal error (injected after commit)',
          httpStatusCode: String(s),
          defaultUserMessage: 'Internal error',
          errors: [],
        });
        return;
      }
      if (fromCache) res.setHeader('x-served-from-cache', 'true');
      res.status(status).json(body);
    };
  }

  const r = express.Router();

  r.get(
    '/offices/:id',
    route((req) => {
      if (req.params['id'] !== '1')
        throw domainFail(
          404,
          'error.msg.office.id.invalid',
          `Office with identifier ${String(req.params['id'])} does not exist`,
        );
      return {
        body: {
          id: 1,
          name: 'Head Office',
          nameDecorated: 'Head Office',
          openingDate: [2009, 1, 1],
          hierarchy: '.',
        },
      };
    }),
  );

  const clientJson = (c: FakeClient): Record<string, unknown> => ({
    id: c.id,
    accountNo: String(c.id).padStart(9, '0'),
    externalId: c.externalId,
    officeId: c.officeId,
    active: c.active,
    legalForm: {
      id: c.legalFormId,
      code: c.legalFormId === 2 ? 'legalFormType.entity' : 'legalFormType.person',
      value: c.legalFormId === 2 ? 'ENTITY' : 'PERSON',
    },
    ...(c.firstname !== undefined ? { firstname: c.firstname } : {}),
    ...(c.lastname !== undefined ? { lastname: c.lastname } : {}),
    ...(c.fullname !== undefined ? { fullname: c.fullname } : {}),
    displayName: c.fullname ?? `${c.firstname ?? ''} ${c.lastname ?? ''}`.trim(),
  });

  /**
   * A listing (`GET /clients`, `GET /loans`): offset and limit, and `?externalId=`, Fineract's
   * search on external_id (any characters: it is a query, not a path). Fineract's SQL compares it
   * with LIKE (`c.external_id like ?`), so `%` and `_` in the value are wildcards: an id holding
   * them matches other records too, as it would on a real Fineract.
   */
  const likePattern = (v: string): RegExp =>
    new RegExp(
      `^${[...v].map((ch) => (ch === '%' ? '.*' : ch === '_' ? '.' : ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('')}$`,
      'si',
    );
  const listing = <T extends { externalId: string | null }>(
    all: T[],
    toJson: (x: T) => Record<string, unknown>,
  ) =>
    route((req) => {
      const offset = Number(req.query['offset'] ?? 0);
      const limit = Number(req.query['limit'] ?? 200);
      const eid = req.query['externalId'];
      const like = typeof eid === 'string' ? likePattern(eid) : null;
      const found = like !== null ? all.filter((x) => x.externalId !== null && like.test(x.externalId)) : all;
      return {
        body: {
          totalFilteredRecords: found.length,
          pageItems: found.slice(offset, offset + limit).map(toJson),
        },
      };
    });

  r.get('/clients', listing(clients, clientJson));
  r.get(
    '/clients/external-id/:eid',
    route((req) => {
      const c = clients.find((x) => x.externalId === req.params['eid']);
      if (!c)
        throw domainFail(
          404,
          'error.msg.client.id.invalid',
          `Client with identifier ${String(req.params['eid'])} does not exist`,
        );
      return { body: clientJson(c) };
    }),
  );
  r.get(
    '/clients/:id',
    route((req) => {
      const c = clients.find((x) => String(x.id) === req.params['id']);
      if (!c)
        throw domainFail(
          404,
          'error.msg.client.id.invalid',
          `Client with identifier ${String(req.params['id'])} does not exist`,
        );
      return { body: clientJson(c) };
    }),
  );

  function checkUnsupported(resource: string, body: Record<string, unknown>, allowed: Set<string>): void {
    const bad = Object.keys(body).filter((k) => !allowed.has(k));
    if (bad.length > 0) {
      throw new HttpFail(400, {
        developerMessage:
          'The request was invalid. This typically will happen due to validation errors which are provided.',
        httpStatusCode: '400',
        defaultUserMessage: 'Validation errors exist.',
        userMessageGlobalisationCode: 'validation.msg.validation.errors.exist',
        errors: bad.map((p) => ({
          developerMessage: `The parameter ${p} is not supported.`,
          defaultUserMessage: `The parameter ${p} is not supported.`,
          userMessageGlobalisationCode: 'error.msg.parameter.unsupported',
          parameterName: p,
        })),
      });
    }
    void resource;
  }

  function checkDates(
    resource: string,
    body: Record<string, unknown>,
    dateParams: string[],
    errors: FieldError[],
  ): Record<string, string> {
    const present = dateParams.filter((p) => body[p] !== undefined && body[p] !== null);
    const out: Record<string, string> = {};
    if (present.length === 0) return out;
    if (typeof body['dateFormat'] !== 'string' || body['dateFormat'] === '') {
      errors.push({
        parameterName: 'dateFormat',
        code: 'cannot.be.blank',
        message: 'The parameter `dateFormat` is mandatory.',
      });
    }
    if (typeof body['locale'] !== 'string' || body['locale'] === '') {
      errors.push({
        parameterName: 'locale',
        code: 'cannot.be.blank',
        message: 'The parameter `locale` is mandatory.',
      });
    }
    if (typeof body['dateFormat'] !== 'string') return out;
    for (const p of present) {
      const iso = parseFineractDate(body[p], body['dateFormat']);
      if (iso === null)
        errors.push({
          parameterName: p,
          code: 'invalid.date.format',
          message: `The parameter \`${p}\` is invalid based on the dateFormat: \`${body['dateFormat']}\` and locale: \`${String(body['locale'])}\` provided`,
        });
      else out[p] = iso;
    }
    void resource;
    return out;
  }

  r.post(
    '/clients',
    route((req) => {
      const b = (req.body ?? {}) as Record<string, unknown>;
      checkUnsupported('client', b, CLIENT_PARAMS);
      const errors: FieldError[] = [];
      if (!isInt(b['officeId']))
        errors.push({
          parameterName: 'officeId',
          code: 'cannot.be.blank',
          message: 'The parameter `officeId` is mandatory.',
        });
      const legalFormId = b['legalFormId'];
      if (legalFormId === undefined || legalFormId === null)
        errors.push({
          parameterName: 'legalFormId',
          code: 'cannot.be.blank',
          message: 'The parameter `legalFormId` is mandatory.',
        });
      else if (legalFormId !== 1 && legalFormId !== 2)
        errors.push({
          parameterName: 'legalFormId',
          code: 'is.not.one.of.expected.enumerations',
          message: 'The parameter `legalFormId` must be one of [ 1, 2 ] .',
        });
      const str = (k: string): boolean => typeof b[k] === 'string' && b[k].trim() !== '';
      if (legalFormId === 2) {
        if (!str('fullname'))
          errors.push({
            parameterName: 'fullname',
            code: 'cannot.be.blank',
            message: 'The parameter `fullname` is mandatory.',
          });
        for (const k of ['firstname', 'lastname'])
          if (b[k] !== undefined)
            errors.push({
              parameterName: k,
              code: 'cannot.also.be.provided.when.fullname.is.populated',
              message: `The parameter \`${k}\` cannot also be provided when fullname is populated.`,
            });
      } else {
        if (b['fullname'] !== undefined)
          errors.push({
            parameterName: 'fullname',
            code: 'cannot.also.be.provided.when.firstname.is.populated',
            message: 'The parameter `fullname` cannot also be provided when firstname is populated.',
          });
        for (const k of ['firstname', 'lastname'])
          if (!str(k))
            errors.push({
              parameterName: k,
              code: 'cannot.be.blank',
              message: `The parameter \`${k}\` is mandatory.`,
            });
      }
      for (const [k, max] of [
        ['fullname', 160],
        ['firstname', 50],
        ['middlename', 50],
        ['lastname', 50],
      ] as const) {
        if (typeof b[k] === 'string' && b[k].length > max)
          errors.push({
            parameterName: k,
            code: 'exceeds.max.length',
            message: `The parameter \`${k}\` exceeds max length of ${max}.`,
          });
      }
      if (typeof b['active'] !== 'boolean')
        errors.push({
          parameterName: 'active',
          code: 'cannot.be.blank',
          message: 'The parameter `active` is mandatory.',
        });
      if (b['active'] === true && b['activationDate'] === undefined)
        errors.push({
          parameterName: 'activationDate',
          code: 'cannot.be.blank',
          message: 'The parameter `activationDate` is mandatory.',
        });
      if (
        b['externalId'] !== undefined &&
        (typeof b['externalId'] !== 'string' || b['externalId'].length > 100)
      )
        errors.push({
          parameterName: 'externalId',
          code: 'exceeds.max.length',
          message: 'The parameter `externalId` exceeds max length of 100.',
        });
      checkDates('client', b, CLIENT_DATES, errors);
      if (errors.length > 0) throw validationFail('client', errors);
      if (b['officeId'] !== 1)
        throw domainFail(
          404,
          'error.msg.office.id.invalid',
          `Office with identifier ${String(b['officeId'])} does not exist`,
        );
      const externalId = typeof b['externalId'] === 'string' ? b['externalId'] : null;
      if (externalId !== null && clients.some((c) => c.externalId === externalId)) {
        throw domainFail(
          403,
          'error.msg.client.duplicate.externalId',
          `Client with externalId \`${externalId}\` already exists`,
        );
      }
      const c: FakeClient = {
        id: newId(),
        externalId,
        officeId: 1,
        legalFormId: legalFormId as number,
        active: b['active'] === true,
        body: b,
        ...(legalFormId === 2
          ? { fullname: b['fullname'] as string }
          : { firstname: b['firstname'] as string, lastname: b['lastname'] as string }),
      };
      clients.push(c);
      return { body: { officeId: 1, clientId: c.id, resourceId: c.id } };
    }, 'CREATE_CLIENT'),
  );

  const clientById = (id: unknown): FakeClient => {
    const c = clients.find((x) => String(x.id) === String(id));
    if (!c)
      throw domainFail(
        404,
        'error.msg.client.id.invalid',
        `Client with identifier ${String(id)} does not exist`,
      );
    return c;
  };
  const identifierJson = (i: FakeIdentifier): Record<string, unknown> => ({
    id: i.id,
    clientId: i.clientId,
    documentType: { id: i.documentTypeId, name: `type ${i.documentTypeId}` },
    documentKey: i.documentKey,
    description: i.description,
    status: 'clientIdentifierStatusType.active',
  });
  r.get(
    '/clients/:id/identifiers',
    route((req) => {
      const c = clientById(req.params['id']);
      return { body: identifiers.filter((i) => i.clientId === c.id).map(identifierJson) };
    }),
  );
  r.post(
    '/clients/:id/identifiers',
    route((req) => {
      const c = clientById(req.params['id']);
      const b = (req.body ?? {}) as Record<string, unknown>;
      checkUnsupported('clientIdentifier', b, IDENTIFIER_PARAMS);
      const errors: FieldError[] = [];
      if (!isInt(b['documentTypeId']))
        errors.push({
          parameterName: 'documentTypeId',
          code: 'cannot.be.blank',
          message: 'The parameter `documentTypeId` is mandatory.',
        });
      if (typeof b['documentKey'] !== 'string' || b['documentKey'].trim() === '')
        errors.push({
          parameterName: 'documentKey',
          code: 'cannot.be.blank',
          message: 'The parameter `documentKey` is mandatory.',
        });
      else if (b['documentKey'].length > 50)
        errors.push({
          parameterName: 'documentKey',
          code: 'exceeds.max.length',
          message: 'The parameter `documentKey` exceeds max length of 50.',
        });
      if (errors.length > 0) throw validationFail('clientIdentifier', errors);
      const typeId = b['documentTypeId'] as number;
      if (!identifierTypes.includes(typeId))
        throw domainFail(
          404,
          'error.msg.codevalue.id.invalid',
          `Code value with identifier ${typeId} does not exist`,
        );
      const key = b['documentKey'] as string;
      // One (document type, key) across ALL clients: m_client_identifier's unique key
      // (DuplicateClientIdentifierException → error.msg.clientIdentifier.identityKey.duplicate, 403).
      if (identifiers.some((i) => i.documentTypeId === typeId && i.documentKey === key)) {
        throw domainFail(
          403,
          'error.msg.clientIdentifier.identityKey.duplicate',
          `Client identifier of type ${typeId} with value of ${key} already exists.`,
        );
      }
      if (identifiers.some((i) => i.clientId === c.id && i.documentTypeId === typeId)) {
        throw domainFail(
          403,
          'error.msg.clientIdentifier.type.duplicate',
          `Client ${c.id} already has an identifier of type ${typeId}`,
        );
      }
      const i: FakeIdentifier = {
        id: newId(),
        clientId: c.id,
        documentTypeId: typeId,
        documentKey: key,
        ...(typeof b['description'] === 'string' ? { description: b['description'] } : {}),
      };
      identifiers.push(i);
      return { body: { officeId: 1, clientId: c.id, resourceId: i.id } };
    }, 'CREATE_CLIENTIDENTIFIER'),
  );

  /**
   * Fineract's search (SearchApiResource, SearchReadPlatformServiceImpl): `GET /search?query=&resource=
   * clients,clientIdentifiers,...&exactMatch=`. Resources outside the list are ignored; without
   * exactMatch the query is a substring (`like %q%`). A client identifier hit carries the key as
   * entityName and its client as parentId/parentName — not the document type (read the client's
   * identifiers for that).
   */
  r.get(
    '/search',
    route((req) => {
      const query = typeof req.query['query'] === 'string' ? req.query['query'] : '';
      const resource =
        typeof req.query['resource'] === 'string'
          ? req.query['resource']
          : 'clients,clientIdentifiers,groups,loans,savings,shares';
      const resources = resource.split(',').map((x) => x.trim());
      const exact = req.query['exactMatch'] === 'true';
      const matches = (v: string | null | undefined): boolean =>
        v !== null &&
        v !== undefined &&
        (exact ? v.toLowerCase() === query.toLowerCase() : v.toLowerCase().includes(query.toLowerCase()));
      const status = (c: FakeClient) =>
        c.active
          ? { id: 300, code: 'clientStatusType.active', value: 'Active' }
          : { id: 100, code: 'clientStatusType.pending', value: 'Pending' };
      const out: Array<Record<string, unknown>> = [];
      if (resources.includes('clients')) {
        for (const c of clients) {
          const j = clientJson(c);
          if ([j['accountNo'], j['displayName'], c.externalId].some((v) => matches(v as string | null))) {
            out.push({
              entityId: c.id,
              entityAccountNo: j['accountNo'],
              entityExternalId: c.externalId,
              entityName: j['displayName'],
              entityType: 'CLIENT',
              parentId: c.officeId,
              parentName: 'Head Office',
              entityStatus: status(c),
            });
          }
        }
      }
      if (resources.includes('clientIdentifiers')) {
        for (const i of identifiers) {
          if (!matches(i.documentKey)) continue;
          const c = clientById(i.clientId);
          out.push({
            entityId: i.id,
            entityName: i.documentKey,
            entityType: 'CLIENTIDENTIFIER',
            parentId: c.id,
            parentName: clientJson(c)['displayName'],
            entityStatus: status(c),
          });
        }
      }
      return { body: out };
    }),
  );

  const productSettings = (id: number): FakeProductSettings => opts.productSettings?.[id] ?? {};
  const productExists = (id: unknown): boolean =>
    opts.products === undefined ? isInt(id) && id > 0 : opts.products.includes(id as number);
  r.get(
    '/loanproducts/:id',
    route((req) => {
      const id = Number(req.params['id']);
      if (!productExists(id))
        throw domainFail(
          404,
          'error.msg.loanproduct.id.invalid',
          `Loan product with identifier ${String(req.params['id'])} does not exist`,
        );
      const p = productSettings(id);
      return {
        body: {
          id,
          name: p.name ?? `Product ${id}`,
          isLinkedToFloatingInterestRates: p.isFloatingInterestRate === true,
          holdGuaranteeFunds: p.holdGuaranteeFunds === true,
          ...(p.minPrincipal !== undefined ? { minPrincipal: p.minPrincipal } : {}),
          ...(p.maxPrincipal !== undefined ? { maxPrincipal: p.maxPrincipal } : {}),
        },
      };
    }),
  );

  const loanJson = (l: FakeLoan): Record<string, unknown> => {
    const b = l.body;
    const iso = (k: string): string | undefined =>
      parseFineractDate(b[k], String(b['dateFormat'])) ?? undefined;
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
      accountNo: l.accountNo,
      externalId: l.externalId,
      clientId: l.clientId,
      loanProductId: b['productId'],
      status: {
        id: l.statusId,
        code,
        value,
        pendingApproval: l.statusId === 100,
        waitingForDisbursal: l.statusId === 200,
        active: l.statusId === 300,
      },
      principal: num(b['principal'], b['locale']),
      approvedPrincipal: num(b['principal'], b['locale']),
      proposedPrincipal: num(b['principal'], b['locale']),
      termFrequency: b['loanTermFrequency'],
      termPeriodFrequencyType: {
        id: b['loanTermFrequencyType'],
        code: `termFrequency.periodFrequencyType.${FREQ[Number(b['loanTermFrequencyType'])] ?? ''}`,
        value: FREQ[Number(b['loanTermFrequencyType'])],
      },
      numberOfRepayments: b['numberOfRepayments'],
      repaymentEvery: b['repaymentEvery'],
      repaymentFrequencyType: {
        id: freqType,
        code: `repaymentFrequency.periodFrequencyType.${FREQ[freqType] ?? ''}`,
        value: FREQ[freqType],
      },
      interestRatePerPeriod: num(b['interestRatePerPeriod'], b['locale']),
      annualInterestRate: num(b['interestRatePerPeriod'], b['locale']),
      ...(iso('repaymentsStartingFromDate')
        ? { repaymentsStartingFromDate: dateArray(iso('repaymentsStartingFromDate')) }
        : {}),
      timeline: {
        submittedOnDate: dateArray(iso('submittedOnDate')),
        expectedDisbursementDate: dateArray(disb),
        expectedMaturityDate: dateArray(
          addPeriod(disb, Number(b['loanTermFrequency']), Number(b['loanTermFrequencyType'])),
        ),
        ...(l.approvedOnDate ? { approvedOnDate: dateArray(l.approvedOnDate) } : {}),
        ...(l.actualDisbursementDate ? { actualDisbursementDate: dateArray(l.actualDisbursementDate) } : {}),
      },
    };
  };

  const loanById = (id: unknown): FakeLoan => {
    const l = loans.find((x) => String(x.id) === String(id));
    if (!l)
      throw domainFail(404, 'error.msg.loan.id.invalid', `Loan with identifier ${String(id)} does not exist`);
    return l;
  };

  r.get('/loans', listing(loans, loanJson));
  r.get(
    '/loans/external-id/:eid',
    route((req) => {
      const l = loans.find((x) => x.externalId === req.params['eid']);
      if (!l)
        throw domainFail(
          404,
          'error.msg.loan.external.id.invalid',
          `Loan with external identifier ${String(req.params['eid'])} does not exist`,
        );
      return { body: loanJson(l) };
    }),
  );
  r.get(
    '/loans/:id',
    route((req) => ({ body: loanJson(loanById(req.params['id'])) })),
  );

  r.post(
    '/loans',
    route((req) => {
      const b = (req.body ?? {}) as Record<string, unknown>;
      checkUnsupported('loan', b, LOAN_PARAMS);
      const errors: FieldError[] = [];
      for (const k of LOAN_REQUIRED) {
        if (b[k] === undefined || b[k] === null || b[k] === '')
          errors.push({
            parameterName: k,
            code: 'cannot.be.blank',
            message: `The parameter \`${k}\` is mandatory.`,
          });
      }
      const dates = checkDates('loan', b, LOAN_DATES, errors);
      if (b['loanType'] !== undefined && b['loanType'] !== 'individual')
        errors.push({
          parameterName: 'loanType',
          code: 'invalid',
          message: 'The parameter `loanType` must be individual.',
        });
      const principal = num(b['principal'], b['locale']);
      if (b['principal'] !== undefined && (principal === null || principal <= 0))
        errors.push({
          parameterName: 'principal',
          code: 'not.greater.than.zero',
          message: 'The parameter `principal` must be greater than 0.',
        });
      for (const k of ['loanTermFrequency', 'numberOfRepayments', 'repaymentEvery']) {
        if (b[k] !== undefined && !(isInt(b[k]) && b[k] > 0))
          errors.push({
            parameterName: k,
            code: 'not.greater.than.zero',
            message: `The parameter \`${k}\` must be a whole number greater than 0.`,
          });
      }
      for (const k of ['loanTermFrequencyType', 'repaymentFrequencyType']) {
        if (b[k] !== undefined && !(isInt(b[k]) && b[k] >= 0 && b[k] <= 3))
          errors.push({
            parameterName: k,
            code: 'is.not.within.expected.range',
            message: `The parameter \`${k}\` must be between 0 and 3.`,
          });
      }
      const grace = b['graceOnPrincipalPayment'];
      if (
        grace !== undefined &&
        grace !== null &&
        isInt(grace) &&
        isInt(b['numberOfRepayments']) &&
        grace >= b['numberOfRepayments']
      ) {
        errors.push({
          parameterName: 'graceOnPrincipalPayment',
          code: 'must.be.less.than.number.of.repayments',
          message: `The parameter \`graceOnPrincipalPayment\` (${grace}) must be less than numberOfRepayments (${b['numberOfRepayments']}).`,
        });
      }
      if (
        b['externalId'] !== undefined &&
        (typeof b['externalId'] !== 'string' || b['externalId'].length > 100)
      )
        errors.push({
          parameterName: 'externalId',
          code: 'exceeds.max.length',
          message: 'The parameter `externalId` exceeds max length of 100.',
        });
      if (
        b['accountNo'] !== undefined &&
        b['accountNo'] !== null &&
        (typeof b['accountNo'] !== 'string' || b['accountNo'].length > 20)
      )
        errors.push({
          parameterName: 'accountNo',
          code: 'exceeds.max.length',
          message: 'The parameter `accountNo` exceeds max length of 20.',
        });
      if (errors.length > 0) throw validationFail('loan', errors);
      if (principal !== null && principal >= MAX_PRINCIPAL_EXCLUSIVE) {
        // m_loan.principal_amount is DECIMAL(19,6): the insert fails (data integrity, 403).
        throw new HttpFail(403, {
          developerMessage: 'The request caused a data integrity issue to be fired by the database.',
          httpStatusCode: '403',
          defaultUserMessage:
            "Unknown data integrity issue with resource: Out of range value for column 'principal_amount'",
          userMessageGlobalisationCode: 'error.msg.unknown.data.integrity.issue',
          errors: [],
        });
      }
      if (b['loanTermFrequencyType'] !== b['repaymentFrequencyType']) {
        throw validationFail('loan', [
          {
            parameterName: 'loanTermFrequencyType',
            code: 'not.equal.to.repayment.frequency.type',
            message: 'Loan term frequency type must be the same as the repayment frequency type.',
          },
        ]);
      }
      const expectedTerm = (b['repaymentEvery'] as number) * (b['numberOfRepayments'] as number);
      if (b['loanTermFrequency'] !== expectedTerm) {
        throw validationFail('loan', [
          {
            parameterName: 'loanTermFrequency',
            code: 'must.equal.repaymentEvery.times.numberOfRepayments',
            message: `Loan term frequency (${String(b['loanTermFrequency'])}) must be equal to repaymentEvery × numberOfRepayments (${expectedTerm}).`,
          },
        ]);
      }
      if (
        dates['submittedOnDate'] &&
        dates['expectedDisbursementDate'] &&
        dates['submittedOnDate'] > dates['expectedDisbursementDate']
      ) {
        throw validationFail('loan', [
          {
            parameterName: 'expectedDisbursementDate',
            code: 'cannot.be.before.submittal.date',
            message: 'The date on which a loan is disbursed cannot be before its submittal date.',
          },
        ]);
      }
      const client = clients.find((c) => c.id === b['clientId']);
      if (!client)
        throw domainFail(
          404,
          'error.msg.client.id.invalid',
          `Client with identifier ${String(b['clientId'])} does not exist`,
        );
      if (!client.active) throw domainFail(403, 'error.msg.loan.client.not.active', 'Client is not active.');
      if (!productExists(b['productId']))
        throw domainFail(
          404,
          'error.msg.loanproduct.id.invalid',
          `Loan product with identifier ${String(b['productId'])} does not exist`,
        );
      const externalId = typeof b['externalId'] === 'string' ? b['externalId'] : null;
      if (externalId !== null && loans.some((l) => l.externalId === externalId)) {
        throw domainFail(
          403,
          'error.msg.loan.with.externalId.already.used',
          'Loan with externalId is already registered.',
        );
      }
      const product = productSettings(b['productId'] as number);
      if (product.isFloatingInterestRate === true && b['interestRatePerPeriod'] !== undefined) {
        throw validationFail('loan', [
          {
            parameterName: 'interestRatePerPeriod',
            code: 'not.supported.for.selected.interest.rate.type',
            message:
              'The parameter `interestRatePerPeriod` is not supported for a product linked to floating interest rates.',
          },
        ]);
      }
      if (
        principal !== null &&
        ((product.minPrincipal !== undefined && principal < product.minPrincipal) ||
          (product.maxPrincipal !== undefined && principal > product.maxPrincipal))
      ) {
        throw validationFail('loan', [
          {
            parameterName: 'principal',
            code: 'is.not.within.expected.range',
            message: `The parameter \`principal\` must be between ${product.minPrincipal ?? 0} and ${product.maxPrincipal ?? 'unbounded'}.`,
          },
        ]);
      }
      const sentAccountNo =
        typeof b['accountNo'] === 'string' && b['accountNo'] !== '' ? b['accountNo'] : null;
      if (sentAccountNo !== null && loans.some((l) => l.accountNo === sentAccountNo)) {
        throw domainFail(
          403,
          'error.msg.loan.duplicate.accountNo',
          `Loan with accountNo \`${sentAccountNo}\` already exists`,
        );
      }
      const id = newId();
      const l: FakeLoan = {
        id,
        externalId,
        accountNo: sentAccountNo ?? String(id).padStart(9, '0'),
        clientId: client.id,
        statusId: 100,
        body: b,
      };
      loans.push(l);
      return { body: { officeId: 1, clientId: client.id, loanId: l.id, resourceId: l.id } };
    }, 'CREATE_LOAN'),
  );

  r.post(
    '/loans/:id',
    route(
      (req) => {
        const l = loanById(req.params['id']);
        const b = (req.body ?? {}) as Record<string, unknown>;
        const command = req.query['command'];
        const errors: FieldError[] = [];
        if (command === 'approve') {
          checkUnsupported('loanapplication', b, APPROVE_PARAMS);
          if (b['approvedOnDate'] === undefined)
            errors.push({
              parameterName: 'approvedOnDate',
              code: 'cannot.be.blank',
              message: 'The parameter `approvedOnDate` is mandatory.',
            });
          const d = checkDates('loanapplication', b, ['approvedOnDate'], errors);
          if (errors.length > 0) throw validationFail('loanapplication', errors);
          afterBusinessDate('approvedOnDate', d['approvedOnDate']);
          if (l.statusId !== 100)
            throw domainFail(
              400,
              'error.msg.loan.approve.account.is.not.submitted.and.pending.state',
              'Loan Account Approval is not allowed. Loan Account is not in submitted and pending approval state.',
            );
          l.statusId = 200;
          if (d['approvedOnDate']) l.approvedOnDate = d['approvedOnDate'];
          return { body: { loanId: l.id, resourceId: l.id, changes: { status: { id: 200 } } } };
        }
        if (command === 'disburse') {
          checkUnsupported('loan.disbursement', b, DISBURSE_PARAMS);
          if (b['actualDisbursementDate'] === undefined)
            errors.push({
              parameterName: 'actualDisbursementDate',
              code: 'cannot.be.blank',
              message: 'The parameter `actualDisbursementDate` is mandatory.',
            });
          const d = checkDates('loan.disbursement', b, ['actualDisbursementDate'], errors);
          if (errors.length > 0) throw validationFail('loan.disbursement', errors);
          afterBusinessDate('actualDisbursementDate', d['actualDisbursementDate']);
          if (l.statusId !== 200)
            throw domainFail(
              400,
              'error.msg.loan.disbursal.account.is.not.approve.not.disbursed.state',
              'Loan Disbursal is not allowed. Loan Account is not in approved and not disbursed state.',
            );
          l.statusId = 300;
          if (d['actualDisbursementDate']) l.actualDisbursementDate = d['actualDisbursementDate'];
          return { body: { loanId: l.id, resourceId: l.id, changes: { status: { id: 300 } } } };
        }
        throw domainFail(
          400,
          'error.msg.command.unsupported',
          `Unrecognized command ${JSON.stringify(command)}`,
        );
      },
      (req) =>
        req.query['command'] === 'approve'
          ? 'APPROVE_LOAN'
          : req.query['command'] === 'disburse'
            ? 'DISBURSE_LOAN'
            : 'UNKNOWN_LOAN',
    ),
  );

  function afterBusinessDate(param: string, iso: string | undefined): void {
    if (opts.businessDate !== undefined && iso !== undefined && iso > opts.businessDate) {
      throw validationFail('loan', [
        {
          parameterName: param,
          code: 'cannot.be.a.future.date',
          message: `The parameter \`${param}\` (${iso}) cannot be after the business date ${opts.businessDate}.`,
        },
      ]);
    }
  }

  r.get(
    '/loans/:id/guarantors',
    route((req) => {
      const l = loanById(req.params['id']);
      return {
        body: guarantors
          .filter((g) => g.loanId === l.id)
          .map((g) => ({
            id: g.id,
            loanId: g.loanId,
            guarantorType: {
              id: g.guarantorTypeId,
              code: g.guarantorTypeId === 1 ? 'guarantor.existing.customer' : 'guarantor.external',
              value: g.guarantorTypeId === 1 ? 'CUSTOMER' : 'EXTERNAL',
            },
            entityId: g.entityId,
            firstname: g.firstname,
            lastname: g.lastname,
            status: true,
          })),
      };
    }),
  );
  r.post(
    '/loans/:id/guarantors',
    route((req) => {
      const l = loanById(req.params['id']);
      const b = (req.body ?? {}) as Record<string, unknown>;
      checkUnsupported('guarantor', b, GUARANTOR_PARAMS);
      const typeId = b['guarantorTypeId'];
      const errors: FieldError[] = [];
      if (typeId !== 1 && typeId !== 2 && typeId !== 3)
        errors.push({
          parameterName: 'guarantorTypeId',
          code: 'is.not.one.of.expected.enumerations',
          message: 'The parameter `guarantorTypeId` must be one of [ 1, 2, 3 ] .',
        });
      if ((typeId === 1 || typeId === 2) && !isInt(b['entityId']))
        errors.push({
          parameterName: 'entityId',
          code: 'cannot.be.blank',
          message: 'The parameter `entityId` is mandatory.',
        });
      if (typeId === 3)
        for (const k of ['firstname', 'lastname'])
          if (typeof b[k] !== 'string' || b[k] === '')
            errors.push({
              parameterName: k,
              code: 'cannot.be.blank',
              message: `The parameter \`${k}\` is mandatory.`,
            });
      if (errors.length > 0) throw validationFail('guarantor', errors);
      let entityId: number | null = null;
      if (typeId === 1) {
        const c = clients.find((x) => x.id === b['entityId']);
        if (!c)
          throw domainFail(
            404,
            'error.msg.client.id.invalid',
            `Client with identifier ${String(b['entityId'])} does not exist`,
          );
        if (c.id === l.clientId)
          throw domainFail(
            403,
            'error.msg.loan.guarantor.self.guarantee.error',
            'Loan applicant cannot be a guarantor of their own loan.',
          );
        entityId = c.id;
        if (guarantors.some((g) => g.loanId === l.id && g.entityId === entityId)) {
          throw domainFail(
            403,
            'error.msg.loan.guarantor.duplicate',
            `Client ${entityId} is already a guarantor of loan ${l.id}`,
          );
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
    }, 'CREATE_GUARANTOR'),
  );

  r.get(
    '/loans/:id/documents',
    route((req) => {
      const l = loanById(req.params['id']);
      return {
        body: documents
          .filter((d) => d.loanId === l.id)
          .map((d) => ({
            id: d.id,
            parentEntityType: 'loans',
            parentEntityId: d.loanId,
            name: d.name,
            fileName: d.fileName,
            size: d.size,
            type: d.type,
            description: d.description,
          })),
      };
    }),
  );
  r.post(
    '/loans/:id/documents',
    route(async (req) => {
      const l = loanById(req.params['id']);
      if (denied.has('CREATE_DOCUMENT'))
        throw new HttpFail(403, {
          developerMessage:
            'The user associated with credentials passed on this request does not have sufficient privileges to perform this action.',
          httpStatusCode: '403',
          defaultUserMessage: 'Insufficient privileges to perform this action.',
          userMessageGlobalisationCode: 'error.msg.not.authorized',
          errors: [
            {
              defaultUserMessage: 'User has no authority to: CREATE_DOCUMENT',
              userMessageGlobalisationCode: 'error.msg.not.authorized',
              parameterName: 'id',
            },
          ],
        });
      if (!Buffer.isBuffer(req.body))
        throw validationFail('document', [
          {
            parameterName: 'file',
            code: 'cannot.be.blank',
            message: 'A multipart/form-data body with a file is required.',
          },
        ]);
      const form = await new WebResponse(req.body, {
        headers: { 'content-type': req.header('content-type') ?? '' },
      }).formData();
      const name = form.get('name');
      const file = form.get('file');
      const errors: FieldError[] = [];
      if (typeof name !== 'string' || name.trim() === '')
        errors.push({
          parameterName: 'name',
          code: 'cannot.be.blank',
          message: 'The parameter `name` is mandatory.',
        });
      if (typeof name === 'string' && name.length > 250)
        errors.push({
          parameterName: 'name',
          code: 'exceeds.max.length',
          message: 'The parameter `name` exceeds max length of 250.',
        });
      const description = form.get('description');
      if (typeof description === 'string' && description.length > 1000)
        errors.push({
          parameterName: 'description',
          code: 'exceeds.max.length',
          message: 'The parameter `description` exceeds max length of 1000.',
        });
      if (file === null || typeof file === 'string')
        errors.push({
          parameterName: 'file',
          code: 'cannot.be.blank',
          message: 'The parameter `file` is mandatory.',
        });
      if (errors.length > 0 || file === null || typeof file === 'string')
        throw validationFail('document', errors);
      const bytes = Buffer.from(await file.arrayBuffer());
      const ext = /\.([A-Za-z0-9]+)$/.exec(file.name)?.[1]?.toLowerCase();
      const types = ext === undefined ? undefined : DOCUMENT_TYPES[ext];
      const contentType = file.type.split(';')[0]?.trim().toLowerCase() ?? '';
      if (types === undefined || !types.includes(contentType)) {
        throw domainFail(
          403,
          'error.msg.document.save',
          `Invalid file extension or content type: ${file.name} (${file.type || 'no content type'})`,
        );
      }
      if (bytes.length > documentMaxBytes) {
        throw domainFail(
          403,
          'error.msg.document.save',
          `Document size ${bytes.length} exceeds the limit of ${documentMaxBytes} bytes`,
        );
      }
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
    }),
  );

  app.use(BASE, r);
  app.use((req: Request, res: Response) =>
    sendRaw(req, res, 404, {
      developerMessage: `No route ${req.method} ${req.path}`,
      httpStatusCode: '404',
      defaultUserMessage: 'Not found',
      errors: [],
    }),
  );
  // JSON parse errors and the like: Fineract answers 400.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    sendRaw(req, res, 400, {
      developerMessage: String((err as Error).message),
      httpStatusCode: '400',
      defaultUserMessage: 'Invalid request body',
      errors: [],
    });
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
    identifiers,
    requests,
    faults,
    inject(f) {
      faults.push({ times: 1, ...f });
    },
    seedClient(x) {
      const legalFormId = x.fullname !== undefined ? 2 : 1;
      const c: FakeClient = {
        id: newId(),
        externalId: x.externalId ?? null,
        officeId: 1,
        legalFormId,
        active: true,
        body: {},
        ...(x.fullname !== undefined
          ? { fullname: x.fullname }
          : { firstname: x.firstname ?? 'Pat', lastname: x.lastname ?? 'Doe' }),
      };
      clients.push(c);
      for (const i of x.identifiers ?? []) {
        if (identifiers.some((o) => o.documentTypeId === i.documentTypeId && o.documentKey === i.documentKey))
          throw new Error(`seedClient: identifier ${i.documentTypeId}/${i.documentKey} exists`);
        identifiers.push({
          id: newId(),
          clientId: c.id,
          documentTypeId: i.documentTypeId,
          documentKey: i.documentKey,
        });
      }
      return c;
    },
    keysInFlight: () => inFlight.size,
    writes(path) {
      return requests.filter(
        (q) =>
          q.method === 'POST' &&
          (path === undefined || (typeof path === 'string' ? q.path === path : path.test(q.path))),
      );
    },
    async close() {
      for (const res of held) res.socket?.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
