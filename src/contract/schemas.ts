import { z } from 'zod';

/**
 * Schemas for the Loan Platform Public API (../shared/platform-api.md). Every object is loose:
 * unknown fields pass through untouched. Only identifiers are required, since the spec does not
 * say which fields are required or nullable; enumerations are plain strings so that a value the
 * spec does not list reaches the mapping (which decides) instead of failing a whole page.
 */
const cents = z.number().int().min(-Number.MAX_SAFE_INTEGER).max(Number.MAX_SAFE_INTEGER);
const optStr = z.string().nullish();
const optInt = z.number().int().nullish();

export const refSchema = z.looseObject({ id: z.string(), name: optStr });

export const loanSchema = z.looseObject({
  id: z.string().min(1),
  loanNumber: optStr,
  status: optStr,
  type: optStr,
  centsAmount: cents.nullish(),
  centsMonthlyPayment: cents.nullish(),
  monthsTerm: optInt,
  monthsInterestOnly: optInt,
  paymentFrequency: optStr,
  rateType: optStr,
  bpsRate: optInt,
  purpose: optStr,
  purposeNarrative: optStr,
  applicationDate: optStr,
  closeDate: optStr,
  maturityDate: optStr,
  firstPaymentDate: optStr,
  product: refSchema.nullish(),
  stage: refSchema.nullish(),
  createdAt: optStr,
  updatedAt: optStr,
});
export type Loan = z.infer<typeof loanSchema>;

/** PublicLoanBoarding: fields not shown in the spec; all optional, unknown ones kept. */
export const boardingSchema = z.looseObject({
  id: optStr,
  boarded: z.boolean().nullish(),
  releasedAt: optStr,
  releasedBy: z.unknown().optional(),
  boardedAt: optStr,
});
export type Boarding = z.infer<typeof boardingSchema>;

export const queueItemSchema = loanSchema.extend({ boarding: boardingSchema.nullish() });
export type QueueItem = z.infer<typeof queueItemSchema>;

export const offsetMetaSchema = z.looseObject({
  mode: z.literal('offset'),
  limit: z.number().int(),
  offset: z.number().int(),
  hasMore: z.boolean(),
  total: z.number().int().optional(),
});
export const cursorMetaSchema = z.looseObject({
  mode: z.literal('cursor'),
  limit: z.number().int(),
  hasMore: z.boolean(),
  nextCursor: z.string().nullable(),
});
export const paginationMetaSchema = z.discriminatedUnion('mode', [offsetMetaSchema, cursorMetaSchema]);
export type PaginationMeta = z.infer<typeof paginationMetaSchema>;

/** A page whose items are parsed one by one (see parsePageItems). */
export const rawPageSchema = z.looseObject({ data: z.array(z.unknown()), meta: paginationMetaSchema });

export const loanSummarySchema = z.looseObject({
  loan: loanSchema,
  metrics: z.looseObject({
    centsTotalAmount: cents.nullish(),
    centsMonthlyPayment: cents.nullish(),
    monthsTerm: optInt,
    hasOpenTasks: z.boolean().nullish(),
    hasMessages: z.boolean().nullish(),
  }),
});
export type LoanSummary = z.infer<typeof loanSummarySchema>;

export const businessSchema = z.looseObject({
  id: z.string().min(1),
  name: optStr,
  dba: optStr,
  entityType: optStr,
  einLast4: optStr,
  /** Present only when the key has read:businesses:ein. */
  ein: optStr,
  state: optStr,
  naics: optStr,
  role: optStr,
});
export type Business = z.infer<typeof businessSchema>;

export const personSchema = z.looseObject({
  id: z.string().min(1),
  firstName: optStr,
  lastName: optStr,
  ssnLast4: optStr,
  /** Present only when the key has read:people:ssn. */
  ssn: optStr,
  role: optStr,
});
export type Person = z.infer<typeof personSchema>;

