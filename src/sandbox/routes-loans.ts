import { z } from 'zod';
import { apiError, fromZod, invalidInput, notFound, validationFailed } from './api-error.js';
import {
  LOAN_STATUSES,
  PAYMENT_FREQUENCIES,
  RATE_TYPES,
  LOAN_TYPES,
  ENTITY_TYPES,
  ENTITY_ROLES,
  type LoanRecord,
} from './model.js';
import { compareKeys, pageRequest, paginate, type SortValue } from './pagination.js';
import { ok, type RouteContext, type RouteDef, type RouteResult } from './route-table.js';
import { publicBusiness, publicLoan, publicPerson, queueItem } from './serialize.js';
import { parseStrictDateTime } from './time.js';

const MAX = Number.MAX_SAFE_INTEGER;
const SORTS = ['createdAt', 'centsAmount', 'status', 'loanNumber'] as const;

function liveLoanOr404(c: RouteContext): LoanRecord {
  const loan = c.state.liveLoan(c.params['id'] ?? '');
  if (!loan || loan.orgId !== c.key.orgId) throw notFound('loan.not_found', 'loan');
  return loan;
}

function sortValue(loan: LoanRecord, field: (typeof SORTS)[number]): SortValue {
  switch (field) {
    case 'createdAt':
      return loan.createdAtMs;
    case 'centsAmount':
      return loan.fields.centsAmount ?? -1;
    case 'status':
      return loan.fields.status;
    case 'loanNumber':
      return loan.fields.loanNumber ?? '';
  }
}

function sortLoans(loans: LoanRecord[], field: (typeof SORTS)[number], order: 'asc' | 'desc'): LoanRecord[] {
  const sign = order === 'asc' ? 1 : -1;
  return [...loans].sort((a, b) => {
    const va = sortValue(a, field);
    const vb = sortValue(b, field);
    if (va !== vb)
      return (
        sign * (typeof va === 'number' && typeof vb === 'number' ? va - vb : String(va) < String(vb) ? -1 : 1)
      );
    return sign * (a.fields.id < b.fields.id ? -1 : a.fields.id > b.fields.id ? 1 : 0);
  });
}

function orgLoans(c: RouteContext): LoanRecord[] {
  return [...c.state.loans.values()].filter((l) => l.archivedAt === null && l.orgId === c.key.orgId);
}

function listLoans(c: RouteContext): RouteResult {
  const q = c.query;
  if (q['status'] !== undefined && !(LOAN_STATUSES as readonly string[]).includes(q['status'])) {
    throw invalidInput(`status must be one of ${LOAN_STATUSES.join(', ')}`, { field: 'status' });
  }
  const sort = q['sort'] ?? 'createdAt';
  if (!(SORTS as readonly string[]).includes(sort))
    throw invalidInput(`sort must be one of ${SORTS.join(', ')}`, { field: 'sort' });
  const order = q['order'] ?? 'desc';
  if (order !== 'asc' && order !== 'desc')
    throw invalidInput('order must be asc or desc', { field: 'order' });
  const cursorMode = q['cursor'] !== undefined;
  // Cursor mode always orders by creation time (spec); the order parameter still applies.
  const field = cursorMode ? 'createdAt' : (sort as (typeof SORTS)[number]);
  const scope = `loans:${order}`;
  const page = pageRequest({ limit: q['limit'], offset: q['offset'], cursor: q['cursor'] }, scope);
  let loans = orgLoans(c);
  if (q['status']) loans = loans.filter((l) => l.fields.status === q['status']);
  if (q['productId']) loans = loans.filter((l) => l.fields.product?.id === q['productId']);
  const sorted = sortLoans(loans, field, order);
  const p = paginate(sorted, page, (l) => [sortValue(l, field), l.fields.id], order, scope, c.legacy);
  return ok({ data: p.items.map(publicLoan), meta: p.meta });
}

