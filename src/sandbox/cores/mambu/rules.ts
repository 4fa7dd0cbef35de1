import type { clientRequest, groupRequest, loanRequest } from './contract.js';
import { type GRACE_PERIOD_TYPES } from './contract.js';
import type { z } from 'zod';
import {
  newEncodedKey,
  nextId,
  type SimLoan,
  type SimProduct,
  type SimRecord,
  type SimState,
} from './state.js';

/**
 * Mambu's rules that its prose states and its schemas do not: the simulator's own checks, run after a
 * request matched the published schema (contract.ts). Each cites where Mambu says it.
 */

export class MambuFail extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: number,
    readonly reason: string,
    readonly source?: string,
  ) {
    super(reason);
  }
}

export const fail = (reason: string, source?: string, status = 400, code = 4): MambuFail =>
  new MambuFail(status, code, reason, source);

/**
 * Caller-supplied ids: letters and digits, at most 32 (the round-4 reading of Mambu's id rules, kept);
 * an id in use answers DUPLICATE_ID (domain-notes "Mambu": a second create with the same id fails).
 */
const ID_RULE = /^[A-Za-z0-9]{1,32}$/;

/**
 * Document names (documents API; the v1 CreateDocument schema states it, v2 keeps it): at most 256
 * characters, none of / < > | : & ? * [ ] # \ " '.
 */
const DOCUMENT_NAME_FORBIDDEN = /[/<>|:&?*[\]#\\"']/;

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Custom field sets on a create ("Custom fields" in API v2): sets that exist for the entity, fields
 * of the set, values never "" or null (Mambu refuses an empty value rather than storing it).
 */
export function customFields(
  st: SimState,
  entity: string,
  body: Record<string, unknown>,
): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [k, v] of Object.entries(body)) {
    if (!k.startsWith('_')) continue;
    const fields = st.tenant.customFieldSets[entity]?.[k];
    if (fields === undefined) throw fail('INVALID_CUSTOM_FIELD_SET_ID', k);
    if (!isObject(v)) throw fail('INVALID_CUSTOM_FIELD_VALUE', k);
    for (const [f, value] of Object.entries(v)) {
      if (!fields.includes(f)) throw fail('INVALID_CUSTOM_FIELD_ID', `${k}.${f}`);
      if (value === null || value === '') throw fail('INVALID_CUSTOM_FIELD_VALUE', `${k}.${f}`);
    }
    out[k] = { ...v };
  }
  return out;
}

function callerId(st: SimState, body: { id?: string | undefined }, taken: (id: string) => boolean): string {
  if (body.id === undefined) {
    let id = nextId(st);
    while (taken(id)) id = nextId(st);
    return id;
  }
  if (!ID_RULE.test(body.id)) throw fail('INVALID_ID', 'id');
  if (taken(body.id)) throw fail('DUPLICATE_ID', 'id');
  return body.id;
}

/** Required strings may not be blank ("required" in the schema; Mambu refuses whitespace too). */
function notBlank(v: string, what: string, max = 256): void {
  if (v.trim() === '') throw fail('INVALID_PARAMETERS', `${what} is required`);
  if (v.length > max) throw fail('INVALID_PARAMETERS', `${what} is longer than ${max}`);
}

const holderIdTaken = (st: SimState) => (id: string) =>
  st.clients.some((c) => c.id === id) || st.groups.some((g) => g.id === id);

export function createClient(st: SimState, body: z.infer<typeof clientRequest>, user: string): SimRecord {
  notBlank(body.firstName, 'firstName');
  notBlank(body.lastName, 'lastName');
  for (const d of body.idDocuments ?? []) {
    notBlank(d.documentType, 'idDocuments.documentType');
    notBlank(d.documentId, 'idDocuments.documentId');
  }
  const custom = customFields(st, 'CLIENT', body);
  const id = callerId(st, body, holderIdTaken(st));
  const rec: SimRecord = {
    encodedKey: newEncodedKey(),
    id,
    body: { ...body, ...custom, state: body.state ?? 'PENDING_APPROVAL' },
    createdBy: user,
    createdAt: st.now(),
  };
  st.clients.push(rec);
  return rec;
}

export function createGroup(st: SimState, body: z.infer<typeof groupRequest>, user: string): SimRecord {
  notBlank(body.groupName, 'groupName', 255);
  // Members must have an existing client record (GroupMember.clientKey: a client's encoded key).
  for (const m of body.groupMembers ?? [])
    if (!st.clients.some((c) => c.encodedKey === m.clientKey))
      throw fail('INVALID_CLIENT_KEY', 'groupMembers.clientKey');
  const custom = customFields(st, 'GROUP', body);
  const id = callerId(st, body, holderIdTaken(st));
  const rec: SimRecord = {
    encodedKey: newEncodedKey(),
    id,
    body: { ...body, ...custom },
    createdBy: user,
    createdAt: st.now(),
  };
  st.groups.push(rec);
  return rec;
}

const outside = (x: number, r: { min?: number; max?: number } | undefined): boolean =>
  r !== undefined && ((r.min !== undefined && x < r.min) || (r.max !== undefined && x > r.max));

/**
 * The loan product's rules (Mambu "Loan products": the account's values must lie in the product's
 * ranges, else PARAMS_INCONSISTENT_WITH_PRODUCT_RULES) and the schedule's own: grace periods fewer
 * than installments, a grace type the product allows (INVALID_GRACE_PERIOD).
 */
