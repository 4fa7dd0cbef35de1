import type { BusinessRecord, DocumentRecord, LoanRecord, PersonRecord } from './model.js';
import type { WebhookEndpointRecord } from './state.js';

function compact<T extends object>(obj: T): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) if (v !== undefined) out[k] = v;
  return out;
}

/** PublicLoan. A loan marked malformed (admin) is served broken on purpose. */
export function publicLoan(loan: LoanRecord): unknown {
  const out = compact(loan.fields);
  switch (loan.malformed) {
    case 'amount':
      out['centsAmount'] = `${(loan.fields.centsAmount ?? 0) / 100}`;
      out['monthsTerm'] = 12.5;
      break;
    case 'missing_id':
      delete out['id'];
      break;
    case 'not_object':
      return `loan ${loan.fields.id}`;
    case 'unknown_values':
      // Schema-valid but surprising: values and fields a newer platform version might send.
      out['status'] = 'on_hold';
      out['paymentFrequency'] = 'every 4 weeks';
      out['rateType'] = 'hybrid';
      out['centsOriginationFee'] = 125_000;
      out['servicing'] = { platformVersion: '2.3', flags: ['beta'] };
      break;
    default:
      break;
  }
  return out;
}

/** Invented PublicLoanBoarding shape (docs/sandbox.md). */
export function publicBoarding(loan: LoanRecord): Record<string, unknown> | null {
  const b = loan.boarding;
  if (!b) return null;
  return {
    id: b.id,
    boarded: b.boarded,
    releasedAt: b.releasedAt,
    releasedBy: b.releasedBy,
    boardedAt: b.boardedAt,
    boardingReference: b.boardingReference,
  };
}

export function queueItem(loan: LoanRecord): unknown {
  const base = publicLoan(loan);
  if (base === null || typeof base !== 'object') return base;
  return { ...(base as Record<string, unknown>), boarding: publicBoarding(loan) };
}

export function publicBusiness(
  b: BusinessRecord,
  opts: { fullEin: boolean; withNaics: boolean },
): Record<string, unknown> {
  return compact({
    id: b.id,
    name: b.name,
    dba: b.dba,
    entityType: b.entityType,
    einLast4: b.ein === null ? null : b.ein.slice(-4),
    ein: opts.fullEin && b.ein !== null ? `${b.ein.slice(0, 2)}-${b.ein.slice(2)}` : undefined,
    state: b.state,
    naics: opts.withNaics ? b.naics : undefined,
    role: b.role,
  });
}

export function publicPerson(p: PersonRecord, opts: { fullSsn: boolean }): Record<string, unknown> {
  return compact({
    id: p.id,
    firstName: p.firstName,
    lastName: p.lastName,
    ssnLast4: p.ssn.slice(-4),
    ssn: opts.fullSsn ? `${p.ssn.slice(0, 3)}-${p.ssn.slice(3, 5)}-${p.ssn.slice(5)}` : undefined,
    role: p.role,
    email: p.email,
    dateOfBirth: p.dateOfBirth,
  });
}

/** Document record (confirm response) and, with `version`/`versions`, the document list item. */
export function publicDocument(d: DocumentRecord): Record<string, unknown> {
  const latest = d.versions[d.versions.length - 1];
  return {
    id: d.id,
    name: d.name,
    type: d.type,
    size: latest?.size ?? d.bytes.length,
    category: d.category,
    uploadedAt: latest?.uploadedAt ?? d.uploadedAt,
    period: d.period,
    version: latest?.version ?? 0,
    signed: d.signed,
    requirement: d.requirement
      ? {
          id: d.requirement.id,
          name: d.requirement.name,
          status: d.requirementStatus,
          module: d.requirement.module,
          entityType: 'loan',
          entityID: d.loanId,
          period: d.period,
          periods: d.requirement.periods,
        }
      : null,
  };
}

export function publicEndpoint(e: WebhookEndpointRecord, withSecret = false): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: e.id,
    name: e.name,
    url: e.url,
    environment: e.environment,
    status: e.status,
    subscribedEvents: [...e.subscribedEvents],
    consecutiveFailures: e.consecutiveFailures,
    lastSuccessAt: e.lastSuccessAt,
    lastFailureAt: e.lastFailureAt,
    lastFailureReason: e.lastFailureReason,
    autoDisabledAt: e.autoDisabledAt,
    createdAt: e.createdAt,
  };
  if (withSecret) out['secret'] = e.secret;
  return out;
}