function boardingQueue(c: RouteContext): RouteResult {
  const q = c.query;
  const boardedRaw = q['boarded'] ?? 'false';
  if (boardedRaw !== 'true' && boardedRaw !== 'false')
    throw invalidInput('boarded must be true or false', { field: 'boarded' });
  const boarded = boardedRaw === 'true';
  let sinceMs: number | null = null;
  if (q['boardedSince'] !== undefined) {
    if (!boarded)
      throw invalidInput('boardedSince is only allowed with boarded=true', { field: 'boardedSince' });
    const raw = q['boardedSince'];
    sinceMs = /^\d{4}-\d{2}-\d{2}$/.test(raw)
      ? parseStrictDateTime(`${raw}T00:00:00Z`)
      : parseStrictDateTime(raw);
    if (sinceMs === null)
      throw invalidInput(
        'boardedSince must be an ISO 8601 date-time with Z or an offset (or a date, read as 00:00Z)',
        { field: 'boardedSince' },
      );
  }
  const scope = `queue:${boarded}`;
  const page = pageRequest({ limit: q['limit'], offset: q['offset'], cursor: q['cursor'] }, scope);
  const keyOf = (l: LoanRecord): [SortValue, string] => [
    boarded ? (l.boarding?.boardedAtMs ?? 0) : (l.boarding?.releasedAtMs ?? 0),
    l.fields.id,
  ];
  const since = sinceMs;
  // Keys computed once per item: the sort runs on every queue request.
  const keyed = orgLoans(c)
    .filter((l) => l.boarding !== null && l.boarding.boarded === boarded)
    .filter((l) => since === null || (l.boarding?.boardedAtMs ?? 0) >= since)
    .map((l) => ({ l, k: keyOf(l) }))
    .sort((a, b) => compareKeys(a.k, b.k));
  const items = keyed.map((x) => x.l);
  const p = paginate(items, page, keyOf, 'asc', scope, c.legacy);
  return ok({ data: p.items.map(queueItem), meta: p.meta });
}

const dateTime = z.string().refine((v) => parseStrictDateTime(v) !== null, {
  message: 'expected an ISO 8601 date-time with a time and Z or a numeric offset, on a real calendar day',
});
const patchSchema = z
  .strictObject({
    centsAmount: z.number().int().gt(0).max(MAX),
    bpsFixedRate: z.number().int().min(0).max(MAX),
    bpsSpreadRate: z.number().int().min(0).max(MAX),
    bpsPrimeRate: z.number().int().min(0).max(MAX),
    rateType: z.enum(RATE_TYPES),
    monthsTerm: z.number().int().gt(0).max(MAX),
    monthsInterestOnly: z.number().int().min(0).max(MAX),
    paymentFrequency: z.enum(PAYMENT_FREQUENCIES),
    purpose: z.string(),
    purposeNarrative: z.string(),
    type: z.enum(LOAN_TYPES),
    loanNumber: z.string(),
    productId: z.string(),
    applicationDate: dateTime,
    closeDate: dateTime,
    firstPaymentDate: dateTime,
  })
  .partial();

function patchLoan(c: RouteContext): RouteResult {
  const loan = liveLoanOr404(c);
  const body = c.body;
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const managed = ['status', 'stage'].filter((f) => f in body);
    if (managed.length > 0) {
      throw validationFailed(
        managed.map((f) => ({
          path: [f],
          code: 'server_managed',
          message: `${f} is server-managed and cannot be updated`,
        })),
        body,
      );
    }
  }
  const parsed = patchSchema.safeParse(body);
  if (!parsed.success) throw fromZod(parsed.error, body ?? null);
  const patch = parsed.data;
  if (patch.productId !== undefined) {
    const product = c.state.products.find((p) => p.id === patch.productId);
    if (!product)
      throw validationFailed(
        [{ path: ['productId'], code: 'unknown_product', message: `no product ${patch.productId}` }],
        body,
      );
    loan.fields.product = { id: product.id, name: product.name };
  }
  const f = loan.fields;
  for (const k of [
    'centsAmount',
    'monthsTerm',
    'monthsInterestOnly',
    'paymentFrequency',
    'rateType',
    'purpose',
    'purposeNarrative',
    'type',
    'loanNumber',
    'applicationDate',
    'closeDate',
    'firstPaymentDate',
  ] as const) {
    const v = patch[k];
    if (v !== undefined) (f as unknown as Record<string, unknown>)[k] = v;
  }
  for (const k of ['bpsFixedRate', 'bpsSpreadRate', 'bpsPrimeRate'] as const) {
    const v = patch[k];
    if (v !== undefined) loan.rateParts[k] = v;
  }
  if (
    patch.bpsFixedRate !== undefined ||
    patch.bpsSpreadRate !== undefined ||
    patch.bpsPrimeRate !== undefined ||
    patch.rateType !== undefined
  ) {
    const r = loan.rateParts;
    f.bpsRate =
      f.rateType === 'variable'
        ? (r.bpsSpreadRate ?? 0) + (r.bpsPrimeRate ?? 0)
        : (r.bpsFixedRate ?? f.bpsRate ?? 0);
  }
  f.updatedAt = c.state.nowIso();
  return ok({ data: publicLoan(loan) });
}