export const entitiesSchema = z.looseObject({
  businesses: z.array(businessSchema).default([]),
  people: z.array(personSchema).default([]),
});
export type Entities = z.infer<typeof entitiesSchema>;

export const requirementSchema = z.looseObject({
  id: optStr,
  name: optStr,
  status: optStr,
  module: optStr,
  entityType: optStr,
  entityID: optStr,
  period: optStr,
});

/** Document record (confirm response); the list item shape is not shown, assumed the same. */
export const documentSchema = z.looseObject({
  id: z.string().min(1),
  name: optStr,
  type: optStr,
  size: optInt,
  category: optStr,
  uploadedAt: optStr,
  period: optStr,
  requirement: requirementSchema.nullish(),
});
export type PlatformDocument = z.infer<typeof documentSchema>;

/** Download address: shape not shown; `url` (or `downloadUrl`) plus an optional expiry. */
export const downloadAddressSchema = z
  .looseObject({ url: z.string().optional(), downloadUrl: z.string().optional(), expiresAt: optStr })
  .refine((d) => typeof (d.url ?? d.downloadUrl) === 'string', { message: 'expected url or downloadUrl' })
  .transform((d) => ({ ...d, url: (d.url ?? d.downloadUrl) as string }));
export type DownloadAddress = z.infer<typeof downloadAddressSchema>;

export const productSchema = z.looseObject({ id: z.string().min(1), name: optStr });
export type Product = z.infer<typeof productSchema>;

export const WEBHOOK_EVENTS = [
  'loan.created',
  'loan.status_changed',
  'loan.funded',
  'document.uploaded',
  'document.signed',
] as const;

export const webhookEndpointSchema = z.looseObject({
  id: z.string().min(1),
  name: optStr,
  url: optStr,
  environment: optStr,
  status: optStr,
  subscribedEvents: z.array(z.string()).nullish(),
  consecutiveFailures: optInt,
  lastSuccessAt: optStr,
  lastFailureAt: optStr,
  lastFailureReason: optStr,
  autoDisabledAt: optStr,
  createdAt: optStr,
});
export type WebhookEndpoint = z.infer<typeof webhookEndpointSchema>;
export const webhookEndpointWithSecretSchema = webhookEndpointSchema.extend({ secret: z.string().min(1) });
export type WebhookEndpointWithSecret = z.infer<typeof webhookEndpointWithSecretSchema>;

/** Acknowledgement response: not shown; anything is accepted and kept for the audit log. */
export const ackResponseSchema = z.unknown();

export const errorBodySchema = z.looseObject({
  code: z.string(),
  message: z.string().optional(),
  retryAfter: z.number().optional(),
});
export const validationErrorBodySchema = z.looseObject({
  success: z.literal(false),
  error: z.array(z.unknown()),
  data: z.unknown().optional(),
});

export function dataOf<T extends z.ZodType>(schema: T) {
  return z.looseObject({ data: schema });
}

export interface InvalidItem {
  /** The item's id if it had one, so the pipeline can quarantine that loan. */
  id: string | null;
  index: number;
  problems: string[];
  raw: unknown;
}

/** Parses each item on its own: one malformed item never costs the rest of the page. */
export function parsePageItems<T extends z.ZodType>(
  schema: T,
  items: readonly unknown[],
): { items: z.infer<T>[]; invalid: InvalidItem[] } {
  const ok: z.infer<T>[] = [];
  const invalid: InvalidItem[] = [];
  items.forEach((raw, index) => {
    const r = schema.safeParse(raw);
    if (r.success) {
      ok.push(r.data);
    } else {
      const id =
        raw !== null && typeof raw === 'object' && typeof (raw as { id?: unknown }).id === 'string'
          ? (raw as { id: string }).id
          : null;
      invalid.push({
        id,
        index,
        raw,
        problems: r.error.issues.map((i) => `${i.path.map(String).join('.') || '(item)'}: ${i.message}`),
      });
    }
  });
  return { items: ok, invalid };
}
