import { createHash } from 'node:crypto';
import { z } from 'zod';
import { WEBHOOK_EVENTS } from '../contract/schemas.js';
import { asRecord, parseTime } from '../contract/webhook-payload.js';

/**
 * The delivery payload of the real platform is "not shown" in its spec, so the envelope is parsed
 * tolerantly: an object whose event type is under `type` (or `event`, `eventType`…), whose loan id
 * may be at `data.loanId`, `data.loan.id`, `data.id` (loan.* events) and whose time may be under
 * several names. Anything else passes through untouched in the stored payload.
 */
const timeLike = z.union([z.string(), z.number()]).optional().catch(undefined);
const idLike = z
  .union([z.string().min(1), z.number().int()])
  .optional()
  .catch(undefined);

export const webhookEnvelopeSchema = z.looseObject({
  id: idLike,
  type: z.string().optional().catch(undefined),
  event: z.string().optional().catch(undefined),
  eventType: z.string().optional().catch(undefined),
  event_type: z.string().optional().catch(undefined),
  createdAt: timeLike,
  created_at: timeLike,
  occurredAt: timeLike,
  timestamp: timeLike,
  created: timeLike,
  loanId: idLike,
  data: z.unknown().optional(),
});

export type KnownEventType = (typeof WEBHOOK_EVENTS)[number];

export interface WebhookEvent {
  /** Dedupe key: the signature header id, else the payload id, else a hash of the body. */
  webhookId: string;
  /** As sent; 'unknown' when the payload names none. */
  type: string;
  known: boolean;
  loanId: string | null;
  /** Event time in epoch ms (payload, else signed timestamp, else receipt). */
  occurredAt: number;
  payload: Record<string, unknown>;
}

/** Why a JSON value was refused as an event envelope (only non-objects are refused). */
export class InvalidPayloadError extends Error {
  override readonly name = 'InvalidPayloadError';
}

function asId(v: unknown): string | undefined {
  if (typeof v === 'string' && v.trim() !== '') return v.trim();
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  return undefined;
}

/** Where a loan id may hide in an envelope, most specific first. */
export function extractLoanId(type: string, envelope: Record<string, unknown>): string | null {
  const data = asRecord(envelope['data']);
  const loan = asRecord(data?.['loan']);
  const object = asRecord(data?.['object']);
  const document = asRecord(data?.['document']);
  const candidates: unknown[] = [
    data?.['loanId'],
    data?.['loan_id'],
    loan?.['id'],
    document?.['loanId'],
    object?.['loanId'],
    envelope['loanId'],
  ];
  // A bare data.id is the loan only on loan.* events (on document.* it is the document).
  if (type.startsWith('loan.')) candidates.push(data?.['id'], object?.['id']);
  for (const c of candidates) {
    const id = asId(c);
    if (id !== undefined) return id;
  }
  return null;
}

export interface ToEventContext {
  webhookIdHeader: string | null;
  signedTimestampMs: number | null;
  receivedAt: number;
  rawBody: Buffer;
}

const KNOWN_EVENTS: ReadonlySet<string> = new Set(WEBHOOK_EVENTS);

/**
 * Validates a parsed JSON value against `webhookEnvelopeSchema` and extracts what the inbox
 * indexes on. Only a value that is not an object is refused: every field is "this type, else
 * absent", so an envelope of an unexpected shape is still stored and recorded.
 */
export function toWebhookEvent(json: unknown, ctx: ToEventContext): WebhookEvent {
  const payload = asRecord(json);
  const parsed = webhookEnvelopeSchema.safeParse(json);
  if (payload === undefined || !parsed.success) throw new InvalidPayloadError('expected a JSON object');
  const env = parsed.data;
  const type = env.type ?? env.event ?? env.eventType ?? env.event_type ?? 'unknown';
  const payloadId = asId(env.id);
  const webhookId =
    ctx.webhookIdHeader ??
    (payloadId !== undefined
      ? `evt:${payloadId}`
      : `sha256:${createHash('sha256').update(ctx.rawBody).digest('hex')}`);
  const occurredAt =
    [env.occurredAt, env.createdAt, env.created_at, env.timestamp, env.created]
      .map(parseTime)
      .find((t) => t !== null) ??
    ctx.signedTimestampMs ??
    ctx.receivedAt;
  return {
    webhookId,
    type,
    known: KNOWN_EVENTS.has(type),
    loanId: extractLoanId(type, payload),
    occurredAt,
    payload,
  };
}