function deleteLoan(c: RouteContext): RouteResult {
  const loan = liveLoanOr404(c);
  loan.archivedAt = c.state.nowIso();
  return ok({ message: `loan ${loan.fields.id} archived` });
}

function summary(c: RouteContext): RouteResult {
  const loan = liveLoanOr404(c);
  return ok({
    data: {
      loan: publicLoan(loan),
      metrics: {
        centsTotalAmount: loan.fields.centsAmount ?? 0,
        centsMonthlyPayment: loan.fields.centsMonthlyPayment ?? 0,
        monthsTerm: loan.fields.monthsTerm ?? 0,
        hasOpenTasks: loan.hasOpenTasks,
        hasMessages: loan.hasMessages,
      },
    },
  });
}

function entities(c: RouteContext): RouteResult {
  const loan = liveLoanOr404(c);
  const fullEin = c.key.permissions.has('read:businesses:ein');
  const fullSsn = c.key.permissions.has('read:people:ssn');
  return ok({
    data: {
      businesses: loan.businesses.map((b) => publicBusiness(b, { fullEin, withNaics: false })),
      people: loan.people.map((p) => publicPerson(p, { fullSsn })),
    },
  });
}

const searchDate = dateTime;
const searchSchema = z.looseObject({
  filters: z
    .strictObject({
      status: z.array(z.enum(LOAN_STATUSES)).optional(),
      productIds: z.array(z.string()).optional(),
      centsAmountMin: z.number().int().min(-MAX).max(MAX).optional(),
      centsAmountMax: z.number().int().min(-MAX).max(MAX).optional(),
      dateRange: z.strictObject({ from: searchDate.optional(), to: searchDate.optional() }).optional(),
    })
    .optional(),
  pagination: z
    .strictObject({
      limit: z.number().int().min(1).max(100).optional(),
      offset: z.number().int().min(0).max(MAX).optional(),
      cursor: z.string().optional(),
    })
    .refine((p) => !(p.cursor !== undefined && p.offset !== undefined), {
      message: 'cursor and offset are mutually exclusive',
    })
    .optional(),
  sort: z
    .strictObject({ field: z.enum(SORTS).optional(), order: z.enum(['asc', 'desc']).optional() })
    .optional(),
});

function search(c: RouteContext): RouteResult {
  const parsed = searchSchema.safeParse(c.body ?? {});
  if (!parsed.success) throw fromZod(parsed.error, c.body ?? null);
  const { filters = {}, pagination = {}, sort = {} } = parsed.data;
  const order = sort.order ?? 'desc';
  const cursorMode = pagination.cursor !== undefined;
  const field = cursorMode ? 'createdAt' : (sort.field ?? 'createdAt');
  const scope = `search:${order}`;
  const page = pageRequest(
    { limit: pagination.limit, offset: pagination.offset, cursor: pagination.cursor },
    scope,
    {
      limit: 'pagination.limit',
      offset: 'pagination.offset',
      cursor: 'pagination.cursor',
    },
  );
  const from = filters.dateRange?.from !== undefined ? parseStrictDateTime(filters.dateRange.from) : null;
  const to = filters.dateRange?.to !== undefined ? parseStrictDateTime(filters.dateRange.to) : null;
  const loans = orgLoans(c).filter((l) => {
    if (filters.status && !filters.status.includes(l.fields.status)) return false;
    if (filters.productIds && !filters.productIds.includes(l.fields.product?.id ?? '')) return false;
    const amount = l.fields.centsAmount;
    if (filters.centsAmountMin !== undefined && (amount === undefined || amount < filters.centsAmountMin))
      return false;
    if (filters.centsAmountMax !== undefined && (amount === undefined || amount > filters.centsAmountMax))
      return false;
    if (from !== null && l.createdAtMs < from) return false;
    if (to !== null && l.createdAtMs > to) return false;
    return true;
  });
  const sorted = sortLoans(loans, field, order);
  const p = paginate(sorted, page, (l) => [sortValue(l, field), l.fields.id], order, scope, c.legacy);
  return ok({ data: p.items.map(publicLoan), meta: p.meta });
}

