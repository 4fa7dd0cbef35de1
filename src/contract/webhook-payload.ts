/**
 * Reading values out of the platform's webhook payloads, whose shape the spec does not show: shared
 * by the receiver (webhooks/event.ts) and the store, which reads funded times back from the inbox.
 */

export function asRecord(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

/** The last millisecond of year 9999: later "times" (e.g. epoch nanoseconds read as ms) are not times. */
const MAX_TIME_MS = 253_402_300_799_999;

/**
 * Epoch ms from an ISO string or epoch seconds/ms; null when it is not a time, including one
 * outside years 1970–9999 (every result formats with `toISOString`, four-digit year).
 */
export function parseTime(v: unknown): number | null {
  if (typeof v === 'number' && Number.isFinite(v) && v > 0) {
    const ms = v < 1e12 ? Math.round(v * 1000) : Math.round(v);
    return ms <= MAX_TIME_MS ? ms : null;
  }
  if (typeof v === 'string' && v.trim() !== '') {
    if (/^\d+(\.\d+)?$/.test(v.trim())) return parseTime(Number(v));
    // Only full date-times: a bare date would be read as UTC midnight (domain-notes: never).
    if (!/^\d{4}-\d{2}-\d{2}T/.test(v.trim())) return null;
    const ms = Date.parse(v);
    return Number.isNaN(ms) || ms < 0 || ms > MAX_TIME_MS ? null : ms;
  }
  return null;
}

/** The funded time a loan.funded event carries, else its event time. */
export function extractFundedAt(event: { payload: Record<string, unknown>; occurredAt: number }): number {
  const data = asRecord(event.payload['data']);
  const loan = asRecord(data?.['loan']);
  for (const c of [data?.['fundedAt'], data?.['funded_at'], loan?.['fundedAt'], loan?.['funded_at']]) {
    const t = parseTime(c);
    if (t !== null) return t;
  }
  return event.occurredAt;
}