function checkSchedule(product: SimProduct, loan: z.infer<typeof loanRequest>): void {
  const s = loan.scheduleSettings;
  if (s === undefined) throw fail('INVALID_PARAMETERS', 'scheduleSettings is required');
  const n = s.repaymentInstallments;
  if (n === undefined || n < 1)
    throw fail('INVALID_REPAYMENT_INSTALLMENTS', 'scheduleSettings.repaymentInstallments');
  if (outside(n, product.installments))
    throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'scheduleSettings.repaymentInstallments');
  if (s.repaymentPeriodCount === undefined || s.repaymentPeriodCount < 1)
    throw fail('INVALID_REPAYMENT_PERIOD_COUNT', 'scheduleSettings.repaymentPeriodCount');
  if (s.repaymentPeriodUnit === undefined)
    throw fail('INVALID_PARAMETERS', 'scheduleSettings.repaymentPeriodUnit');
  if (
    product.repaymentPeriodUnits !== undefined &&
    !product.repaymentPeriodUnits.includes(s.repaymentPeriodUnit)
  )
    throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'scheduleSettings.repaymentPeriodUnit');
  const grace = s.gracePeriod;
  const graceType: (typeof GRACE_PERIOD_TYPES)[number] = s.gracePeriodType ?? 'NONE';
  const allowed = product.gracePeriodType ?? 'NONE';
  if (grace < 0) throw fail('INVALID_GRACE_PERIOD', 'scheduleSettings.gracePeriod');
  if (grace >= n)
    throw fail(
      'INVALID_GRACE_PERIOD',
      'scheduleSettings.gracePeriod must be less than repaymentInstallments',
    );
  if (grace > 0 && graceType !== allowed)
    throw fail('INVALID_GRACE_PERIOD', `scheduleSettings.gracePeriodType: the product allows ${allowed}`);
  if (grace === 0 && graceType !== 'NONE' && graceType !== allowed)
    throw fail('INVALID_GRACE_PERIOD', 'scheduleSettings.gracePeriodType');
}

/**
 * Disbursement details: an expected disbursement date is needed to approve and disburse, and the
 * first repayment falls after it (Mambu "Disbursing a Loan"; FIRST_REPAYMENT_DATE_BEFORE_EXPECTED_DISBURSEMENT_DATE).
 */
function checkDisbursement(loan: z.infer<typeof loanRequest>): void {
  const d = loan.disbursementDetails;
  if (d?.expectedDisbursementDate === undefined)
    throw fail('INVALID_PARAMETERS', 'disbursementDetails.expectedDisbursementDate is required');
  if (
    d.firstRepaymentDate !== undefined &&
    Date.parse(d.firstRepaymentDate) <= Date.parse(d.expectedDisbursementDate)
  )
    throw fail(
      'FIRST_REPAYMENT_DATE_BEFORE_EXPECTED_DISBURSEMENT_DATE',
      'disbursementDetails.firstRepaymentDate',
    );
}

export function createLoan(
  st: SimState,
  body: z.infer<typeof loanRequest>,
  raw: string,
  user: string,
): SimLoan {
  const holders = body.accountHolderType === 'CLIENT' ? st.clients : st.groups;
  if (!holders.some((h) => h.encodedKey === body.accountHolderKey))
    throw fail(
      body.accountHolderType === 'CLIENT' ? 'INVALID_CLIENT_KEY' : 'INVALID_GROUP_KEY',
      'accountHolderKey',
    );
  const product = st.products.find((p) => p.encodedKey === body.productTypeKey);
  if (product === undefined) throw fail('INVALID_PRODUCT_KEY', 'productTypeKey');
  if (!(body.loanAmount > 0)) throw fail('INVALID_LOAN_AMOUNT', 'loanAmount');
  // An amount in the currency's minor units: at most 2 decimals for USD (the organization currency).
  const amountText = /"loanAmount"\s*:\s*(-?[0-9.eE+]+)/.exec(raw)?.[1] ?? String(body.loanAmount);
  if (!/^\d+(\.\d{1,2})?$/.test(amountText))
    throw fail('INVALID_LOAN_AMOUNT', `loanAmount ${amountText}: at most 2 decimals`);
  if (outside(body.loanAmount, product.loanAmount))
    throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'loanAmount');
  checkSchedule(product, body);
  const rate = body.interestSettings?.interestRate;
  if (rate === undefined || rate < 0) throw fail('INVALID_INTEREST_RATE', 'interestSettings.interestRate');
  if (outside(rate, product.interestRate))
    throw fail('PARAMS_INCONSISTENT_WITH_PRODUCT_RULES', 'interestSettings.interestRate');
  checkDisbursement(body);
  if (body.loanName !== undefined) notBlank(body.loanName, 'loanName', 255);
  const custom = customFields(st, 'LOAN_ACCOUNT', body);
  const id = callerId(st, body, (x) => st.loans.some((l) => l.id === x));
  const loan: SimLoan = {
    encodedKey: newEncodedKey(),
    id,
    body: { ...body, ...custom },
    createdBy: user,
    createdAt: st.now(),
    accountState: product.accountInitialState ?? 'PENDING_APPROVAL',
    loanAmountText: amountText,
  };
  st.loans.push(loan);
  return loan;
}

/** Document names (see DOCUMENT_NAME_FORBIDDEN). */
export function checkDocumentName(name: string | undefined): string {
  if (name === undefined || name === '' || name.length > 256 || DOCUMENT_NAME_FORBIDDEN.test(name))
    throw fail('INVALID_DOCUMENT_NAME', 'name');
  return name;
}
