import type { Express, Request, Response } from 'express';
import { Response as WebResponse } from 'undici';
import { contractProblem, documentUpload } from './contract.js';
import { paged, route } from './http.js';
import {
  checkDocumentName,
  createClient,
  createGroup,
  createLoan,
  fail,
  isObject,
  type MambuFail,
} from './rules.js';
import {
  newEncodedKey,
  nextId,
  orgTime,
  type SimDocument,
  type SimLoan,
  type SimProduct,
  type SimRecord,
  type SimState,
  type SimTransaction,
} from './state.js';
import type { clientRequest, groupRequest, loanAccountAction, loanRequest } from './contract.js';
import type { z } from 'zod';

const full = (req: Request): boolean => req.query['detailsLevel'] === 'FULL';
const byRef = <T extends SimRecord>(list: T[], ref: string): T | undefined =>
  list.find((x) => x.id === ref || x.encodedKey === ref);
const notFound = (what: string): MambuFail => fail(`INVALID_${what}_ID`, undefined, 404, 301);
const user = (res: Response): string => res.locals['user'] as string;

/** A record as Mambu answers it: custom field sets only with detailsLevel=FULL. */
function view(st: SimState, r: SimRecord, isFull: boolean): Record<string, unknown> {
  const body = Object.fromEntries(Object.entries(r.body).filter(([k]) => isFull || !k.startsWith('_')));
  return { ...body, id: r.id, encodedKey: r.encodedKey, creationDate: orgTime(st, r.createdAt) };
}
const loanView = (st: SimState, l: SimLoan, isFull: boolean): Record<string, unknown> => ({
  ...view(st, l, isFull),
  accountState: l.accountState,
});
const transactionView = (st: SimState, t: SimTransaction): Record<string, unknown> => ({
  encodedKey: t.encodedKey,
  id: t.id,
  ...(t.externalId === null ? {} : { externalId: t.externalId }),
  type: t.type,
  amount: t.amount,
  ...(t.notes === null ? {} : { notes: t.notes }),
  parentAccountKey: t.loanKey,
  parentAccountID: t.loanId,
  valueDate: orgTime(st, t.at),
  bookingDate: orgTime(st, t.at),
  creationDate: orgTime(st, t.at),
});
const documentView = (st: SimState, d: SimDocument): Record<string, unknown> => ({
  id: d.id,
  encodedKey: d.encodedKey,
  name: d.name,
  type: /\.([A-Za-z0-9]+)$/.exec(d.fileName)?.[1]?.toLowerCase() ?? 'bin',
  fileName: d.fileName,
  fileSize: d.fileSize,
  ...(d.notes === null ? {} : { notes: d.notes }),
  ownerKey: d.ownerKey,
  ownerType: d.ownerType,
  creationDate: orgTime(st, d.at),
});
const range = (r: { min?: number; max?: number } | undefined): Record<string, number> => ({
  ...(r?.min === undefined ? {} : { minValue: r.min }),
  ...(r?.max === undefined ? {} : { maxValue: r.max }),
});
const productView = (p: SimProduct): Record<string, unknown> => ({
  id: p.id,
  encodedKey: p.encodedKey,
  name: p.name ?? p.id,
  type: 'DYNAMIC_TERM_LOAN',
  state: 'ACTIVE',
  newAccountSettings: {
    accountInitialState: p.accountInitialState ?? 'PENDING_APPROVAL',
    idGeneratorType: 'INCREMENTAL_NUMBER',
    idPattern: '@@@###',
  },
  gracePeriodSettings: { gracePeriodType: p.gracePeriodType ?? 'NONE' },
  loanAmountSettings: { loanAmount: range(p.loanAmount) },
  scheduleSettings: { numInstallments: range(p.installments) },
  ...(p.interestRate === undefined
    ? {}
    : { interestSettings: { interestRateSettings: [{ interestRate: range(p.interestRate) }] } }),
});

