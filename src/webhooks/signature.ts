import { createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhooksConfig } from '../config/schema.js';

export type SignatureScheme = WebhooksConfig['scheme'];

/** Why a delivery was refused; used as a metric label and in logs, never echoed to the caller. */
export type RejectReason =
  | 'missing_headers'
  | 'malformed_headers'
  | 'bad_signature'
  | 'timestamp_out_of_tolerance'
  | 'no_secret_configured'
  | 'too_large'
  | 'invalid_json'
  | 'invalid_payload'
  | 'unsupported_encoding'
  | 'bad_request';

export const REJECT_STATUS: Readonly<Record<RejectReason, number>> = {
  missing_headers: 400,
  malformed_headers: 400,
  bad_signature: 401,
  timestamp_out_of_tolerance: 401,
  no_secret_configured: 401,
  too_large: 413,
  invalid_json: 400,
  invalid_payload: 400,
  unsupported_encoding: 415,
  bad_request: 400,
};

export type VerifyResult =
  | {
      ok: true;
      /** The delivery id from the signature headers (standard/svix); null when the scheme has none. */
      webhookId: string | null;
      /** Signed (or declared) timestamp in epoch ms; null when the scheme carries none. */
      timestampMs: number | null;
    }
  | { ok: false; reason: RejectReason; detail: string };

/** Header lookup: Node lower-cases incoming header names; repeated headers come as arrays. */
export type HeaderBag = Record<string, string | string[] | undefined>;

export interface Verifier {
  readonly scheme: SignatureScheme;
  verify(headers: HeaderBag, rawBody: Buffer, nowMs: number): VerifyResult;
}

export interface VerifierOptions {
  scheme: SignatureScheme;
  /** Every secret currently accepted (rotation: old and new side by side). */
  secrets: readonly string[];
  toleranceSeconds: number;
}

/** Header names of the plain `hmac-sha256-hex` scheme (documented in docs/webhooks.md). */
export const HEX_SIGNATURE_HEADER = 'x-signature';
export const HEX_TIMESTAMP_HEADER = 'x-timestamp';

function header(headers: HeaderBag, name: string): string | undefined {
  const v = headers[name];
  const s = Array.isArray(v) ? v.join(' ') : v;
  return s === undefined || s.trim() === '' ? undefined : s.trim();
}

/** Standard Webhooks / Svix keys are base64 after the `whsec_` prefix; a bare base64 key is accepted too. */
function standardKey(secret: string): Buffer | null {
  const b64 = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return null;
  const key = Buffer.from(b64, 'base64');
  return key.length > 0 ? key : null;
}

/** Constant-time equality of two byte strings; unequal lengths are a plain mismatch. */
function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function parseSeconds(text: string): number | null {
  if (!/^\d{1,12}$/.test(text)) return null;
  return Number(text) * 1000;
}

function withinTolerance(tsMs: number, nowMs: number, toleranceSeconds: number): boolean {
  return Math.abs(nowMs - tsMs) <= toleranceSeconds * 1000;
}

function standardFamily(scheme: 'standard' | 'svix', opts: VerifierOptions): Verifier {
  const prefix = scheme === 'standard' ? 'webhook' : 'svix';
  const keys = opts.secrets.map(standardKey).filter((k): k is Buffer => k !== null);
  return {
    scheme,
    verify(headers, rawBody, nowMs) {
      const id = header(headers, `${prefix}-id`);
      const ts = header(headers, `${prefix}-timestamp`);
      const sig = header(headers, `${prefix}-signature`);
      if (id === undefined || ts === undefined || sig === undefined) {
        return {
          ok: false,
          reason: 'missing_headers',
          detail: `expected ${prefix}-id, ${prefix}-timestamp and ${prefix}-signature`,
        };
      }
      const tsMs = parseSeconds(ts);
      if (tsMs === null)
        return {
          ok: false,
          reason: 'malformed_headers',
          detail: `${prefix}-timestamp is not integer seconds`,
        };
      if (!withinTolerance(tsMs, nowMs, opts.toleranceSeconds)) {
        return {
          ok: false,
          reason: 'timestamp_out_of_tolerance',
          detail: `${prefix}-timestamp ${ts} is more than ${opts.toleranceSeconds}s from now`,
        };
      }
      if (keys.length === 0)
        return {
          ok: false,
          reason: 'no_secret_configured',
          detail: 'webhooks.secrets has no usable whsec_ secret',
        };
      // Several space-separated "v1,<base64>" entries may arrive (the sender is rotating too).
      const offered = sig
        .split(' ')
        .map((p) => p.trim())
        .filter((p) => p.startsWith('v1,'))
        .map((p) => Buffer.from(p.slice(3), 'base64'));
      if (offered.length === 0)
        return { ok: false, reason: 'bad_signature', detail: 'no v1 signature in header' };
      const signed = Buffer.concat([Buffer.from(`${id}.${ts}.`, 'utf8'), rawBody]);
      for (const key of keys) {
        const expected = createHmac('sha256', key).update(signed).digest();
        if (offered.some((o) => sameBytes(o, expected)))
          return { ok: true, webhookId: id, timestampMs: tsMs };
      }
      return { ok: false, reason: 'bad_signature', detail: 'no signature matched any configured secret' };
    },
  };
}

