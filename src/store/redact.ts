import { scrubText } from '../lib/logger.js';

// A bare 9-digit run: how a core or a mapping writes an EIN/SSN without dashes. (The logger's
// scrubber only knows the dashed forms, because 9-digit cents amounts are common in logs; text
// that ends up in SQLite is rarer and may over-redact.)
const BARE_TIN = /(?<![\d.])\d{9}(?![\d.])/g;

/** Text bound for SQLite (error messages, event details): no full tax id, key or presigned query. */
export function redactForStorage(text: string): string {
  return scrubText(text).replace(BARE_TIN, '[redacted-tin]');
}

/** Deep copy with every string redacted; numbers and structure unchanged. */
export function redactDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactForStorage(value);
  if (depth > 8 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, depth + 1));
  if (value instanceof Error) return { name: value.name, message: redactForStorage(value.message) };
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = redactDeep(v, depth + 1);
  return out;
}

/** Field names whose values are secrets or tax ids whatever their type (a TIN may come as a number). */
const SENSITIVE_KEY = /^(ein|ssn|tin|taxid|tax_id|apikey|api_key|secret|password|token|authorization)$/i;
const MAX_STORED_DEPTH = 12;

/**
 * A webhook payload as the inbox may keep it: every string redacted like any stored value, fields
 * named like a tax id or a secret replaced whatever their type, and nothing below a depth the
 * connector reads kept (a hostile payload must not hide a value where redaction does not look).
 */
export function redactPayload(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactForStorage(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_STORED_DEPTH) return '[truncated]';
  if (Array.isArray(value)) return value.map((v) => redactPayload(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    out[k] = SENSITIVE_KEY.test(k) && v !== null && v !== undefined && v !== '' ? '[redacted]' : redactPayload(v, depth + 1);
  }
  return out;
}