/** Searches: EQUALS on a property, a custom field (`_set.field`), id or encodedKey. */
function search<T>(
  req: Request,
  res: Response,
  list: T[],
  field: (x: T, f: string) => unknown,
  out: (x: T) => unknown,
) {
  const { filterCriteria } = req.body as {
    filterCriteria: Array<{ field: string; operator: string; value?: string }>;
  };
  let hits = list;
  for (const c of filterCriteria) {
    if (c.operator !== 'EQUALS')
      throw fail('INVALID_PARAMETERS', `filterCriteria.operator ${c.operator} is not simulated`);
    hits = hits.filter((x) => {
      const v = field(x, c.field);
      return (
        (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') && String(v) === c.value
      );
    });
  }
  return paged(req, res, hits.map(out));
}
const fieldOf = (x: SimRecord, field: string): unknown => {
  if (field.startsWith('_')) {
    const [set, f] = field.split('.');
    const v = x.body[set ?? ''];
    return isObject(v) ? v[f ?? ''] : undefined;
  }
  if (field === 'id') return x.id;
  if (field === 'encodedKey') return x.encodedKey;
  return x.body[field];
};

function customerRoutes(app: Express, st: SimState, base: string): void {
  const kinds = [
    ['clients', st.clients, 'CLIENT', 'createClient', 'getClient', 'searchClients'],
    ['groups', st.groups, 'GROUP', 'createGroup', 'getGroup', 'searchGroups'],
  ] as const;
  for (const [path, list, what, create, get, find] of kinds) {
    app.post(
      `${base}/${path}`,
      route(st, create, (req, res) => {
        const rec =
          path === 'clients'
            ? createClient(st, req.body as z.infer<typeof clientRequest>, user(res))
            : createGroup(st, req.body as z.infer<typeof groupRequest>, user(res));
        return { status: 201, body: view(st, rec, true) };
      }),
    );
    app.post(
      `${base}/${path}\\:search`,
      route(st, find, (req, res) => ({
        body: search(req, res, list, fieldOf, (c) => view(st, c, full(req))),
      })),
    );
    app.get(
      `${base}/${path}/:id`,
      route(st, get, (req) => {
        const c = byRef(list, String(req.params['id']));
        if (c === undefined) throw notFound(what);
        return { body: view(st, c, full(req)) };
      }),
    );
  }
}

/** Loan account states (Mambu "Loan account life cycle and states", "Approving a Loan"). */
const TRANSITIONS: Record<string, [string, string]> = {
  REQUEST_APPROVAL: ['PARTIAL_APPLICATION', 'PENDING_APPROVAL'],
  APPROVE: ['PENDING_APPROVAL', 'APPROVED'],
  UNDO_APPROVE: ['APPROVED', 'PENDING_APPROVAL'],
};

function loanRoutes(app: Express, st: SimState, base: string): void {
  app.post(
    `${base}/loans`,
    route(st, 'createLoan', (req, res) => {
      const raw = (req as unknown as { rawBody?: string }).rawBody ?? '';
      const loan = createLoan(st, req.body as z.infer<typeof loanRequest>, raw, user(res));
      return { status: 201, body: loanView(st, loan, true) };
    }),
  );
  app.post(
    `${base}/loans\\:search`,
    route(st, 'searchLoans', (req, res) => ({
      body: search(req, res, st.loans, fieldOf, (l) => loanView(st, l, full(req))),
    })),
  );
  app.get(
    `${base}/loans`,
    route(st, 'listLoans', (req, res) => ({
      body: paged(
        req,
        res,
        st.loans.map((l) => loanView(st, l, full(req))),
      ),
    })),
  );
  app.get(
    `${base}/loans/:id`,
    route(st, 'getLoan', (req) => {
      const l = byRef(st.loans, String(req.params['id']));
      if (l === undefined) throw notFound('ACCOUNT');
      return { body: loanView(st, l, full(req)) };
    }),
  );
  app.post(
    `${base}/loans/:id\\:changeState`,
    route(st, 'changeLoanState', (req, res) => {
      const l = byRef(st.loans, String(req.params['id']));
      if (l === undefined) throw notFound('ACCOUNT');
      const { action } = req.body as z.infer<typeof loanAccountAction>;
      const t = TRANSITIONS[action];
      if (t === undefined) throw fail('INVALID_PARAMETERS', `action ${action} is not simulated`);
      if (l.accountState !== t[0])
        throw fail('INVALID_ACCOUNT_STATE_FOR_ACTION', `${action} from ${l.accountState}`);
      l.accountState = t[1];
      if (action === 'APPROVE') l.approvedBy = user(res);
      return { body: loanView(st, l, false) };
    }),
  );
}

function transactionRoutes(app: Express, st: SimState, base: string): void {
  app.post(
    `${base}/loans/transactions\\:search`,
    route(st, 'searchTransactions', (req, res) => {
      const views = st.transactions.map((t) => transactionView(st, t));
      return {
        body: search(
          req,
          res,
          views,
          (v, f) => v[f],
          (v) => v,
        ),
      };
    }),
  );
  app.post(
    `${base}/loans/:id/disbursement-transactions`,
    route(st, 'disburse', (req, res) => {
      const l = byRef(st.loans, String(req.params['id']));
      if (l === undefined) throw notFound('ACCOUNT');
      const body = req.body as { externalId?: string; notes?: string };
      if (l.accountState !== 'APPROVED')
        throw fail('INVALID_ACCOUNT_STATE', `disbursement from ${l.accountState}`);
      // The organization setting "loan disbursals need to be approved by another Mambu user".
      if (!st.tenant.approverMayDisburse && l.approvedBy === user(res))
        throw fail('INVALID_USER_WHO_APPROVED_THE_LOAN_CANNOT_DISBURSE_IT');
      // DisbursementLoanTransactionInput.externalId: "Customizable and unique".
      const externalId = body.externalId ?? null;
      if (externalId !== null && st.transactions.some((t) => t.externalId === externalId))
        throw fail('DUPLICATE_TRANSACTION_EXTERNAL_ID', 'externalId');
      const t: SimTransaction = {
        encodedKey: newEncodedKey(),
        id: nextId(st),
        loanId: l.id,
        loanKey: l.encodedKey,
        type: 'DISBURSEMENT',
        amount: Number(l.loanAmountText),
        externalId,
        notes: body.notes ?? null,
        by: user(res),
        at: st.now(),
      };
      st.transactions.push(t);
      l.accountState = 'ACTIVE';
      l.disbursedBy = user(res);
      return { status: 201, body: transactionView(st, t) };
    }),
  );
}

async function readUpload(req: Request): Promise<{ file: File; fields: Record<string, string> }> {
  if (!Buffer.isBuffer(req.body)) throw fail('INVALID_PARAMETERS', 'a multipart/form-data body is required');
  const form = await new WebResponse(req.body, {
    headers: { 'content-type': req.header('content-type') ?? '' },
  }).formData();
  const file = form.get('file');
  if (file === null || typeof file === 'string') throw fail('INVALID_PARAMETERS', 'file: required');
  const fields: Record<string, string> = {};
  for (const [k, v] of form.entries()) if (k !== 'file') fields[k] = typeof v === 'string' ? v : '(a file)';
  return { file, fields };
}

function documentRoutes(app: Express, st: SimState, base: string): void {
  let docSeq = 1;
  app.post(
    `${base}/documents`,
    route(st, 'uploadDocument', async (req) => {
      const { file, fields } = await readUpload(req);
      const parsed = documentUpload.safeParse(fields);
      if (!parsed.success) throw fail('INVALID_PARAMETERS', contractProblem(parsed.error));
      const lists: Record<string, SimRecord[]> = {
        CLIENT: st.clients,
        GROUP: st.groups,
        LOAN_ACCOUNT: st.loans,
      };
      const list = lists[parsed.data.ownerType];
      if (list === undefined)
        throw fail('INVALID_PARAMETERS', `ownerType ${parsed.data.ownerType} is not simulated`);
      const owner = byRef(list, parsed.data.id);
      if (owner === undefined) throw fail('INVALID_ENTITY_ID', 'id');
      const doc: SimDocument = {
        encodedKey: newEncodedKey(),
        id: docSeq++,
        ownerType: parsed.data.ownerType,
        ownerKey: owner.encodedKey,
        name: checkDocumentName(parsed.data.name),
        notes: parsed.data.notes ?? null,
        fileSize: file.size,
        fileName: file.name,
        at: st.now(),
      };
      st.documents.push(doc);
      return { status: 201, body: documentView(st, doc) };
    }),
  );
  app.get(
    `${base}/documents/documentsMetadata`,
    route(st, 'listDocuments', (req, res) => {
      const entity = typeof req.query['entity'] === 'string' ? req.query['entity'] : '';
      const owner = typeof req.query['ownerKey'] === 'string' ? req.query['ownerKey'] : '';
      const docs = st.documents.filter((d) => d.ownerType === entity && d.ownerKey === owner);
      return {
        body: paged(
          req,
          res,
          docs.map((d) => documentView(st, d)),
        ),
      };
    }),
  );
}

function setupRoutes(app: Express, st: SimState, base: string): void {
  app.get(
    `${base}/loanproducts`,
    route(st, 'listProducts', (req, res) => ({ body: paged(req, res, st.products.map(productView)) })),
  );
  app.get(
    `${base}/loanproducts/:id`,
    route(st, 'getProduct', (req) => {
      const p = st.products.find((x) => x.id === req.params['id'] || x.encodedKey === req.params['id']);
      if (p === undefined) throw fail('INVALID_PRODUCT_ID', undefined, 404, 301);
      return { body: productView(p) };
    }),
  );
  app.get(
    `${base}/customfieldsets`,
    route(st, 'listCustomFieldSets', (req, res) => {
      const entity = typeof req.query['availableFor'] === 'string' ? req.query['availableFor'] : '';
      const list = Object.entries(st.tenant.customFieldSets[entity] ?? {}).map(([id, fields]) => ({
        id,
        name: id,
        availableFor: entity,
        type: 'SINGLE',
        customFields: fields.map((f) => ({ id: f })),
      }));
      return { body: paged(req, res, list) };
    }),
  );
  app.get(
    `${base}/setup/organization`,
    route(st, 'getOrganization', () => ({
      body: {
        institutionName: st.tenant.institutionName,
        timeZoneID: st.tenant.timeZone,
        currency: 'USD',
        dateFormat: 'dd-MM-yyyy',
        dateTimeFormat: 'dd-MM-yyyy HH:mm:ss',
        decimalSeparator: 'POINT',
      },
    })),
  );
}

/** Every operation of contract.ts MAMBU_OPERATIONS, under `base` (/api). */
export function registerRoutes(app: Express, st: SimState, base: string): void {
  customerRoutes(app, st, base);
  loanRoutes(app, st, base);
  transactionRoutes(app, st, base);
  documentRoutes(app, st, base);
  setupRoutes(app, st, base);
}