function stripe(opts: VerifierOptions): Verifier {
  const keys = opts.secrets.map((s) => Buffer.from(s, 'utf8'));
  return {
    scheme: 'stripe',
    verify(headers, rawBody, nowMs) {
      const h = header(headers, 'stripe-signature');
      if (h === undefined)
        return { ok: false, reason: 'missing_headers', detail: 'expected Stripe-Signature' };
      let t: string | undefined;
      const v1: Buffer[] = [];
      for (const part of h.split(',')) {
        const eq = part.indexOf('=');
        if (eq < 0) continue;
        const k = part.slice(0, eq).trim();
        const v = part.slice(eq + 1).trim();
        if (k === 't') t = v;
        else if (k === 'v1' && /^[0-9a-fA-F]{64}$/.test(v)) v1.push(Buffer.from(v, 'hex'));
      }
      const tsMs = t === undefined ? null : parseSeconds(t);
      if (t === undefined || tsMs === null)
        return { ok: false, reason: 'malformed_headers', detail: 'Stripe-Signature has no valid t=' };
      if (!withinTolerance(tsMs, nowMs, opts.toleranceSeconds)) {
        return {
          ok: false,
          reason: 'timestamp_out_of_tolerance',
          detail: `Stripe-Signature t=${t} is more than ${opts.toleranceSeconds}s from now`,
        };
      }
      if (keys.length === 0)
        return { ok: false, reason: 'no_secret_configured', detail: 'webhooks.secrets is empty' };
      if (v1.length === 0)
        return { ok: false, reason: 'bad_signature', detail: 'no v1= signature in Stripe-Signature' };
      const signed = Buffer.concat([Buffer.from(`${t}.`, 'utf8'), rawBody]);
      for (const key of keys) {
        const expected = createHmac('sha256', key).update(signed).digest();
        if (v1.some((o) => sameBytes(o, expected))) return { ok: true, webhookId: null, timestampMs: tsMs };
      }
      return { ok: false, reason: 'bad_signature', detail: 'no signature matched any configured secret' };
    },
  };
}

function hmacHex(opts: VerifierOptions): Verifier {
  const keys = opts.secrets.map((s) => Buffer.from(s, 'utf8'));
  return {
    scheme: 'hmac-sha256-hex',
    verify(headers, rawBody, nowMs) {
      const raw = header(headers, HEX_SIGNATURE_HEADER);
      if (raw === undefined) return { ok: false, reason: 'missing_headers', detail: 'expected X-Signature' };
      const hex = raw.startsWith('sha256=') ? raw.slice('sha256='.length) : raw;
      if (!/^[0-9a-fA-F]{64}$/.test(hex))
        return { ok: false, reason: 'malformed_headers', detail: 'X-Signature is not 64 hex digits' };
      // Neither X-Timestamp nor X-Webhook-Id is covered by the signature: the timestamp, when
      // present, still bounds how stale a delivery may be, but the delivery id must come from
      // signed material (the payload's id, else a hash of the signed body: event.ts), or one
      // captured delivery replayed with fresh X-Webhook-Id values makes a new inbox row each time.
      let tsMs: number | null = null;
      const ts = header(headers, HEX_TIMESTAMP_HEADER);
      if (ts !== undefined) {
        tsMs = parseSeconds(ts);
        if (tsMs === null)
          return { ok: false, reason: 'malformed_headers', detail: 'X-Timestamp is not integer seconds' };
        if (!withinTolerance(tsMs, nowMs, opts.toleranceSeconds)) {
          return {
            ok: false,
            reason: 'timestamp_out_of_tolerance',
            detail: `X-Timestamp ${ts} is more than ${opts.toleranceSeconds}s from now`,
          };
        }
      }
      if (keys.length === 0)
        return { ok: false, reason: 'no_secret_configured', detail: 'webhooks.secrets is empty' };
      const offered = Buffer.from(hex, 'hex');
      for (const key of keys) {
        if (sameBytes(offered, createHmac('sha256', key).update(rawBody).digest())) {
          return { ok: true, webhookId: null, timestampMs: tsMs };
        }
      }
      return { ok: false, reason: 'bad_signature', detail: 'no signature matched any configured secret' };
    },
  };
}

/** The verifier of the configured scheme; the scheme is chosen by config, never guessed from headers. */
export function createVerifier(opts: VerifierOptions): Verifier {
  switch (opts.scheme) {
    case 'standard':
    case 'svix':
      return standardFamily(opts.scheme, opts);
    case 'stripe':
      return stripe(opts);
    case 'hmac-sha256-hex':
      return hmacHex(opts);
  }
}

/** Secrets that cannot work with the scheme (e.g. not base64 after whsec_), for a startup warning. */
export function unusableSecrets(scheme: SignatureScheme, secrets: readonly string[]): number[] {
  if (scheme !== 'standard' && scheme !== 'svix') return [];
  return secrets.flatMap((s, i) => (standardKey(s) === null ? [i] : []));
}
