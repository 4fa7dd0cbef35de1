/** In-memory records of the sandbox. Public shapes are produced by serialize.ts. */

export const LOAN_STATUSES = ['draft', 'application', 'active', 'denied', 'withdrawn', 'funded'] as const;
export type LoanStatus = (typeof LOAN_STATUSES)[number];
export const PAYMENT_FREQUENCIES = [
  'weekly',
  'biweekly',
  'monthly',
  'quarterly',
  'semi-annual',
  'annual',
  'lump sum',
  'irregular payments',
] as const;
export const RATE_TYPES = ['fixed', 'variable'] as const;
export const LOAN_TYPES = ['business', 'personal'] as const;
export const ENTITY_TYPES = [
  'C-Corp',
  'S-Corp',
  'General Partnership',
  'Limited Liability Company',
  'Limited Liability Partnership',
  'Sole Proprietorship',
  'Trust',
] as const;
/** Entity-in-loan roles the sandbox resolves (the entities list echoes these names). */
export const ENTITY_ROLES = ['borrower', 'co-borrower', 'guarantor', 'owner', 'key principal'] as const;
export const WEBHOOK_EVENT_TYPES = [
  'loan.created',
  'loan.status_changed',
  'loan.funded',
  'document.uploaded',
  'document.signed',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export interface Ref {
  id: string;
  name: string;
}

/** Fields served as PublicLoan; undefined fields are omitted from the JSON. */
export interface LoanFields {
  id: string;
  loanNumber?: string;
  status: LoanStatus;
  type?: string;
  centsAmount?: number;
  centsMonthlyPayment?: number;
  monthsTerm?: number;
  monthsInterestOnly?: number;
  paymentFrequency?: string;
  rateType?: string;
  bpsRate?: number;
  purpose?: string;
  purposeNarrative?: string;
  applicationDate?: string;
  closeDate?: string;
  maturityDate?: string;
  firstPaymentDate?: string;
  product?: Ref | null;
  stage?: Ref | null;
  createdAt: string;
  updatedAt: string;
}

export interface Boarding {
  /** New on every release: a re-released loan gets a new boarding id (a release marker). */
  id: string;
  releasedAt: string;
  releasedAtMs: number;
  releasedBy: { id: string; name: string };
  boarded: boolean;
  boardedAt: string | null;
  boardedAtMs: number | null;
  boardingReference: string | null;
  /** The body of the acknowledgement that boarded it. */
  acknowledgement: unknown;
}

export interface BusinessRecord {
  id: string;
  name: string;
  dba?: string;
  entityType?: string;
  /** Digits only; null when a business was created without one. */
  ein: string | null;
  state?: string;
  naics?: string;
  role: string;
}

export interface PersonRecord {
  id: string;
  firstName: string;
  lastName: string;
  ssn: string;
  role: string;
  email?: string;
  dateOfBirth?: string;
}

export interface RequirementRecord {
  id: string;
  name: string;
  module: string;
  /** More than one period: confirm must name one (period_key_required). */
  periods: string[];
}

export interface DocumentVersion {
  version: number;
  size: number;
  uploadedAt: string;
  period: string | null;
}

export interface DocumentRecord {
  id: string;
  loanId: string;
  name: string;
  type: string;
  category: string;
  bytes: Buffer;
  uploadedAt: string;
  /** false until confirm: the bank cannot see it (not in the list). */
  attached: boolean;
  /** Size the upload claims to have, checked against the cap on confirm. */
  pendingSize: number | null;
  requirement: RequirementRecord | null;
  period: string | null;
  requirementStatus: string;
  versions: DocumentVersion[];
  signed: boolean;
}

/** Ways to corrupt a served loan so consumers can test per-item validation. */
export const MALFORMATIONS = ['amount', 'missing_id', 'not_object', 'unknown_values'] as const;
export type Malformation = (typeof MALFORMATIONS)[number];

export interface LoanRecord {
  fields: LoanFields;
  orgId: string;
  createdAtMs: number;
  archivedAt: string | null;
  rateParts: { bpsFixedRate?: number; bpsSpreadRate?: number; bpsPrimeRate?: number };
  boarding: Boarding | null;
  businesses: BusinessRecord[];
  people: PersonRecord[];
  documentIds: string[];
  hasOpenTasks: boolean;
  hasMessages: boolean;
  malformed: Malformation | null;
}

export interface ProductRecord {
  id: string;
  name: string;
  type: string;
  rateType: string;
  active: boolean;
  createdAt: string;
}