const businessSchema = z.strictObject({
  name: z.string().trim().min(1),
  role: z.string().trim().min(1),
  ein: z
    .string()
    .regex(/^\d{2}-?\d{7}$/, { message: 'expected a 9-digit EIN (12-3456789)' })
    .optional(),
  dba: z.string().optional(),
  entityType: z.enum(ENTITY_TYPES).optional(),
  state: z.string().optional(),
  naics: z.string().max(6).optional(),
});

function normaliseRole(s: string): string {
  return s
    .trim()
    .toLowerCase()
    .replace(/[\s_-]+/g, ' ');
}

function createBusiness(c: RouteContext): RouteResult {
  const loan = liveLoanOr404(c);
  const parsed = businessSchema.safeParse(c.body);
  if (!parsed.success) throw fromZod(parsed.error, c.body ?? null);
  const b = parsed.data;
  const role = ENTITY_ROLES.find((r) => normaliseRole(r) === normaliseRole(b.role));
  if (!role) {
    throw apiError(
      400,
      'entity.role_unknown',
      `unknown role "${b.role}"; valid roles: ${ENTITY_ROLES.join(', ')}`,
      { field: 'role', validRoles: [...ENTITY_ROLES] },
    );
  }
  const record = {
    id: c.state.newShapedId('biz'),
    name: b.name,
    role,
    ein: b.ein === undefined ? null : b.ein.replace('-', ''),
    ...(b.dba !== undefined ? { dba: b.dba } : {}),
    ...(b.entityType !== undefined ? { entityType: b.entityType } : {}),
    ...(b.state !== undefined ? { state: b.state } : {}),
    ...(b.naics !== undefined ? { naics: b.naics } : {}),
  };
  loan.businesses.push(record);
  return ok({ data: publicBusiness(record, { fullEin: false, withNaics: true }) }, 201);
}

const ackSchema = z.looseObject({
  boardingReference: z.string().max(255).optional(),
  coreId: z.string().max(255).optional(),
  boardedAt: dateTime.optional(),
  notes: z.string().max(2000).optional(),
});

function acknowledge(c: RouteContext): RouteResult {
  const loan = liveLoanOr404(c);
  const parsed = ackSchema.safeParse(c.body ?? {});
  if (!parsed.success) throw fromZod(parsed.error, c.body ?? null);
  const id = loan.fields.id;
  const b = loan.boarding;
  if (!b) throw apiError(409, 'loan.not_released', `loan ${id} has not been released to the core`);
  if (b.boarded) {
    const dup = c.state.counters.duplicateAcks;
    dup[id] = (dup[id] ?? 0) + 1;
    throw apiError(409, 'loan.already_boarded', `loan ${id} was already boarded at ${b.boardedAt ?? '?'}`, {
      boardingId: b.id,
      boardedAt: b.boardedAt,
    });
  }
  const nowMs = c.state.nowMs();
  b.boarded = true;
  b.boardedAtMs = nowMs;
  b.boardedAt = new Date(nowMs).toISOString();
  b.boardingReference = parsed.data.boardingReference ?? parsed.data.coreId ?? null;
  b.acknowledgement = parsed.data;
  const counters = c.state.counters;
  counters.acks[id] = (counters.acks[id] ?? 0) + 1;
  (counters.ackKeys[id] ??= []).push(c.idempotencyKey ?? '');
  return ok({ data: queueItem(loan) });
}

export const loanRoutes: RouteDef[] = [
  { method: 'GET', pattern: '/loans', permission: 'read:loans', handler: listLoans },
  { method: 'GET', pattern: '/loans/boarding-queue', permission: 'read:boarding', handler: boardingQueue },
  { method: 'POST', pattern: '/loans/search', permission: 'read:loans', handler: search },
  {
    method: 'GET',
    pattern: '/loans/:id',
    permission: 'read:loans',
    handler: (c) => ok({ data: publicLoan(liveLoanOr404(c)) }),
  },
  { method: 'PATCH', pattern: '/loans/:id', permission: 'write:loans', handler: patchLoan },
  { method: 'DELETE', pattern: '/loans/:id', permission: 'write:loans', handler: deleteLoan },
  { method: 'GET', pattern: '/loans/:id/summary', permission: 'read:loans', handler: summary },
  { method: 'GET', pattern: '/loans/:id/entities', permission: 'read:businesses', handler: entities },
  {
    method: 'POST',
    pattern: '/loans/:id/businesses',
    permission: 'write:businesses',
    handler: createBusiness,
  },
  { method: 'POST', pattern: '/loans/:id/boarding', permission: 'write:boarding', handler: acknowledge },
];

export { liveLoanOr404 };
